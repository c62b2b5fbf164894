#!/usr/bin/env bash
# `ember serve` end to end in headless Chromium, as a person uses the page:
# sign in with the printed link, profile a bundled CPU workload picked from
# the process list, stop, open the flamegraph, a timed profile, a diff,
# default transforms kept on the server, delete one and all results.
# Screenshots: build/screenshots/serve-{running,results,diff}.png.
. "$(dirname "$0")/../lib.sh"
need_bpf
[ -x /usr/bin/chromium ] || skip "no /usr/bin/chromium (scripts/deps.sh test installs it)"
[ -d "$ROOT/tests/browser/node_modules/playwright-core" ] || skip "playwright-core not installed in tests/browser"
command -v node >/dev/null || skip "no node"
[ -x "$WORKLOADS/cpu_split" ] || fail "no $WORKLOADS/cpu_split: run make"

# Long enough for the whole test (about 40 s); killed at the end.
background "$WORKLOADS/cpu_split" 300
WORKLOAD=$!

# A free port: take a random one and retry if something else holds it.
RESULTS=$TMP/results
for _ in 1 2 3 4 5 6 7 8; do
	PORT=$((20000 + RANDOM % 30000))
	"$EMBER" serve --listen "127.0.0.1:$PORT" --dir "$RESULTS" 2>"$TMP/serve.log" &
	SERVER=$!
	for _ in $(seq 50); do
		grep -q '^ember: serving' "$TMP/serve.log" && break
		kill -0 "$SERVER" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$SERVER" 2>/dev/null && grep -q '^ember: serving' "$TMP/serve.log" && break
	wait "$SERVER" 2>/dev/null
	grep -q 'cannot listen' "$TMP/serve.log" || fail "ember serve did not start: $(cat "$TMP/serve.log")"
	SERVER=
done
[ -n "$SERVER" ] || fail "no free port found: $(cat "$TMP/serve.log")"
BACKGROUND+=("$SERVER")
TOKEN=$(cat "$RESULTS/.token") || fail "no token file in $RESULTS"

mkdir -p "$ROOT/build/screenshots"
node "$ROOT/tests/browser/serve.test.mjs" --url "http://127.0.0.1:$PORT/?token=$TOKEN" \
	--pid "$WORKLOAD" --name cpu_split --hot hot_a,hot_b --dir "$RESULTS" \
	--screenshots "$ROOT/build/screenshots" || fail "browser checks failed; server log: $(cat "$TMP/serve.log")"

# The server stops cleanly on SIGTERM with nothing running.
kill -TERM "$SERVER"
wait "$SERVER" || fail "ember serve exited $? on SIGTERM: $(cat "$TMP/serve.log")"
