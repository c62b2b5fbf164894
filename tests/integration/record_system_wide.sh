#!/usr/bin/env bash
# System-wide mode (-a, the default) sees an unrelated process; --pid-frames
# and --threads add the pseudo-frames.
. "$(dirname "$0")/../lib.sh"
need_bpf
background "$WORKLOADS/spinner" 30
spinner=${BACKGROUND[-1]}
sleep 0.3
# Its samples against the CPU time it had meanwhile (on a busy machine, a
# tenth of a CPU or less: a fixed count failed there): that of 2 s inside
# ember's 4 s, which start as it samples, just before wait_sampling sees
# its first progress line.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
"$EMBER" record -a -d 4 --pid-frames --threads -o "$TMP/out.folded" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress1" &
ember=$!
wait_sampling $ember "$TMP/progress1"
ticks=$(cpu_ticks "$spinner")
sleep 2
ticks=$(( $(cpu_ticks "$spinner") - ticks ))
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/out.folded" "^spinner \\($spinner\\);\\[spinner tid=$spinner\\];.*main;spinner_loop [0-9]+$" \
	"spinner ($spinner) not seen system-wide"
n=$(weight "$TMP/out.folded" "^spinner \\($spinner\\);")
expected=$(( ticks * 99 / $(getconf CLK_TCK) ))
echo "spinner: $n samples in 4 s; $expected expected at 99 Hz from the CPU time it used in 2 s of them"
(( n >= expected )) || fail "spinner has only $n samples in 4 s at 99 Hz, where its CPU time in 2 s of them makes $expected"

# A process that starts and exits inside the recording is still named: its
# mappings and files were captured at its first sample.
"$EMBER" record -a -F 999 --pid-frames -o "$TMP/short.folded" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress2" &
ember=$!
wait_sampling $ember "$TMP/progress2"
"$WORKLOADS/cpu_split" 0.05 &
short=$!
wait $short
kill -INT $ember
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/short.folded" "^cpu_split \\($short\\);.*main;run_split;hot_a;work_unit [0-9]+\$" \
	"short-lived process $short not symbolized after it exited"

# A 50 ms command: its first sample wakes the collector at once, so its
# mappings are read before it exits (with timed polls alone it came out
# as [unknown] frames).
for i in 1 2 3; do
	"$EMBER" record -F 999 -o "$TMP/50ms-$i.folded" -- "$WORKLOADS/cpu_split" 0.05 2>"$TMP/err" || fail "50 ms command: ember exited $?"
	assert_contains "$TMP/50ms-$i.folded" '^cpu_split;.*main;run_split;hot_[ab];work_unit [0-9]+$' \
		"a 50 ms command (run $i) not symbolized: $(head -3 "$TMP/50ms-$i.folded")"
done
