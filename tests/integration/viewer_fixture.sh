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
# A big page (bench/fleet_profile.mjs's shape, 1.3 million nodes) is painted
# from its visible nodes first: the same nodes as the whole tree's above half
# a pixel, and in Chromium the same picture.
node "$ROOT/bench/fleet_profile.mjs" --stacks 40000 >"$TMP/fleet.folded" 2>/dev/null || fail "fleet profile generation failed"
"$EMBER" convert "$TMP/fleet.folded" -o "$TMP/fleet.html" 2>"$TMP/err" || fail "convert: $(cat "$TMP/err")"
node "$ROOT/tests/browser/visible_tree.test.mjs" "$TMP/fleet.html" || fail "first paint checks failed"
