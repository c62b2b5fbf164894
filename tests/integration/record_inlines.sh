#!/usr/bin/env bash
# Inlined calls are frames of their own (from DWARF, marked _[i] in folded
# output); --lines adds file:line; --no-inlines leaves only real functions.
# tests/workloads/inline_hot spends nearly all its time inside hot_leaf (its
# header says why a loop that did not failed by chance): every check below
# holds with hundreds of samples to spare, whatever the timer's phase.
. "$(dirname "$0")/../lib.sh"
need_bpf
src=$ROOT/tests/workloads/inline_hot.c
"$EMBER" record -F 999 -o "$TMP/in.folded" -- "$WORKLOADS/inline_hot" 1 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
all=$(total "$TMP/in.folded")
inl=$(weight "$TMP/in.folded" ';main;run_inline;hot_outer_\[i\];hot_leaf_\[i\] [0-9]+$|;main;run_inline;hot_outer_\[i\] [0-9]+$')
leaf=$(weight "$TMP/in.folded" ';main;run_inline;hot_outer_\[i\];hot_leaf_\[i\] [0-9]+$')
echo "inline_hot: $inl of $all samples in inlined frames, $leaf in hot_leaf"
(( all >= 100 )) || fail "only $all samples in 1 s at 999 Hz"
(( inl * 100 >= all * 80 )) || fail "only $inl of $all samples under run_inline;hot_outer_[i]: $(sort -t' ' -k2 -nr "$TMP/in.folded" | head -3)"
# hot_leaf's multiplies are ~95% of the work: half is a wide margin.
(( leaf * 2 >= inl )) || fail "only $leaf of $inl inlined samples in hot_leaf, which holds nearly all the work: $(sort -t' ' -k2 -nr "$TMP/in.folded" | head -3)"

"$EMBER" record -F 999 --lines -o "$TMP/lines.folded" -- "$WORKLOADS/inline_hot" 0.5 2>"$TMP/err" || fail "--lines: ember exited $?"
# Each level's line: run_inline's where it calls hot_outer, hot_outer's
# where it calls hot_leaf, hot_leaf's its multiply (most of its samples).
line_call_outer=$(grep -n 'hot_outer(100000);' "$src" | cut -d: -f1)
line_call_leaf=$(grep -n '		hot_leaf(i);' "$src" | cut -d: -f1)
line_multiply=$(grep -n 'x = x \* x + i;' "$src" | cut -d: -f1)
chain="run_inline (inline_hot.c:$line_call_outer);hot_outer (inline_hot.c:$line_call_leaf)_[i];hot_leaf (inline_hot.c:$line_multiply)_[i]"
grep -qF ";$chain " "$TMP/lines.folded" || fail "--lines: no '$chain' stack: $(sort -t' ' -k2 -nr "$TMP/lines.folded" | head -3)"
# Every sample under hot_outer, wherever its pc, has run_inline's call line.
bad=$(grep -E ';run_inline \(inline_hot\.c:[0-9]+\);hot_outer ' "$TMP/lines.folded" | grep -v ";run_inline (inline_hot.c:$line_call_outer);" | head -1)
[ -z "$bad" ] || fail "--lines: hot_outer under another line of run_inline than its call ($line_call_outer): $bad"

"$EMBER" record -F 999 --no-inlines -o "$TMP/no.folded" -- "$WORKLOADS/inline_hot" 0.5 2>"$TMP/err" || fail "--no-inlines: ember exited $?"
assert_absent "$TMP/no.folded" '_\[i\]' "--no-inlines still shows inlined frames"
assert_contains "$TMP/no.folded" ';main;run_inline [0-9]+$'
