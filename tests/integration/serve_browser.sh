#!/usr/bin/env bash
# `ember serve` end to end in headless Chromium, as a person uses the page:
# sign in with the printed link, profile a bundled CPU workload picked from
# the process list, stop, open the flamegraph, a timed profile, a diff,
# default transforms kept on the server, delete one and all results.
# Screenshots: build/screenshots/serve-{running,results,diff}.png.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/serve_lib.sh"
need_bpf
need_browser
command -v curl >/dev/null || skip "no curl (scripts/deps.sh test installs it)"
[ -x "$WORKLOADS/cpu_split" ] || fail "no $WORKLOADS/cpu_split: run make"

# Long enough for the whole test (about 40 s); killed at the end.
background "$WORKLOADS/cpu_split" 300
WORKLOAD=$!

RESULTS=$TMP/results
start_server "$RESULTS"

mkdir -p "$ROOT/build/screenshots"
node "$ROOT/tests/browser/serve.test.mjs" --url "$URL/?token=$TOKEN" \
	--pid "$WORKLOAD" --name cpu_split --hot hot_a,hot_b --dir "$RESULTS" \
	--screenshots "$ROOT/build/screenshots" || fail "browser checks failed; server log: $(cat "$SERVE_ERR")"

# The server stops cleanly on SIGTERM with nothing running.
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || fail "ember serve exited $? on SIGTERM: $(cat "$SERVE_ERR")"
