#!/usr/bin/env bash
# The documentation as a reader follows it: every relative link of
# README.md and docs/*.md leads to a file and a heading that exist
# (tests/tools/check_links.py), and every example marked to run as it
# stands (`<!-- example -->`) runs and still prints what the docs show
# (tests/tools/docs_examples.py), in a scratch directory.
. "$(dirname "$0")/../lib.sh"
need_bpf
python3 "$ROOT/tests/tools/check_links.py" "$ROOT" >"$TMP/links" 2>&1 || fail "broken links: $(cat "$TMP/links")"
cat "$TMP/links"
mkdir "$TMP/work"
ln -s "$ROOT/build" "$TMP/work/build"
ln -s "$ROOT/tests" "$TMP/work/tests"
python3 "$ROOT/tests/tools/docs_examples.py" "$ROOT" "$TMP/work" >"$TMP/examples" 2>&1 ||
	fail "an example of the docs does not run as shown: $(grep -A30 '^FAIL' "$TMP/examples" | head -60)"
cat "$TMP/examples"
