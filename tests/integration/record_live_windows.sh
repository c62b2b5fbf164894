#!/usr/bin/env bash
# -e malloc --live --window: each window's graph is what was allocated
# since the recording began and is still live at its cut, so a leak grows
# window over window while a cache that is emptied falls back
# (tests/workloads/aging_sites: a slow leak, a cache ten times as busy
# emptied every 3 s); the last window is the whole recording's --live,
# as the workload counted it; what a process never freed shows in the
# window of its exit, and in none after.
. "$(dirname "$0")/../lib.sh"
need_bpf
truth() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/out"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
within() { awk -v v="$1" -v p="$2" -v e="$3" 'BEGIN { exit !(v >= e * (1 - p / 100) && v <= e * (1 + p / 100)) }'; }

# --alloc-interval 1: every allocation is a sample of its own size.
"$EMBER" record -e malloc --live --alloc-interval 1 --no-java --window 2 -o "$TMP/w.folded" \
	-- "$WORKLOADS/aging_sites" 9 3 3000 >"$TMP/out" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
grep '^ember: window' "$TMP/err"
files=("$TMP"/w.*.folded)
((${#files[@]} >= 4)) || fail "${#files[@]} window files for 9 s in windows of 2 s: $(cat "$TMP/err")"
assert_contains "$TMP/err" '^ember: window 1: .*, malloc [0-9.]+ MiB live, '
leaks=() caches=()
for f in "${files[@]}"; do
	leaks+=("$(weight "$f" ';leak_here [0-9]+$')")
	caches+=("$(weight "$f" ';cache_fill [0-9]+$')")
done
echo "live by window: leak_here ${leaks[*]} bytes; cache_fill ${caches[*]} bytes"
# The leak keeps a block every tenth turn but around 6 s (its pause, 1 s
# long): every 2 s window before the exit adds to it.
fell=0
for ((i = 1; i < ${#files[@]} - 1; i++)); do
	((leaks[i] > leaks[i - 1])) || fail "window $((i + 1)): leak_here ${leaks[i]} bytes, not more than window $i's ${leaks[i - 1]}"
	((caches[i] < caches[i - 1])) && fell=1
done
((fell)) || fail "the cache, emptied every 3 s, never fell from one window to the next: ${caches[*]}"
last=$((${#files[@]} - 1))
leak_truth=$(truth leak_bytes) cache_truth=$(truth cache_bytes)
echo "last window: leak_here $(mib "${leaks[last]}") MiB, cache_fill $(mib "${caches[last]}") MiB (the workload kept $(mib "$leak_truth") and $(mib "$cache_truth") MiB)"
within "${leaks[last]}" 1 "$leak_truth" || fail "last window: leak_here ${leaks[last]} bytes, the workload kept $leak_truth ±1%"
within "${caches[last]}" 2 "$cache_truth" || fail "last window: cache_fill ${caches[last]} bytes, the cache held $cache_truth ±2%"
# Its page's leak suspects read the recording so far, not the window.
"$EMBER" record -e malloc --live --alloc-interval 1 --no-java --window 3 -o "$TMP/w.html" \
	-- "$WORKLOADS/aging_sites" 8 3 3000 >"$TMP/out" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
pages=("$TMP"/w.*.html)
"$EMBER" report "${pages[-1]}" >"$TMP/report" 2>&1 || fail "report: $(cat "$TMP/report")"
suspects=$(leak_suspects "$TMP/report")
echo "last window's leak suspects: ${suspects//$'\n'/; }"
[[ $suspects == "leak_here ← main"* ]] || fail "the first leak suspect is not leak_here: $(cat "$TMP/report")"
[[ $suspects != *cache_fill* ]] || fail "the cache, emptied every 3 s, is a leak suspect: $(cat "$TMP/report")"

# A process gone: its blocks leave the windows after the one of its exit
# (its parent, sh, keeps nothing of the sampled sites).
"$EMBER" record -e malloc --live --alloc-interval 1 --no-java --window 2 -o "$TMP/x.folded" \
	-- sh -c "'$WORKLOADS/aging_sites' 3 1 3000 >/dev/null; sleep 4.5" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
grep '^ember: window' "$TMP/err"
gone=("$TMP"/x.*.folded)
first=$(weight "${gone[0]}" ';leak_here [0-9]+$')
after=$(weight "${gone[-1]}" ';leak_here [0-9]+$')
echo "a process that exited at 3 s: leak_here $first bytes live at 2 s, $after at the end (7.5 s)"
((first > 0)) || fail "the first window has none of the leak: $(cat "${gone[0]}")"
((after == 0)) || fail "the blocks of a process gone 4.5 s before the end are live in the last window: $(cat "${gone[-1]}")"

"$EMBER" record -e malloc --live --window 0.5 -o "$TMP/y.folded" -- true 2>"$TMP/err" ||
	fail "--live with --window was refused: $(cat "$TMP/err")"
true
