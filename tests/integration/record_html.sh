#!/usr/bin/env bash
# `ember record -o x.html` opens as a working flamegraph in headless
# Chromium: painted, hover, search with matched %, zoom, reset.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_browser
# Two processes, so the graph branches at its root whatever the samples.
"$EMBER" record -o "$TMP/out.html" -- sh -c '"$0" 2 & "$1" 2; wait' "$WORKLOADS/syscall_loop" "$WORKLOADS/cpu_split" \
	2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
mkdir -p "$ROOT/build/screenshots"
node "$ROOT/tests/browser/flamegraph.test.mjs" "$TMP/out.html" --search 'read_zero_loop|_read' \
	--screenshot "$ROOT/build/screenshots/record.png" || fail "browser checks failed"
