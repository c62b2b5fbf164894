#!/usr/bin/env bash
# Time in a recording: a workload that changes phase (phase_a for 3 s of CPU,
# then phase_b for 3 s) recorded to a page whose heatmap picks each half
# (tests/browser/heatmap.test.mjs), and to pprof, whose "time" label the
# real pprof filters on and which converts back to the same timeline.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_browser
need_pprof
"$EMBER" record -F 199 -o "$TMP/phases.html" -- "$WORKLOADS/phases" 3 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
mkdir -p "$ROOT/build/screenshots"
node "$ROOT/tests/browser/heatmap.test.mjs" "$TMP/phases.html" --screenshot "$ROOT/build/screenshots/heatmap.png" ||
	fail "browser checks failed"

# pprof: a sample per time, labelled. phase_a ran from the start, for 3 s.
# The two ranges meet in a millisecond without samples (found in the
# page's timeline), so that none is counted in both or neither.
GAP=$(node --input-type=module -e "
import { readEmbeddedData } from '$ROOT/tests/browser/lib.mjs';
const tl = readEmbeddedData('$TMP/phases.html').timeline, taken = new Set();
for (let i = 0, t = 0; i < tl.length; i += 3) taken.add(t += tl[i]);
let ms = 2500;
while (taken.has(ms)) ms++;
console.log(ms);
") || fail "no timeline in the page"
"$EMBER" convert "$TMP/phases.html" -o "$TMP/phases.pb.gz" 2>"$TMP/err" || fail "convert to pprof: $(cat "$TMP/err")"
top() { "$PPROF" -top -nodefraction=0 -nodecount=100000 -tagfocus="time=$1" "$TMP/phases.pb.gz" >"$2" 2>&1 || fail "pprof: $(cat "$2")"; }
top "0ms:${GAP}ms" "$TMP/first.txt"
assert_contains "$TMP/first.txt" " phase_a$" "pprof's first $GAP ms lack phase_a: $(cat "$TMP/first.txt")"
assert_absent "$TMP/first.txt" " phase_b$" "pprof's first $GAP ms hold phase_b"
top "$((GAP + 1))ms:1000s" "$TMP/rest.txt"
assert_contains "$TMP/rest.txt" " phase_b$" "pprof's time after $GAP ms lacks phase_b"
shown() { sed -nE 's/^Showing nodes accounting for ([0-9]+), .* of ([0-9]+) total$/\1 \2/p' "$1"; }
read -r first all < <(shown "$TMP/first.txt")
read -r rest all2 < <(shown "$TMP/rest.txt")
[ "$((first + rest))" = "$all" ] && [ "$all" = "$all2" ] ||
	fail "the two ranges hold $first + $rest samples, not the $all of the whole"

# Back to a page: the same stacks and the same timeline.
"$EMBER" convert "$TMP/phases.pb.gz" -o "$TMP/again.html" 2>"$TMP/err" || fail "convert back: $(cat "$TMP/err")"
node --input-type=module -e "
import { readEmbeddedData } from '$ROOT/tests/browser/lib.mjs';
const [a, b] = ['$TMP/phases.html', '$TMP/again.html'].map(readEmbeddedData);
const same = (k) => JSON.stringify(a[k]) === JSON.stringify(b[k]);
for (const k of ['names', 'stacks', 'timeline']) if (!same(k)) { console.log(k + ' differ'); process.exit(1); }
if (!a.timeline.length || a.time_step_ms !== 1 || b.time_step_ms !== 1) { console.log('no timeline'); process.exit(1); }
" >"$TMP/cmp.txt" 2>&1 || fail "html -> pprof -> html changed the profile: $(cat "$TMP/cmp.txt")"
