#!/usr/bin/env bash
# The flamegraph viewer on a generated profile with every frame kind,
# injected HTML in names, deep recursion and thousands of stacks.
. "$(dirname "$0")/../lib.sh"
[ -x /usr/bin/chromium ] || skip "no /usr/bin/chromium (scripts/deps.sh test installs it)"
[ -d "$ROOT/tests/browser/node_modules/playwright-core" ] || skip "playwright-core not installed in tests/browser"
node "$ROOT/tests/browser/make_fixture.mjs" "$TMP/fixture.html" >/dev/null || fail "fixture generation failed"
node "$ROOT/tests/browser/flamegraph.test.mjs" "$TMP/fixture.html" || fail "browser checks failed"
