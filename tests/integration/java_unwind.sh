#!/usr/bin/env bash
# Java without -XX:+PreserveFramePointer, attached while it runs (the
# common production case), and from start-up (-- java: its code cache is
# mapped after ember first read the process's mappings): compiled frames
# are stepped by the frame size
# the agent publishes, interpreted ones by their saved sender sp, so Java
# stacks reach the thread's entry; the same top methods as a JVM with
# frame pointers sampled in the same recording; under -Xint the stacks are
# whole too, and each interpreted frame is named by its method.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
JAVA=(java -XX:CompileThresholdScaling=0.1 -XX:+PrintCompilation -cp "$TMP/classes")
"${JAVA[@]}" Workload 60 >"$TMP/default.jit" &
default=$!
BACKGROUND+=($default)
"${JAVA[@]}" -XX:+PreserveFramePointer Workload 60 >"$TMP/fp.jit" &
fp=$!
BACKGROUND+=($fp)
java -Xint -cp "$TMP/classes" Workload 60 >/dev/null &
xint=$!
BACKGROUND+=($xint)
wait_compiled "$TMP/default.jit" Workload::hotA Workload::hotB Workload::main@
wait_compiled "$TMP/fp.jit" Workload::hotA Workload::hotB Workload::main@
# 3 s of each JVM's CPU time (beside the kernel matrix's emulators the
# -Xint JVM got 201 samples in 5 s of wall time).
record_for_cpu 3 "$default,$fp,$xint" --pid-frames -F 499 -o "$TMP/out.folded" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
grep -E "^  (java|stacks)|^    java|PreserveFramePointer" "$TMP/err"
grep -q "frames-unavailable" "$TMP/err" && skip "this JDK's VMStructs lack what the agent needs: $(grep frames-unavailable "$TMP/err")"
grep -E "^java \($default\);" "$TMP/out.folded" >"$TMP/default.folded"
grep -E "^java \($fp\);" "$TMP/out.folded" >"$TMP/fp.folded"
grep -E "^java \($xint\);" "$TMP/out.folded" >"$TMP/xint.folded"

# Stacks with a Java frame of the main thread (or any Java frame under -Xint:
# Interpreter frames) that reach the thread's entry.
reach() {
	local java all
	java=$(weight "$1" "$2")
	all=$(weight "$1" "(JavaMain|thread_native_entry).*($2)")
	echo "$all $java"
}
read -r whole java < <(reach "$TMP/default.folded" 'Workload\.[a-zA-Z]+_\[(j|i)\]')
echo "default flags: $whole of $java stacks with a Java frame reach the thread's entry"
(( java >= 300 )) || fail "only $java Java samples in the default-flags JVM"
(( 100 * whole >= 98 * java )) || fail "default flags: $whole of $java Java stacks whole, not >= 98%: $(grep -v JavaMain "$TMP/default.folded" | grep Workload | sort -t' ' -k2 -nr | head -3 | cut -c1-500)"
assert_absent "$TMP/default.folded" 'JIT frames without frame pointers' "stacks cut at JIT code"
read -r whole java < <(reach "$TMP/xint.folded" '_\[0\]')
echo "-Xint: $whole of $java stacks with an interpreted frame reach the thread's entry"
(( java >= 300 )) || fail "only $java samples in the -Xint JVM"
(( 100 * whole >= 98 * java )) || fail "-Xint: $whole of $java stacks whole, not >= 98%"
# Interpreted frames are named by their method (the Method* the unwinder
# read, named by the agent), not "Interpreter".
read -r named frames < <(awk '{ c = $NF; n = split($0, f, ";")
	for (i = 1; i <= n; i++) if (f[i] ~ /_\[0\]( [0-9]+)?$/) { all += c; if (f[i] !~ /^Interpreter_/) named += c }
} END { print named + 0, all + 0 }' "$TMP/xint.folded")
echo "-Xint: $named of $frames interpreted frames named"
(( frames >= 300 )) || fail "-Xint: only $frames interpreted frames"
(( 100 * named >= 95 * frames )) || fail "-Xint: $named of $frames interpreted frames named, not >= 95%"

# The top methods, by samples under them, agree with the frame-pointer JVM's.
top() {
	awk '{ c = $NF; line = $0; sub(/ [0-9]+$/, "", line); n = split(line, f, ";"); delete seen
		for (i = 1; i <= n; i++) if (f[i] ~ /^Workload\./ && !(f[i] in seen)) { seen[f[i]] = 1; t[f[i]] += c }
	} END { for (m in t) print t[m], m }' "$1" | sort -nr | awk '{ print $2 }' | head -4 | sort
}
[ "$(top "$TMP/default.folded")" = "$(top "$TMP/fp.folded")" ] ||
	fail "top methods differ: default flags: $(top "$TMP/default.folded" | tr '\n' ' '); with frame pointers: $(top "$TMP/fp.folded" | tr '\n' ' ')"
echo "top methods (both): $(top "$TMP/fp.folded" | tr '\n' ' ')"

# From start-up, default flags: bench/java/Throughput's workers, whose
# JIT code lies where the JVM had mapped nothing at its first sample.
"$EMBER" record -F 999 -o "$TMP/start.folded" -- java -cp "$TMP/classes" Throughput 8 \
	>/dev/null 2>"$TMP/start.err" || fail "start-up: ember exited $?: $(cat "$TMP/start.err")"
read -r whole java < <(reach "$TMP/start.folded" 'Throughput\.[a-zA-Z]+_\[(j|i)\]')
echo "start-up, default flags: $whole of $java stacks with a Java frame reach the thread's entry"
# 300: beside the kernel matrix the JVM got 409 samples (3,500 beside one guest).
(( java >= 300 )) || fail "start-up: only $java Java samples"
# Code runs before its frame sizes reach the kernel (the JVM publishes a
# compiled method a little after it starts running, ember reads the
# stream every 0.1 s): warm-up, within these 4 s, costs about 1%.
(( 100 * whole >= 97 * java )) || fail "start-up: $whole of $java Java stacks whole, not >= 97%: $(grep -E '_\[(j|i)\]' "$TMP/start.folded" | grep -v thread_native_entry | sort -t' ' -k2 -nr | head -3 | cut -c1-400)"
