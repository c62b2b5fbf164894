#!/usr/bin/env bash
# `ember record -- CMD`: known functions in main;... chains, and a 70/30
# CPU split fixed by construction reported within +-5 points.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -F 499 -o "$TMP/out.folded" -- "$WORKLOADS/cpu_split" 6 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
out=$TMP/out.folded
assert_contains "$out" '^cpu_split;.*main;run_split;hot_a;work_unit [0-9]+$' "no main;run_split;hot_a;work_unit chain"
assert_contains "$out" '^cpu_split;.*main;run_split;hot_b;work_unit [0-9]+$' "no main;run_split;hot_b;work_unit chain"
a=$(weight "$out" ';hot_a(;| )')
b=$(weight "$out" ';hot_b(;| )')
# cpu_split runs 6 s of CPU time: ~3000 samples, busy machine or not. At
# 2000, +-5 points is 4.9 sigma of a binomial share (a chance failure in a
# million runs); its rounds of random length keep the timer from aliasing.
(( a + b >= 2000 )) || fail "too few samples in hot_a/hot_b: $a + $b, expected ~3000 (6 s of CPU at 499 Hz)"
share=$(( 1000 * a / (a + b) ))
echo "hot_a $a, hot_b $b: hot_a share $((share / 10)).$((share % 10))% (expect 70 +- 5)"
(( share >= 650 && share <= 750 )) || fail "hot_a share $share/1000 outside 650..750"
grep -q "^  samples " "$TMP/err" || fail "no summary printed"
