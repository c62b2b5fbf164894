#!/usr/bin/env bash
# ember's agent against the JVM's own naming: the top-5 compiled methods by
# self time (the innermost JIT frame of each stack, where the sampled pc
# lies) agree between ember with its agent and ember reading the perf map
# that `jcmd PID Compiler.perfmap` writes, on the same running JVM.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v jcmd >/dev/null || fail "jcmd missing: scripts/deps.sh installs openjdk-17-jdk-headless"
javac -d "$TMP/classes" "$ROOT/tests/java/Workload.java" || fail "javac failed"
java -XX:+PreserveFramePointer -cp "$TMP/classes" Workload 30 >/dev/null &
jvm=$!
BACKGROUND+=($jvm)
trap 'rm -f /tmp/perf-$jvm.map; cleanup' EXIT
sleep 3 # let the hot methods compile

"$EMBER" record -p "$jvm" -F 199 -d 3 -o "$TMP/agent.folded" 2>"$TMP/err" || fail "agent: ember exited $?: $(cat "$TMP/err")"
jcmd "$jvm" Compiler.perfmap >/dev/null || fail "jcmd Compiler.perfmap failed"
"$EMBER" record -p "$jvm" --no-java -F 199 -d 3 -o "$TMP/perfmap.folded" 2>"$TMP/err" || fail "perf map: ember exited $?"

# top5 FILE: the 5 heaviest innermost JIT frames, as Class.method
top5() {
	awk '{ n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";"); name = ""
		for (i = k; i >= 1; i--) if (f[i] ~ /_\[j\]$/) { name = f[i]; break }
		if (name == "") next
		sub(/_\[j\]$/, "", name); sub(/\(.*$/, "", name); sub(/^.* /, "", name)  # "void A.b(int)" -> "A.b"
		w[name] += n }
		END { for (m in w) print w[m], m }' "$1" | sort -nr | head -5
}
top5 "$TMP/agent.folded" >"$TMP/agent.top"
top5 "$TMP/perfmap.folded" >"$TMP/perfmap.top"
echo "agent:"; sed 's/^/  /' "$TMP/agent.top"
echo "jcmd Compiler.perfmap:"; sed 's/^/  /' "$TMP/perfmap.top"
[ "$(head -1 "$TMP/agent.top" | cut -d' ' -f2)" = "$(head -1 "$TMP/perfmap.top" | cut -d' ' -f2)" ] ||
	fail "the hottest compiled method differs"
common=$(comm -12 <(cut -d' ' -f2 "$TMP/agent.top" | sort) <(cut -d' ' -f2 "$TMP/perfmap.top" | sort) | wc -l)
have=$(wc -l <"$TMP/perfmap.top")
(( have >= 2 && common * 10 >= have * 8 )) || fail "only $common of the top $have compiled methods agree"
