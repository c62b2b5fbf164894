#!/usr/bin/env bash
# A JVM found while it is still starting: HotSpot answers the attach before
# its live phase, when an agent can get no JVMTI, and on a busy host that
# lasts seconds (every JVM the fleet agent found early went unnamed). ember
# loads its agent again until the JVM is up, and names its frames; the
# JVM's output has no word of it. SlowStart holds the JVM in its start
# until ember's first load has been answered.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"

"$EMBER" record -a -F 499 -o "$TMP/out.folded" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress" &
ember=$!
wait_sampling $ember "$TMP/progress"
java -Djava.system.class.loader=SlowStart -Dslowstart.held="$TMP/held" -Dslowstart.go="$TMP/go" \
	-XX:CompileThresholdScaling=0.1 -cp "$TMP/classes" Workload 4 >"$TMP/jvm.out" 2>&1 &
jvm=$!
BACKGROUND+=($jvm)
# ember finds the JVM within a scan (2 s) and asks for its attach socket:
# the socket is there once the JVM has taken the request.
for _ in $(seq 300); do
	[ -e "$TMP/held" ] && [ -S "/tmp/.java_pid$jvm" ] && break
	sleep 0.1
done
[ -e "$TMP/held" ] || fail "the JVM did not reach its system class loader in 30 s: $(cat "$TMP/jvm.out")"
[ -S "/tmp/.java_pid$jvm" ] || fail "ember did not ask the starting JVM $jvm to attach in 30 s: $(cat "$TMP/err")"
sleep 1
touch "$TMP/go"
wait $jvm || fail "the JVM exited $?: $(cat "$TMP/jvm.out")"
kill -INT $ember
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
grep -E '^  java ' "$TMP/err"
assert_absent "$TMP/err" "^ember: JVM $jvm" "ember said of the JVM: $(grep "^ember: JVM $jvm" "$TMP/err")"
assert_absent "$TMP/jvm.out" "ember" "the agent wrote to the JVM's output: $(cat "$TMP/jvm.out")"
jit=$(weight "$TMP/out.folded" '^java;.*Workload\.hot[AB]_\[(j|i)\]')
all=$(weight "$TMP/out.folded" '^java;')
echo "attached while starting, then up: $jit of its $all samples in Workload.hotA or hotB, compiled and named"
# At 499 Hz main alone makes ~2,000 samples once the JVM is up.
((jit >= 300)) || fail "only $jit of the JVM's $all samples named in compiled Workload.hotA/B"
