#!/usr/bin/env bash
# `ember serve --dir SPOOL` on a fleet agent's spool: the API and the page
# list each service's profiles, and one service's periods over a time
# range open merged, as a flamegraph, pprof (read by the real pprof) or
# folded stacks: the same graph `ember convert SPOOL --service S` writes.
# The server records nothing there. Screenshots: build/screenshots/
# serve-spool{,-flamegraph}.png.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/serve_lib.sh"
need_bpf
need_browser
command -v jq >/dev/null || skip "no jq (scripts/deps.sh test installs it)"
need_pprof

# Two services for 5 one-second periods, kept in the spool only (no server).
background "$WORKLOADS/spinner" 60
background "$WORKLOADS/cpu_split" 60
SPOOL=$TMP/spool
"$EMBER" agent --period 1s --frequency 99 --spool.dir "$SPOOL" --metrics.listen "" \
	--relabel 'keep service_name spinner|cpu_split' 2>"$TMP/agent.log" &
AGENT=$!
BACKGROUND+=($AGENT)
for _ in $(seq 150); do (($(ls "$SPOOL" 2>/dev/null | grep -c '\.sent$') >= 5)) && break; sleep 0.1; done
kill -TERM $AGENT
wait $AGENT || fail "the agent exited $?: $(cat "$TMP/agent.log")"
periods=$(ls "$SPOOL" | grep -c '\.sent$')
((periods >= 5)) || fail "$periods periods in the spool after 15 s: $(cat "$TMP/agent.log")"

start_server "$SPOOL"
assert_contains "$SERVE_ERR" "serving .*, the agent's spool $SPOOL"
expect 200 GET /api/info
[ "$(jq -r .kind "$TMP/body")" = spool ] || fail "/api/info: kind is not spool: $(cat "$TMP/body")"
expect 200 GET /api/spool
jq -e --argjson n "$periods" '.periods == $n and .sent == $n and .pending == 0 and .rejected == 0' "$TMP/body" >/dev/null ||
	fail "/api/spool does not count the $periods periods: $(cat "$TMP/body")"
for s in spinner cpu_split; do
	jq -e --arg s "$s" '[.series[] | select(.service == $s and .type == "process_cpu" and .periods >= 4 and .end > .first)] | length == 1' \
		"$TMP/body" >/dev/null || fail "/api/spool has no process_cpu of $s over the periods: $(cat "$TMP/body")"
done
cp "$TMP/body" "$TMP/spool.json"

# The whole spool of one service: as `ember convert` merges it.
"$EMBER" convert "$SPOOL" --service spinner -o "$TMP/convert.folded" 2>"$TMP/convert.err" || fail "convert: $(cat "$TMP/convert.err")"
expect 200 GET "/spool/profile?service=spinner&type=process_cpu&format=folded"
cmp -s "$TMP/body" "$TMP/convert.folded" || fail "the served folded stacks differ from ember convert's: $(diff "$TMP/body" "$TMP/convert.folded" | head -5)"
total=$(awk '{ n += $NF } END { print n }' "$TMP/body")
expect 200 GET "/spool/profile?service=spinner&type=process_cpu&format=pprof"
"$PPROF" -raw "$TMP/body" >"$TMP/raw" 2>&1 || fail "pprof cannot read the served profile: $(head -3 "$TMP/raw")"
# The first sample type's values, summed as pprof lists them.
pprof_total=$(awk '/^Samples:/ { on = 1; next } /^Locations/ { on = 0 } on && /^ *[0-9]+( +[0-9]+)*: / { n += $1 } END { print n }' "$TMP/raw")
[ "$pprof_total" = "$total" ] || fail "pprof reads $pprof_total samples in the served profile, the folded stacks $total"
assert_contains "$TMP/raw" "spinner_loop" "the served pprof has no spinner_loop"
# A range of the middle periods holds part of the samples.
first=$(jq '.series[] | select(.service == "spinner") | .first' "$TMP/spool.json")
expect 200 GET "/spool/profile?service=spinner&type=process_cpu&format=folded&from=$((first + 1500))&to=$((first + 3500))"
part=$(awk '{ n += $NF } END { print n }' "$TMP/body")
((part > 0 && part < total)) || fail "the range 1.5-3.5 s in holds $part samples of $total"
expect 200 GET "/spool/profile?service=spinner&type=process_cpu"
assert_contains "$TMP/body" "\"title\":\"ember — spinner \\(process_cpu\\)\""

expect 404 GET "/spool/profile?service=nginx&type=process_cpu"
assert_contains "$TMP/body" "no service 'nginx' in that range: the periods there hold cpu_split, spinner"
expect 404 GET "/spool/profile?service=spinner&type=off_cpu"
expect 400 GET "/spool/profile?service=spinner"
expect 400 GET "/spool/profile?service=spinner&type=process_cpu&from=yesterday"
expect 400 GET "/spool/profile?service=spinner&type=process_cpu&format=svg"
# Read-only: the recorder's routes are not there.
expect 404 POST /api/start '{"event":"cpu","duration":1}'
expect 404 GET /api/results
[ -z "$(ls "$SPOOL" | grep -vE '^[0-9]+\.[0-9]+\.[0-9]+\.sent$|^\.token$')" ] || fail "the server wrote into the spool: $(ls -a "$SPOOL")"

mkdir -p "$ROOT/build/screenshots"
node "$ROOT/tests/browser/spool.test.mjs" --url "$URL/?token=$TOKEN" --spool "$TMP/spool.json" --service spinner \
	--hot spinner_loop --screenshots "$ROOT/build/screenshots" || fail "browser checks failed; server log: $(cat "$SERVE_ERR")"
