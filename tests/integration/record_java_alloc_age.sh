#!/usr/bin/env bash
# -e alloc --live --min-age on a running JVM (default flags): a slow leak
# into a static map among requests thirty times as busy, held until they
# are dropped (and collected by the JVM's own GCs) every 2 s
# (tests/java/AgingSites.java). Both are reachable at the end, so plain
# --live, even after its full GC, shows the requests first; with --min-age
# 3s no GC is forced, none of the requests is left, and the leak's buffers
# of 3 s or more are all there, as the JVM counted them.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
# byte[16384] with its header, as JVMTI sizes it (64-bit, compressed class pointers).
size=16400

# aged LABEL RECORD_ARGS...: AgingSites run for 13.5 s once ember samples,
# ember stopped at its "done"; the JVM's line in $TMP/LABEL.out.
aged() {
	local label=$1 jvm
	shift
	rm -f "$TMP/go"
	java -cp "$TMP/classes" AgingSites "$TMP/go" 13.5 3 2000 >"$TMP/$label.out" 2>&1 &
	jvm=$!
	BACKGROUND+=($jvm)
	# --alloc-interval 1024: every 16 KiB buffer is a sample of its own size.
	record_go_done "$label" "$TMP/$label.out" -p "$jvm" -e alloc --live --alloc-interval 1024 "$@" -o "$TMP/$label.html"
	kill "$jvm"
	wait "$jvm" 2>/dev/null || true
	"$EMBER" convert "$TMP/$label.html" -o "$TMP/$label.folded" 2>"$TMP/err" || fail "$label: convert: $(cat "$TMP/err")"
	"$EMBER" report "$TMP/$label.html" >"$TMP/$label.report" 2>&1 || fail "$label: report: $(cat "$TMP/$label.report")"
}
# The first leak suspect of a recording's report: the leak's buffers, kept
# all along (the requests only since their last drop).
first_suspect_is_leak() {
	local suspects
	suspects=$(leak_suspects "$TMP/$1.report")
	echo "$1: leak suspects: ${suspects//$'\n'/; }"
	[[ $suspects == "byte[] ← AgingSites.leak"* ]] || fail "$1: the first leak suspect is not the leak: $(cat "$TMP/$1.report")"
	[[ $suspects != *AgingSites.request* ]] || fail "$1: requests in flight are leak suspects: $(cat "$TMP/$1.report")"
}
field() { awk -v k="$1" '/^done/ { for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$2"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
within() { awk -v v="$1" -v p="$2" -v e="$3" 'BEGIN { exit !(v >= e * (1 - p / 100) && v <= e * (1 + p / 100)) }'; }

aged live
in_flight=$(field in_flight "$TMP/live.out")
requests=$(weight "$TMP/live.folded" ';AgingSites\.request_\[[ji0]\];byte\[\] [0-9]+$')
leak=$(weight "$TMP/live.folded" ';AgingSites\.leak_\[[ji0]\];byte\[\] [0-9]+$')
echo "--live: requests $(mib "$requests") MiB (the JVM held $(mib $((in_flight * size)))), leak $(mib "$leak") MiB"
grep 'live' "$TMP/live.err" | grep -i jvm | head -3
within "$requests" 3 $((in_flight * size)) || fail "--live: requests $requests bytes, the JVM held $((in_flight * size)) ±3%"
((requests > leak)) || fail "--live: the requests ($requests bytes) do not outweigh the leak ($leak): the JVM ran unlike its design"
first_suspect_is_leak live

aged old --min-age 3s
leak_old=$(field leak_old "$TMP/old.out")
leak=$(weight "$TMP/old.folded" ';AgingSites\.leak_\[[ji0]\];byte\[\] [0-9]+$')
echo "--live --min-age 3s: leak $(mib "$leak") MiB (the JVM's buffers of 3 s or more: $(mib $((leak_old * size))) MiB)"
# None of the 16 KiB buffers; once in ten runs a sample weighing 1 KiB (a
# small byte[], as JVMTI attributed it) under request_ lived on.
old_requests=$(weight "$TMP/old.folded" ';AgingSites\.request_\[[ji0]\];byte\[\] [0-9]+$')
((old_requests * 100 <= requests)) ||
	fail "--min-age 3s kept $old_requests bytes of requests (--live: $requests), none older than 2 s: $(grep request_ "$TMP/old.folded" | cut -c1-300)"
within "$leak" 2 $((leak_old * size)) || fail "--min-age 3s: leak $leak bytes, the JVM's $((leak_old * size)) ±2%"
first_suspect_is_leak old
assert_contains "$TMP/old.err" "not collected by the end and allocated at least 3s before it"
assert_contains "$TMP/old.err" "allocated at least 3 s before it \(no GC forced\)"

# --min-gcs: by collections survived (the agent counts the JVM's
# stop-the-world ones, young and full, and says how many). Requests in
# flight at the end came after the last drop and its System.gc(), within
# 2 s: they have seen the young collections of those 2 s, about a seventh
# of the run's. Half of the plain run's count keeps none of them, and the
# leak's older half or so.
gcs=$(sed -nE 's/.*JVM [0-9]+ alloc: collections ([0-9]+)$/\1/p' "$TMP/live.err" | head -1)
[[ $gcs =~ ^[0-9]+$ ]] || fail "--live: no count of collections in $(grep -i jvm "$TMP/live.err")"
half=$(((gcs + 1) / 2))
aged gcs --min-gcs "$half"
gc_requests=$(weight "$TMP/gcs.folded" ';AgingSites\.request_\[[ji0]\];byte\[\] [0-9]+$')
gc_leak=$(weight "$TMP/gcs.folded" ';AgingSites\.leak_\[[ji0]\];byte\[\] [0-9]+$')
leak_all=$(awk -v l="$(field leak_old "$TMP/gcs.out")" -v s=$size 'BEGIN { print l * s }')
echo "--live --min-gcs $half (of $gcs collections in the plain run): requests $(mib "$gc_requests") MiB, leak $(mib "$gc_leak") MiB"
((gc_requests * 100 <= requests)) || fail "--min-gcs $half kept $gc_requests bytes of requests (--live: $requests)"
((gc_leak > 0)) || fail "--min-gcs $half kept nothing of the leak: $(grep -i 'jvm' "$TMP/gcs.err")"
first_suspect_is_leak gcs
assert_contains "$TMP/gcs.err" "not collected by the end and through at least $half collections$"
assert_contains "$TMP/gcs.err" "not yet collected at the end and through at least $half collections \(no GC forced\)"
true
