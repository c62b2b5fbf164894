#!/usr/bin/env bash
# One session through 20,000 short-lived processes and over 100 windows
# (issue 14: a session that lives for days must not grow): ember record
# --window cuts a profile every 0.4 s while process_churn starts 20,000
# processes of 1 ms of CPU each over at least 42 s. ember's RSS and open
# files, read every 0.4 s, stay flat once warm, and every window still
# names the short-lived processes' frames.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -F 999 --no-java --window 0.4 -o "$TMP/w.folded" -- "$WORKLOADS/process_churn" 20000 42 \
	>/dev/null 2>"$TMP/err" &
ember=$!
began=$EPOCHREALTIME
# Readings: seconds since the start, RSS in KiB, open files.
while kill -0 $ember 2>/dev/null; do
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$ember/status" 2>/dev/null) || break
	fds=$(ls "/proc/$ember/fd" 2>/dev/null | wc -l)
	[ -n "$rss" ] && echo "$(bc <<<"$EPOCHREALTIME - $began") $rss $fds" >>"$TMP/readings"
	sleep 0.4
done
wait $ember || fail "ember exited $?: $(tail -5 "$TMP/err")"

windows=$(ls "$TMP"/w.[0-9]*.folded | wc -l)
echo "$windows windows"
((windows >= 100)) || fail "only $windows windows of 0.4 s in a recording of at least 42 s"
# Every child burns 1 ms of CPU time in churn_child_work: about 20,000
# samples at 999 Hz in all, however busy the machine is, each named. How
# many children a 0.4 s window holds depends on the load (about 200 on an
# idle machine, 4 in one window of a CI run beside the kernel matrix's
# emulators), and the share of their samples that churn_child_work gets
# (the rest: their start in ld.so, the parent's forks) on the host: 0.55-
# 0.63 on an idle Intel one, 0.25 where ld.so's cpuid calls trap (AMD under
# PVM). Each window but the last (cut when the command ended) with 20 or
# more of process_churn's samples names at least half the run's share: a
# session that stopped naming new processes' frames falls far below. (How
# many of those stacks reach main is record_short_lived's to judge.)
short=0 judged=0 named=0 named_judged=0 all_judged=0
for f in $(ls "$TMP"/w.[0-9]*.folded | head -n -1); do
	n=$(weight "$f" '^process_churn;(.*;)?churn_child_work(;[^;]*)* [0-9]+$')
	all=$(weight "$f" '^process_churn;')
	named=$((named + n))
	((all >= 20)) || continue
	echo "$f $n $all" >>"$TMP/shares"
	named_judged=$((named_judged + n)) all_judged=$((all_judged + all))
done
((all_judged > 0)) || fail "no window held 20 of process_churn's samples"
echo "churn_child_work: $named_judged of $all_judged samples in the windows judged"
while read -r f n all; do
	judged=$((judged + 1))
	((n * all_judged * 2 >= all * named_judged)) || { echo "$f: $n of process_churn's $all samples in churn_child_work"; short=$((short + 1)); }
done <"$TMP/shares"
echo "$named samples in churn_child_work (20,000 children of 1 ms of CPU each); $judged windows with 20 samples or more"
((short == 0)) || fail "$short of $judged windows name under half the run's share of the short-lived processes' samples"
((named >= 17000 && named <= 23000)) || fail "$named samples name churn_child_work, not 20,000 +-15%"

# Flat: RSS and open files over the run, after a warm-up of 5 s (kernel
# symbols, the first tables), printed at tenths of the run.
awk '$1 >= 5' "$TMP/readings" >"$TMP/warm"
lines=$(wc -l <"$TMP/warm")
((lines >= 50)) || fail "only $lines readings of ember's RSS after its warm-up"
echo "seconds  RSS (MiB)  open files"
for tenth in 0 1 2 3 4 5 6 7 8 9; do
	sed -n "$((tenth * lines / 10 + 1))p" "$TMP/warm" | awk '{ printf "%7.1f  %9.1f  %10d\n", $1, $2 / 1024, $3 }'
done
sed -n '$p' "$TMP/warm" | awk '{ printf "%7.1f  %9.1f  %10d\n", $1, $2 / 1024, $3 }'
first=$(sed -n 1p "$TMP/warm")
max=$(awk 'BEGIN { r = 0; f = 0 } { if ($2 > r) r = $2; if ($3 > f) f = $3 } END { print r, f }' "$TMP/warm")
read -r _ rss0 fds0 <<<"$first"
read -r rss_max fds_max <<<"$max"
echo "after warm-up: RSS $((rss0 / 1024)) MiB, at most $((rss_max / 1024)) MiB; open files $fds0, at most $fds_max"
# 20,000 processes held would take tens of MiB and as many files.
((rss_max - rss0 <= 8 * 1024)) || fail "ember's RSS grew by $(((rss_max - rss0) / 1024)) MiB after its warm-up"
((fds_max - fds0 <= 8)) || fail "ember's open files grew from $fds0 to $fds_max"
