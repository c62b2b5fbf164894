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
