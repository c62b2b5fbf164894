#!/usr/bin/env bash
# -e malloc --live --min-age: what stays, not what is in flight. A slow leak
# among a cache ten times as busy, emptied every 3 s
# (tests/workloads/aging_sites): at the end the cache holds more than the
# leak has kept, so plain --live shows the cache first; with --min-age 3s
# nothing of the cache is left and the leak's blocks older than 3 s are
# all there, as the workload counted them, its younger ones not. (The leak
# pauses around the cut-off: ember stops, and takes the ages, after the
# workload's exit, up to a poll later and more on a busy machine; 2-4% more
# of a steady leak counted beside two CPU hogs.)
. "$(dirname "$0")/../lib.sh"
need_bpf
# --alloc-interval 1: every allocation is a sample of its own size. (At
# the blocks' size, 16 KiB, a sample's weight is the bytes since the last
# one, whichever site they came from: the leak's 7 MiB were off by 6%.)
record() { "$EMBER" record -e malloc --live --alloc-interval 1 --no-java "$@" -- "$WORKLOADS/aging_sites" 8 3 3000; }
truth() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# within(V, LOW_PCT, HIGH_PCT, OF): V within [OF - LOW%, OF + HIGH%].
within() { awk -v v="$1" -v lo="$2" -v hi="$3" -v e="$4" 'BEGIN { exit !(v >= e * (1 - lo / 100) && v <= e * (1 + hi / 100)) }'; }

record -o "$TMP/live.html" >"$TMP/live.out" 2>"$TMP/live.err" || fail "ember exited $?: $(cat "$TMP/live.err")"
"$EMBER" convert "$TMP/live.html" -o "$TMP/live.folded" 2>"$TMP/err" || fail "convert: $(cat "$TMP/err")"
cache_truth=$(truth cache_bytes "$TMP/live.out")
leak=$(weight "$TMP/live.folded" ';leak_here [0-9]+$')
cache=$(weight "$TMP/live.folded" ';cache_fill [0-9]+$')
echo "--live: cache_fill $(mib "$cache") MiB (the cache held $(mib "$cache_truth")), leak_here $(mib "$leak") MiB"
within "$cache" 2 2 "$cache_truth" || fail "--live: cache_fill $cache bytes, the cache held $cache_truth ±2%"
((cache > leak)) || fail "--live: the cache ($cache bytes) does not outweigh the leak ($leak): the workload ran unlike its design"
# The page's timeline says when each live block was allocated: the leak's
# kept all along, the cache's since its last emptying only.
"$EMBER" report "$TMP/live.html" >"$TMP/live.report" 2>&1 || fail "report: $(cat "$TMP/live.report")"
suspects=$(leak_suspects "$TMP/live.report")
echo "--live: leak suspects: ${suspects//$'\n'/; }"
[[ $suspects == "leak_here ← main"* ]] || fail "--live: the first leak suspect is not leak_here: $(cat "$TMP/live.report")"
[[ $suspects != *cache_fill* ]] || fail "--live: the cache, emptied every 3 s, is a leak suspect: $(cat "$TMP/live.report")"

record --min-age 3s -o "$TMP/old.folded" >"$TMP/old.out" 2>"$TMP/old.err" || fail "ember exited $?: $(cat "$TMP/old.err")"
leak_truth=$(truth leak_old_bytes "$TMP/old.out")
leak=$(weight "$TMP/old.folded" ';leak_here [0-9]+$')
echo "--live --min-age 3s: leak_here $(mib "$leak") MiB (the workload's blocks of 3 s or more at its exit: $(mib "$leak_truth") MiB)"
assert_absent "$TMP/old.folded" 'cache_fill' "--min-age 3s kept cache blocks, none of them older than 2 s: $(cat "$TMP/old.folded")"
within "$leak" 1 1 "$leak_truth" || fail "--min-age 3s: leak_here $leak bytes, not the workload's $leak_truth ±1%"
assert_contains "$TMP/old.err" "still allocated at the end and allocated at least 3s before it"

"$EMBER" record -e malloc --min-age 3s -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "--min-age without --live was accepted"
assert_contains "$TMP/err" "add --live"
"$EMBER" record -e malloc --live --min-age soon -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "a bad --min-age was accepted"
assert_contains "$TMP/err" "'soon' is not a duration"
"$EMBER" record -e cpu-clock --min-age 3s -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "--min-age without -e malloc was accepted"
assert_contains "$TMP/err" "add -e malloc"
true
