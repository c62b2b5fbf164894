#!/usr/bin/env bash
# ember record -a attaches its agent to a JVM started during the recording
# (found within 2 s): its compiled methods are named, and the summary
# counts it.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
JAVA=(java -XX:CompileThresholdScaling=0.1 -cp "$TMP/classes")

"$EMBER" record -a -F 499 -o "$TMP/late.folded" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress" &
ember=$!
wait_sampling $ember "$TMP/progress"
"${JAVA[@]}" Workload 5 >/dev/null &
jvm=$!
wait $jvm || fail "the JVM exited $?"
kill -INT $ember
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
grep -E '^  java ' "$TMP/err"
# hotA and hotB, inlined into the compiled main ([i]) or not ([j]).
jit=$(weight "$TMP/late.folded" '^java;.*Workload\.hot[AB]_\[(j|i)\]')
all=$(weight "$TMP/late.folded" '^java;')
echo "the JVM started once ember sampled: $jit of its $all samples in Workload.hotA or hotB, compiled and named"
# At 499 Hz, main alone makes ~1,500 samples after the agent is in (2 s
# or so after the JVM starts); those before are unnamed.
((jit >= 300)) || fail "only $jit of the late JVM's $all samples named in compiled Workload.hotA/B"
assert_contains "$TMP/err" '^  java +1 JVMs' "the summary does not count the late JVM"
