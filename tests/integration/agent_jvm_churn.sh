#!/usr/bin/env bash
# JVMs that come and go beside ember agent: each is attached while it runs
# (its stream's file open in the agent), and once it has exited and a
# period has passed the agent holds nothing of it: no file, no stream
# directory. The soak found 7 files a minute kept open beside a JVM every
# 20 s (hsperfdata files then; the agent no longer reads those at all).
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
"$EMBER" agent --period 1s --frequency 49 --events cpu --spool.dir "$TMP/spool" --metrics.listen "" 2>"$TMP/agent.log" &
agent=$!
BACKGROUND+=($agent)
# held PATTERN: the agent's open files whose path matches.
held() { ls -l "/proc/$agent/fd" 2>/dev/null | grep -cE -- "$1"; }
sleep 1
ours=""
for i in 1 2 3; do
	java -cp "$TMP/classes" Workload 120 >"$TMP/jvm$i.out" 2>&1 &
	jvm=$!
	# The agent looks for JVMs every 2 s; a JVM starting on a busy host may
	# take the whole attach timeout (10 s) to answer, and the agent tries
	# such a JVM three times, 2 s apart, waiting 10, 20 then 40 s.
	for _ in $(seq 800); do
		(($(held "/tmp/ember-$agent-[^/]*/$jvm\.jitmap") > 0)) && break
		sleep 0.1
	done
	(($(held "/tmp/ember-$agent-[^/]*/$jvm\.jitmap") > 0)) || fail "JVM $i ($jvm) not watched within 80 s: $(tail -3 "$TMP/agent.log"); the JVM's output: $(cat "$TMP/jvm$i.out")"
	kill $jvm
	wait $jvm 2>/dev/null
	ours+="${ours:+|}$jvm"
done
ours="/tmp/ember-$agent-[^/]*/($ours)\.jitmap"
# Two periods: the last JVM's exit is seen, then it is forgotten.
for _ in $(seq 50); do
	(($(held "$ours") == 0)) && break
	sleep 0.1
done
(($(held "$ours") == 0)) || fail "files of exited JVMs still open 5 s later: $(ls -l /proc/$agent/fd | grep -E "$ours")"
kill -0 $agent || fail "the agent died: $(tail -3 "$TMP/agent.log")"
(($(held hsperfdata_) == 0)) || fail "the agent holds JVMs' hsperfdata files, which nothing of its reads: $(ls -l /proc/$agent/fd | grep hsperfdata_)"
echo "3 JVMs watched, then let go once they exited: no file of theirs held"
