#!/usr/bin/env bash
# Inlined calls are frames of their own (from DWARF, marked _[i] in folded
# output); --lines adds file:line; --no-inlines leaves only real functions.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -F 999 -o "$TMP/in.folded" -- "$WORKLOADS/inline_hot" 1 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
all=$(total "$TMP/in.folded")
inl=$(weight "$TMP/in.folded" ';main;run_inline;hot_outer_\[i\];hot_leaf_\[i\] [0-9]+$|;main;run_inline;hot_outer_\[i\] [0-9]+$')
echo "inline_hot: $inl of $all samples in inlined frames"
(( inl * 100 >= all * 80 )) || fail "only $inl of $all samples under run_inline;hot_outer_[i]: $(sort -t' ' -k2 -nr "$TMP/in.folded" | head -3)"
assert_contains "$TMP/in.folded" ';hot_outer_\[i\];hot_leaf_\[i\] [0-9]+$' "no hot_leaf inlined inside hot_outer"

"$EMBER" record -F 999 --lines -o "$TMP/lines.folded" -- "$WORKLOADS/inline_hot" 0.5 2>"$TMP/err" || fail "--lines: ember exited $?"
# run_inline's line is where it calls hot_outer; hot_outer's where it calls hot_leaf.
line_call_outer=$(grep -n 'hot_outer(100000);' "$ROOT/tests/workloads/inline_hot.c" | cut -d: -f1)
line_call_leaf=$(grep -n '		hot_leaf(i);' "$ROOT/tests/workloads/inline_hot.c" | cut -d: -f1)
assert_contains "$TMP/lines.folded" ";run_inline \\(inline_hot.c:$line_call_outer\\);hot_outer \\(inline_hot.c:$line_call_leaf\\)_\\[i\\];hot_leaf \\(inline_hot.c:[0-9]+\\)_\\[i\\] [0-9]+\$" \
	"--lines: no 'run_inline (inline_hot.c:$line_call_outer);hot_outer (inline_hot.c:$line_call_leaf)_[i];hot_leaf (...)_[i]' stack: $(head -3 "$TMP/lines.folded")"

"$EMBER" record -F 999 --no-inlines -o "$TMP/no.folded" -- "$WORKLOADS/inline_hot" 0.5 2>"$TMP/err" || fail "--no-inlines: ember exited $?"
assert_absent "$TMP/no.folded" '_\[i\]' "--no-inlines still shows inlined frames"
assert_contains "$TMP/no.folded" ';main;run_inline [0-9]+$'
