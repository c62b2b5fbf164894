#!/usr/bin/env bash
# kind: structural
# --window with several events: each window's line names every file it
# wrote (one per event; one pprof holding all), each of which exists and
# holds that window; the last window's files too.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_pprof
# 4 cycles of 0.5 s: 400 ms asleep, 100 ms on CPU.
"$EMBER" record -e cpu,offcpu --window 0.5 -o "$TMP/m.folded" -- "$WORKLOADS/offcpu_waits" 4 100 2>"$TMP/err" ||
	fail "record exited $?: $(cat "$TMP/err")"
grep '^ember: window' "$TMP/err" >"$TMP/lines"
cat "$TMP/lines"
while read -r line; do
	n=$(sed -E 's/^ember: window ([0-9]+):.*/\1/' <<<"$line")
	printf -v nnnn '%04d' "$n"
	for event in cpu offcpu; do
		f=$TMP/m.$event.$nnnn.folded
		[[ $line == *"wrote "*"$f"* ]] || fail "window $n's line does not name $f: $line"
		[ -e "$f" ] || fail "window $n: no $f"  # empty where the window had none
	done
done <"$TMP/lines"
# How many windows a slow machine cuts varies (an emulated guest's first
# took 3 s); that each line names every file does not.
[ -s "$TMP/lines" ] || fail "no window cut in 2 s at 0.5 s: $(cat "$TMP/err")"
cat "$TMP"/m.offcpu.*.folded | grep -q 'waitA' || fail "no window's offcpu file holds waitA"

"$EMBER" record -e cpu,offcpu --window 0.5 -o "$TMP/m.pb.gz" -- "$WORKLOADS/offcpu_waits" 2 100 2>"$TMP/err" ||
	fail "record pprof exited $?: $(cat "$TMP/err")"
line=$(grep -m1 '^ember: window 1:' "$TMP/err") || fail "no window line: $(cat "$TMP/err")"
[[ $line == *"wrote $TMP/m.0001.pb.gz" ]] || fail "the pprof window's line: $line"
"$PPROF" -raw "$TMP/m.0001.pb.gz" 2>/dev/null | grep -q 'offcpu' || fail "window 1's pprof lacks offcpu"
echo "windows of two events: each line names both files; one pprof holds both"
