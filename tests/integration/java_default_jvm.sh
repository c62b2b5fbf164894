#!/usr/bin/env bash
# kind: structural
# Java on this kernel: ember attaches to a running JVM started with default
# flags (no -XX:+PreserveFramePointer) and to one under -Xint; its JIT
# frames are named, each interpreted frame by its method, and Java stacks
# reach the thread's entry. The kernel matrix runs it on every kernel, so
# it counts and names, and leaves shares and timings to java_unwind.sh.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
java -XX:CompileThresholdScaling=0.1 -XX:+PrintCompilation -cp "$TMP/classes" Workload 900 >"$TMP/jit.log" &
jit=$!
BACKGROUND+=($jit)
java -Xint -cp "$TMP/classes" Workload 900 >/dev/null &
xint=$!
BACKGROUND+=($xint)
wait_compiled "$TMP/jit.log" Workload::hotA Workload::hotB Workload::main@
# An emulated kernel (the matrix) runs the JVM's attach listener and the
# agent's start-up tens of times slower than a real CPU: 15 to 30 s, and
# past 120 s for the JIT's JVM (its hundreds of compiled methods replayed)
# in 3 of CI's last 8 emulated runs on a slow host: 300 s there. 4 s of
# each JVM's CPU time and 600 samples: in CI, beside two emulated guests,
# the JVMs got 232 to 350 samples each in 8 s, and the 5.10 guest failed
# the test once.
attach_timeout=120
[[ ${EMBER_EMULATED:-} ]] && attach_timeout=300
record_for_cpu --samples 600 4 "$jit,$xint" --pid-frames --attach-timeout $attach_timeout -F 199 -o "$TMP/out.folded" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
grep -E "^  (java|stacks)|^    java|ember: JVM" "$TMP/err"
grep -q "frames-unavailable" "$TMP/err" && skip "this JDK's VMStructs lack what the agent needs: $(grep frames-unavailable "$TMP/err")"
grep -q "ember: JVM" "$TMP/err" && fail "an attach failed: $(grep 'ember: JVM' "$TMP/err")"
grep -E "^java \($jit\);" "$TMP/out.folded" >"$TMP/jit.folded"

# heaviest FILE REGEX: the three commonest stacks that match, for a failure.
heaviest() { grep -E -- "$2" "$1" | awk '{ print $NF, $0 }' | sort -nr | head -3 | cut -d' ' -f2- | cut -c1-600; }
grep -E "^java \($xint\);" "$TMP/out.folded" >"$TMP/xint.folded"

# whole FILE LABEL FRAME_REGEX: of the samples with such a frame, those
# whose stack reaches the thread's entry, at least 95% of at least 100.
whole() {
	local all reached
	all=$(weight "$1" "$3")
	reached=$(weight "$1" "(JavaMain|thread_native_entry).*($3)")
	echo "$2: $reached of $all stacks with a Java frame reach the thread's entry"
	(( all >= 100 )) || fail "$2: only $all samples with a Java frame"
	(( 100 * reached >= 95 * all )) ||
		fail "$2: $reached of $all Java stacks whole: $(grep -Ev 'JavaMain|thread_native_entry' "$1" | heaviest - "$3")"
}
whole "$TMP/jit.folded" "default flags" 'Workload\.[a-zA-Z]+_\[(j|i|1)\]'
whole "$TMP/xint.folded" "-Xint" '_\[0\]'
# Compiled code, named. Which callees show inlined depends on the JIT:
# code compiled before the attach has debug info only at calls and
# safepoints, and a hot loop without one (a counted loop under the serial
# collector, a small machine's default) counts in its caller.
assert_contains "$TMP/jit.folded" 'Workload\.(main|hotA|hotB)_\[j\]' \
	"no compiled Workload method: $(heaviest "$TMP/jit.folded" 'Workload\.')"
assert_absent "$TMP/jit.folded" 'JIT frames without frame pointers' "stacks cut at JIT code"
# Interpreted frames named by the Method* the unwinder read, not "Interpreter".
read -r named frames < <(awk '{ c = $NF; n = split($0, f, ";")
	for (i = 1; i <= n; i++) if (f[i] ~ /_\[0\]( [0-9]+)?$/) { all += c; if (f[i] !~ /^Interpreter_/) named += c }
} END { print named + 0, all + 0 }' "$TMP/xint.folded")
echo "-Xint: $named of $frames interpreted frames named"
(( 100 * named >= 95 * frames )) || fail "-Xint: $named of $frames interpreted frames named, not >= 95%"
assert_contains "$TMP/xint.folded" 'Workload\.main_\[0\];(.*;)?Workload\.hot[AB]_\[0\]' "no interpreted main;...;hotA/hotB chain"
