#!/usr/bin/env bash
# System-wide mode (-a, the default) sees an unrelated process; --pid-frames
# and --threads add the pseudo-frames.
. "$(dirname "$0")/../lib.sh"
need_bpf
background "$WORKLOADS/spinner" 30
spinner=${BACKGROUND[-1]}
sleep 0.3
"$EMBER" record -a -d 2 --pid-frames --threads -o "$TMP/out.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/out.folded" "^spinner \\($spinner\\);\\[spinner tid=$spinner\\];.*main;spinner_loop [0-9]+$" \
	"spinner ($spinner) not seen system-wide"
n=$(weight "$TMP/out.folded" "^spinner \\($spinner\\);")
(( n >= 30 )) || fail "spinner has only $n samples in 2 s at 99 Hz"
echo "spinner: $n samples"

# A process that starts and exits inside the recording is still named: its
# mappings and files were captured at its first sample.
"$EMBER" record -a -d 3 --pid-frames -o "$TMP/short.folded" 2>"$TMP/err" &
ember=$!
sleep 1
"$WORKLOADS/cpu_split" 0.3 &
short=$!
wait $short
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/short.folded" "^cpu_split \\($short\\);.*main;run_split;hot_a;work_unit [0-9]+\$" \
	"short-lived process $short not symbolized after it exited"
