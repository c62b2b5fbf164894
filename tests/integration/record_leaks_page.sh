#!/usr/bin/env bash
# The page of a -e malloc --live recording, read as a person would
# (tests/browser/leaks.test.mjs): its Leaks panel lists aging_sites' leak
# first, with a curve of its live bytes by allocation time that rises all
# along, and a click on it searches for leak_here. The page of a CPU
# recording has no Leaks button.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_browser
"$EMBER" record -e malloc --live --alloc-interval 16384 --no-java -o "$TMP/live.html" -- "$WORKLOADS/aging_sites" 8 3 3000 \
	>/dev/null 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
"$EMBER" record -F 199 -o "$TMP/cpu.html" -- "$WORKLOADS/phases" 1 >/dev/null 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
mkdir -p "$ROOT/build/screenshots"
node "$ROOT/tests/browser/leaks.test.mjs" "$TMP/live.html" leak_here --plain "$TMP/cpu.html" \
	--screenshot "$ROOT/build/screenshots/leaks.png" ||
	fail "browser checks failed"
