#!/usr/bin/env bash
# The flamegraph viewer (and its diff mode) on generated profiles with every frame kind,
# injected HTML in names, deep recursion and thousands of stacks.
. "$(dirname "$0")/../lib.sh"
need_browser
node "$ROOT/tests/browser/make_fixture.mjs" "$TMP/fixture.html" >/dev/null || fail "fixture generation failed"
node "$ROOT/tests/browser/flamegraph.test.mjs" "$TMP/fixture.html" || fail "browser checks failed"
# The differential page: known growth, shrinkage, a new and a vanished path.
node "$ROOT/tests/browser/make_fixture.mjs" "$TMP/diff.html" --diff >/dev/null || fail "diff fixture generation failed"
node "$ROOT/tests/browser/diff.test.mjs" "$TMP/diff.html" || fail "diff browser checks failed"
# A big page (bench/fleet_profile.mjs's shape, 1.3 million nodes) and one
# with more wide nodes than a preview keeps draw their previews before
# their tables come: the widest nodes of the whole tree, the same picture.
node "$ROOT/bench/fleet_profile.mjs" --stacks 40000 >"$TMP/fleet.folded" 2>/dev/null || fail "fleet profile generation failed"
"$EMBER" convert "$TMP/fleet.folded" -o "$TMP/fleet.html" 2>"$TMP/err" || fail "convert: $(cat "$TMP/err")"
# 3,000 paths of 10 frames, weighing 1 to 3,000: 30,000 nodes over 1/8192 of the total.
awk 'BEGIN { for (i = 0; i < 3000; i++) { s = "t" i; for (d = 1; d < 10; d++) s = s ";f" i "_" d; print s, i + 1 } }' >"$TMP/wide.folded"
"$EMBER" convert "$TMP/wide.folded" -o "$TMP/wide.html" 2>"$TMP/err" || fail "convert: $(cat "$TMP/err")"
node "$ROOT/tests/browser/preview.test.mjs" "$TMP/fleet.html" "$TMP/wide.html" || fail "preview checks failed"
