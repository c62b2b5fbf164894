#!/usr/bin/env bash
# A JVM found on the host that does not answer the attach in time (a busy
# host, a JVM stopped for a while) is tried twice more, 2 s apart, each
# time waiting twice as long: here it is stopped (SIGSTOP) as ember finds
# it, past the attach timeout (1 s), and its frames are named once it goes
# on, without a word of failure.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"

"$EMBER" record -a -F 499 --attach-timeout 1 -o "$TMP/out.folded" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress" &
ember=$!
wait_sampling $ember "$TMP/progress"
java -XX:CompileThresholdScaling=0.1 -cp "$TMP/classes" Workload 4 >"$TMP/jvm.out" 2>&1 &
jvm=$!
BACKGROUND+=($jvm)
# Stopped once it maps libjvm (what ember looks for, every 2 s), for 3 s:
# the first attempt waits 1 s for its socket in vain.
for _ in $(seq 300); do grep -q libjvm "/proc/$jvm/maps" 2>/dev/null && break; sleep 0.01; done
kill -STOP $jvm
sleep 3
kill -CONT $jvm
wait $jvm || fail "the JVM exited $?: $(cat "$TMP/jvm.out")"
kill -INT $ember
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
grep -E '^  java ' "$TMP/err"
assert_absent "$TMP/err" "^ember: JVM $jvm" "ember gave up on the JVM: $(grep "^ember: JVM $jvm" "$TMP/err")"
jit=$(weight "$TMP/out.folded" '^java;.*Workload\.hot[AB]_\[(j|i)\]')
all=$(weight "$TMP/out.folded" '^java;')
echo "stopped 3 s as it was found, then attached: $jit of its $all samples in Workload.hotA or hotB, compiled and named"
((jit >= 300)) || fail "only $jit of the JVM's $all samples named in compiled Workload.hotA/B"
