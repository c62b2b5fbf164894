#!/usr/bin/env bash
# Compiled Java frames caught half built or half torn down: a JVM with
# default flags spending its time in calls too short to be anything else
# but prologue and epilogue (tests/java/Prologues.java, kept out of line),
# ember attached. The agent decodes each compiled method's prologue (where
# push rbp and sub rsp move the return address), the unwinder reads an
# epilogue forward from the pc (pop rbp, the return poll, ret): stacks
# reach the thread's entry. Without either, 9% of these stacks stop on
# JDK 17 and 26% on JDK 25 (its entry barrier lies in the prologue).
# Stacks through the JIT's runtime stubs: java_jit_stubs.sh.
# On JDK 17 and, if installed, the Temurin JDK 25; on arm64 (the kernel
# matrix's guest) the same windows of its own instructions (stp x29, x30;
# ldp, the return poll, ret), where the return address is in x30.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
# Seconds of the JVMs' CPU time recorded, and samples counted (twice those
# needed: leaf and middle hold 70% of the JVM's); an emulated CPU (its
# sampling interrupts are late) is asked fewer samples, in half the time
# (4 s gave 2,732 stacks in the arm64 guest, and the test took 459 s of its
# 600 on a busy host). --attach-timeout: an emulated JVM beside busy
# emulators took over 10 s to answer.
seconds=4 least=1000
[[ ${EMBER_EMULATED:-} ]] && seconds=2 least=500

# windows JAVA_HOME LABEL
windows() {
	local java=$1/bin/java label=$2 jvm whole all
	"$java" -XX:CompileCommand=quiet -XX:CompileCommand=dontinline,Prologues::* -XX:+PrintCompilation \
		-cp "$TMP/classes" Prologues 900 >"$TMP/$label.jit" 2>&1 &
	jvm=$!
	BACKGROUND+=($jvm)
	wait_compiled "$TMP/$label.jit" Prologues::leaf Prologues::middle
	record_for_cpu --samples $((2 * least)) $seconds "$jvm" -F 999 --attach-timeout 120 -o "$TMP/$label.folded" 2>"$TMP/$label.err" ||
		fail "$label: ember exited $?: $(cat "$TMP/$label.err")"
	grep -A1 -E "^  stacks" "$TMP/$label.err"
	grep -q "frames-unavailable" "$TMP/$label.err" && skip "$label: the JVM's VMStructs lack what the agent needs"
	all=$(weight "$TMP/$label.folded" 'Prologues\.(leaf|middle)_\[j\]')
	whole=$(weight "$TMP/$label.folded" 'JavaMain.*Prologues\.(leaf|middle)_\[j\]')
	echo "$label: $whole of $all stacks in Prologues.leaf or .middle reach the thread's entry"
	(( all >= least )) || fail "$label: only $all samples in Prologues.leaf or .middle"
	(( 1000 * whole >= 995 * all )) || fail "$label: $whole of $all stacks whole, not >= 99.5%: $(grep -v JavaMain "$TMP/$label.folded" | sort -t' ' -k2 -nr | head -3 | cut -c1-300)"
	kill "$jvm"
	wait "$jvm" 2>/dev/null || true
}

each_jdk windows
