#!/usr/bin/env bash
# ember's agent against the JVM's own naming: the compiled methods by self
# time (the innermost JIT frame of each stack, where the sampled pc lies)
# agree between ember with its agent and ember reading the perf map that
# `jcmd PID Compiler.perfmap` writes, on the same running JVM.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v jcmd >/dev/null || fail "jcmd missing: scripts/deps.sh installs openjdk-17-jdk-headless"
java_classes "$TMP/classes"
# hotA and hotB stay methods of their own: C2 may otherwise inline them
# into main's OSR code, at a moment that depends on the load, between the
# two recordings (and the perf map does not list OSR code).
java -XX:+PreserveFramePointer -XX:+PrintCompilation -XX:CompileCommand=quiet -XX:CompileCommand=dontinline,Workload::hotA \
	-XX:CompileCommand=dontinline,Workload::hotB -cp "$TMP/classes" Workload 30 >"$TMP/jit.log" &
jvm=$!
BACKGROUND+=($jvm)
at_exit 'rm -f /tmp/perf-$jvm.map'
wait_compiled "$TMP/jit.log" Workload::hotA Workload::hotB Workload::writeChunk

"$EMBER" record -p "$jvm" --threads -F 999 -d 3 -o "$TMP/agent.folded" 2>"$TMP/err" || fail "agent: ember exited $?: $(cat "$TMP/err")"
jcmd "$jvm" Compiler.perfmap >/dev/null || fail "jcmd Compiler.perfmap failed"
"$EMBER" record -p "$jvm" --threads --no-java -F 999 -d 3 -o "$TMP/perfmap.folded" 2>"$TMP/err" || fail "perf map: ember exited $?"

# share FILE: "TID/Class.method permille" of the innermost JIT frames, per
# mille of their thread's samples (threads with 50 or more): how the
# busy machine shares the CPU between the threads moves from one recording
# to the next; how a thread's work is split between its methods does not.
share() {
	awk '{ n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";")
		if (!match(f[2], /tid=[0-9]+/)) next
		tid = substr(f[2], RSTART + 4, RLENGTH - 4); all[tid] += n; name = ""
		for (i = k; i >= 1; i--) if (f[i] ~ /_\[j\]$/) { name = f[i]; break }
		if (name == "") next
		sub(/_\[j\]$/, "", name); sub(/\(.*$/, "", name); sub(/^.* /, "", name)
		w[tid "/" name] += n }
		END { for (m in w) { tid = m; sub(/\/.*/, "", tid); if (all[tid] >= 50) print m, int(1000 * w[m] / all[tid]) } }' "$1"
}
# Shares of each method, both ways: the methods with 5% or more of their
# thread in either must be in both, within 10 points.
join -a1 -a2 -e 0 -o 0,1.2,2.2 <(share "$TMP/agent.folded" | sort) <(share "$TMP/perfmap.folded" | sort) >"$TMP/shares"
sed 's/^/  share: /' "$TMP/shares"
bad=$(awk '($2 >= 50 || $3 >= 50) && ($2 - $3 > 100 || $3 - $2 > 100)' "$TMP/shares")
[ -z "$bad" ] || fail "compiled methods disagree: $bad"
(( $(awk '$2 >= 50 && $3 >= 50' "$TMP/shares" | wc -l) >= 2 )) || fail "fewer than 2 methods named both ways"
