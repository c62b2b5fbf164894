#!/usr/bin/env bash
# Compiled Java code calling into the JVM through the JIT's runtime stubs
# for arrays (tests/java/LargeArrays.java), a JVM with default flags and
# one held to C1, ember attached: stacks through the stubs reach the
# thread's entry. C2's were all cut before the agent decoded their
# prologues. A script of its own beside java_jit_windows.sh: in the kernel
# matrix's arm64 guest, on a busy host, the two took past the 900 s an
# emulated script may take (their three JVMs emulated).
# On JDK 17 and, if installed, the Temurin JDK 25.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
# Twice the seconds of the JVMs' CPU time recorded, and samples counted
# (a quarter of them through each stub at least); an emulated CPU (its
# sampling interrupts are late) is asked fewer, in half the time.
seconds=4 least=1000
[[ ${EMBER_EMULATED:-} ]] && seconds=2 least=500

# stubs JAVA_HOME LABEL: compiled code calling into the JVM through the
# runtime stubs for arrays: C2's saves rbp (x29) without pointing it at
# its frame (HotSpot calls its frame never complete): the agent decodes its
# prologue as a compiled method's; C1's (a JVM held to C1) builds its frame
# with enter() and is walked by its frame pointer, which on arm64 must keep
# sp known for the C1 frame below (EMBER_MAPPING_JIT).
stubs() {
	local java=$1/bin/java label=$2 c2 c1 kind stub chain whole all
	"$java" -XX:+PrintCompilation -cp "$TMP/classes" LargeArrays 900 >"$TMP/$label.c2.jit" 2>&1 &
	c2=$!
	"$java" -XX:TieredStopAtLevel=1 -XX:+PrintCompilation -cp "$TMP/classes" LargeArrays 900 >"$TMP/$label.c1.jit" 2>&1 &
	c1=$!
	BACKGROUND+=($c2 $c1)
	wait_compiled "$TMP/$label.c2.jit" LargeArrays::allocate
	wait_compiled "$TMP/$label.c1.jit" LargeArrays::allocate@
	record_for_cpu --samples $least $((seconds / 2)) "$c2,$c1" -F 999 --attach-timeout 120 -o "$TMP/$label.stub.folded" 2>"$TMP/$label.stub.err" ||
		fail "$label: ember exited $?: $(cat "$TMP/$label.stub.err")"
	for kind in C2 C1; do
		stub='(_new_array_Java|C2 Runtime new_array);'
		[ $kind = C1 ] && stub='(new_type_array Runtime1 stub|C1 Runtime new_type_array[a-z_]*);'
		all=$(weight "$TMP/$label.stub.folded" "$stub")
		chain="JavaMain.*LargeArrays\.main_\[[0-9a-z]\];LargeArrays\.allocate_\[j\];$stub"
		whole=$(weight "$TMP/$label.stub.folded" "$chain")
		echo "$label: $whole of $all stacks through $kind's runtime stub for arrays reach the thread's entry"
		(( all >= least / 4 )) || fail "$label: only $all samples through $kind's stub: $(sort -t' ' -k2 -nr "$TMP/$label.stub.folded" | head -3 | cut -c1-400)"
		(( 1000 * whole >= 995 * all )) || fail "$label: $whole of $all stacks through $kind's stub whole, not >= 99.5%: $(grep -E "$stub" "$TMP/$label.stub.folded" | grep -vE "$chain" | sort -t' ' -k2 -nr | head -3 | cut -c1-400)"
	done
	kill "$c2" "$c1"
	wait "$c2" "$c1" 2>/dev/null || true
}

each_jdk stubs
