#!/usr/bin/env bash
# `ember serve`'s JSON API against a real server on loopback, driven with
# curl: info, targets, start/status/stop of a CPU profile of a bundled
# workload, the listing and the files it names, diff, settings (and the view
# a new flamegraph opens in), delete, delete-all, and wrong requests (400).
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/serve_lib.sh"
need_bpf
command -v curl >/dev/null || skip "no curl (scripts/deps.sh test installs it)"
command -v jq >/dev/null || skip "no jq (scripts/deps.sh test installs it)"

DIR=$TMP/results
# Started as `sudo ember serve` starts it: the results stay the server's
# (root's), not given to the user who ran sudo as `ember record -o` gives them.
SUDO_UID=65534 SUDO_GID=65534 start_server "$DIR"
DIR=$(cd "$DIR" && pwd -P)
background "$WORKLOADS/cpu_split" 120
W=${BACKGROUND[-1]}
NAME_RE="^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}-cpu-pid$W\$"

# ---- info and targets ----
expect 200 GET /api/info
jq -e --arg dir "$DIR" '.version != "" and .dir == $dir and (.events | index("cpu")) and (.settings | type == "object")' \
	"$TMP/body" >/dev/null || fail "/api/info: $(cat "$TMP/body")"
expect 200 GET /api/targets
jq -e --argjson pid "$W" '.processes[] | select(.pid == $pid) | .name == "cpu_split" and .jvm == false
	and (.cmdline | test("cpu_split 120")) and .user != ""' "$TMP/body" >/dev/null ||
	fail "/api/targets has no entry {pid: $W, name: cpu_split, jvm: false}: $(jq -c --argjson pid "$W" '.processes[] | select(.pid == $pid)' "$TMP/body")"
jq -e '[.processes[].jvm] | . == (sort | reverse)' "$TMP/body" >/dev/null || fail "/api/targets: JVMs are not listed first"
jq -e --argjson self "$SERVE_PID" 'all(.processes[]; .pid != $self)' "$TMP/body" >/dev/null || fail "/api/targets lists the server itself"

# ---- a 2 s profile: 202, running with growing samples, 409 for a second start ----
expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W, \"duration\": 2}"
ID1=$(jq -r .id "$TMP/body")
[[ $ID1 =~ ^[0-9a-f]{8}$ ]] || fail "/api/start answered $(cat "$TMP/body"), no 8-hex-digit id"
expect 409 POST /api/start "{\"event\": \"cpu\", \"pid\": $W, \"duration\": 2}"
jq -e '.error | test("running") and test("stop")' "$TMP/body" >/dev/null ||
	fail "a second start's 409 does not say a profile runs: $(cat "$TMP/body")"
expect 200 GET /api/status
jq -e --arg id "$ID1" --argjson pid "$W" '.state == "running" and .id == $id and .event == "cpu" and
	.target == "pid\($pid)" and .duration == 2' "$TMP/body" >/dev/null || fail "/api/status while running: $(cat "$TMP/body")"
first=-1 grew=
for _ in $(seq 40); do
	expect 200 GET /api/status
	[ "$(jq -r .state "$TMP/body")" = running ] || break
	n=$(jq -r .samples "$TMP/body")
	if ((first < 0 && n > 0)); then first=$n; elif ((first > 0 && n > first)); then grew=$n && break; fi
	sleep 0.1
done
[ -n "$grew" ] || fail "/api/status samples did not grow while running (first $first): $(cat "$TMP/body")"
wait_idle 20

# ---- the listing and the files ----
expect 200 GET /api/results
jq -e --arg id "$ID1" '.results[] | select(.id == $id)' "$TMP/body" >"$TMP/r1" || fail "result $ID1 not listed: $(cat "$TMP/body")"
jq -e --argjson pid "$W" '.status == "ok" and .error == "" and .event == "cpu" and .target == "pid\($pid)" and
	.target_name == "cpu_split" and .unit == "samples" and .samples > 0 and .total > 0 and
	(.seconds > 1.5 and .seconds < 3)' "$TMP/r1" >/dev/null || fail "result $ID1: $(cat "$TMP/r1")"
created=$(jq .created "$TMP/r1")
now=$(date +%s%3N)
((created > now - 60000 && created <= now)) || fail "result $ID1 created $created, now is $now (unix ms)"
base=$(jq -r .name "$TMP/r1")
[[ $base =~ $NAME_RE && $base == *-$ID1-* ]] || fail "result name $base is not YYYYMMDD-HHMMSS-$ID1-cpu-pid$W"
[ "${base:0:15}" = "$(date -d "@$((created / 1000))" +%Y%m%d-%H%M%S)" ] || fail "result name $base does not start with its creation time"
for ext in html folded pb.gz log; do
	f=$(jq -r --arg k "$ext" '.files[$k].name // empty' "$TMP/r1")
	[ "$f" = "$base.$ext" ] || fail "result $ID1: files[\"$ext\"] is '$f', not $base.$ext: $(cat "$TMP/r1")"
	size=$(jq -r --arg k "$ext" '.files[$k].size' "$TMP/r1")
	[ -f "$DIR/$f" ] && [ "$(stat -c %s "$DIR/$f")" = "$size" ] && ((size > 0)) ||
		fail "$f: listed size $size, on disk $(stat -c %s "$DIR/$f" 2>&1)"
done
[ -f "$DIR/$base.json" ] || fail "no description $base.json"
owners=$(stat -c '%n %u:%g' "$DIR/$base".* | grep -v ' 0:0$')
[ -z "$owners" ] || fail "result files of a server started with SUDO_UID are not root's: $owners"

code=$(curl -sS -o "$TMP/page.html" -w '%{http_code} %{content_type}' -H "Authorization: Bearer $TOKEN" "$URL/results/$base.html")
[[ $code == "200 text/html"* ]] || fail "GET /results/$base.html: $code"
assert_contains "$TMP/page.html" 'id="ember-data"' "the served flamegraph has no ember-data"
"$EMBER" convert "$TMP/page.html" -o "$TMP/page.folded" || fail "the served flamegraph does not read back"
assert_contains "$TMP/page.folded" ';run_split;hot_a;' "the served flamegraph does not name hot_a under run_split"
code=$(curl -sS -D "$TMP/headers" -o "$TMP/folded" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/results/$base.folded")
[ "$code" = 200 ] || fail "GET /results/$base.folded: $code"
assert_contains "$TMP/folded" '^cpu_split;.*run_split;hot_a;work_unit [0-9]+$'
assert_contains "$TMP/folded" '^cpu_split;.*run_split;hot_b;work_unit [0-9]+$'
[ "$(total "$TMP/folded")" = "$(jq .total "$TMP/r1")" ] || fail "folded total $(total "$TMP/folded") != listed total $(jq .total "$TMP/r1")"
grep -qi '^content-disposition: attachment' "$TMP/headers" || fail "the folded file is not served as a download"
curl -sS -o "$TMP/p.pb.gz" -H "Authorization: Bearer $TOKEN" "$URL/results/$base.pb.gz"
[ "$(head -c 2 "$TMP/p.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] && gzip -t "$TMP/p.pb.gz" 2>/dev/null ||
	fail "the served $base.pb.gz is not gzip"
cmp -s "$TMP/p.pb.gz" "$DIR/$base.pb.gz" || fail "the served pb.gz differs from the file"
curl -sS -D "$TMP/headers" -o /dev/null -H "Authorization: Bearer $TOKEN" "$URL/results/$base.pb.gz"
grep -qi '^content-disposition: attachment' "$TMP/headers" || fail "the pprof file is not served as a download"
curl -sS -D "$TMP/headers" -o "$TMP/log" -H "Authorization: Bearer $TOKEN" "$URL/results/$base.log"
! grep -qi '^content-disposition: attachment' "$TMP/headers" || fail "the log is served as a download, not to view"
assert_contains "$TMP/log" '^ember: recorded' "the served log is not ember record's"

# ---- a profile without a duration, stopped: /api/stop answers with the result ----
expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W}"
ID2=$(jq -r .id "$TMP/body")
for _ in $(seq 50); do
	expect 200 GET /api/status
	(($(jq -r .samples "$TMP/body") > 20)) && break
	sleep 0.1
done
expect 200 GET /api/status
jq -e '.state == "running" and .duration == 0' "$TMP/body" >/dev/null || fail "the profile without duration: $(cat "$TMP/body")"
expect 200 POST /api/stop  # no body, as `curl -X POST`
jq -e --arg id "$ID2" '.id == $id and .status == "ok" and .samples > 0 and (.files.html.size > 0)' "$TMP/body" >/dev/null ||
	fail "/api/stop did not answer with the written result $ID2: $(cat "$TMP/body")"
expect 200 GET /api/status
[ "$(jq -r .state "$TMP/body")" = idle ] || fail "still running after /api/stop: $(cat "$TMP/body")"
expect 409 POST /api/stop
jq -e '.error | length > 0' "$TMP/body" >/dev/null || fail "409 without an error: $(cat "$TMP/body")"

# ---- POSTs without a body: a request without Content-Length has none ----
# cpp-httplib reads one until the client closes; they got 411, then waited.
bare() {  # bare PATH...: the statuses of bodiless POSTs sent on one connection
	local h=(-sS --max-time 10 -o /dev/null -w '%{http_code} ' -X POST -H "Authorization: Bearer $TOKEN" -H 'X-Ember-Request: 1')
	local args=(curl "${h[@]}" "$URL$1")
	shift
	for p in "$@"; do args+=(--next "${h[@]}" "$URL$p"); done
	"${args[@]}"
}
[ "$(bare /api/stop)" = "409 " ] || fail "a bodiless POST /api/stop with nothing running: $(bare /api/stop)"
codes=$(bare /api/results/00000000/delete /api/results/delete-all /api/settings /api/stop /api/nothing-here)
[ "$codes" = "404 400 200 409 404 " ] ||
	fail "bodiless POSTs on one connection (delete, delete-all, settings, stop, no route): $codes, not 404 400 200 409 404"
c=$(curl -sS --max-time 10 -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'X-Ember-Request: 1' \
	-F event=cpu "$URL/api/start")
[ "$c" = 415 ] || fail "a multipart form to /api/start: $c, not 415: $(cat "$TMP/body")"
expect 200 GET /api/results
jq -e --arg a "$ID1" --arg b "$ID2" '[.results[].id] | .[0] == $b and .[1] == $a' "$TMP/body" >/dev/null ||
	fail "the listing is not newest first: $(jq -c '[.results[].id]' "$TMP/body")"

# A Stop right after Start (a person changing their mind) still writes the
# result: it must not reach ember record before it can stop cleanly.
# One curl sends both on one connection, as a page would.
h=(-sS --max-time 70 -H "Authorization: Bearer $TOKEN" -H 'X-Ember-Request: 1' -H 'Content-Type: application/json')
for i in 1 2 3 4 5 6 7 8; do
	codes=$(curl "${h[@]}" -o "$TMP/start" -w '%{http_code} ' -d "{\"event\": \"cpu\", \"pid\": $W}" "$URL/api/start" \
		--next "${h[@]}" -o "$TMP/stop" -w '%{http_code}' -d '{}' "$URL/api/stop")
	[ "$codes" = "202 200" ] || fail "start then stop at once (try $i): $codes $(cat "$TMP/start" "$TMP/stop")"
	quick=$(jq -r .id "$TMP/start")
	jq -e --arg id "$quick" '.id == $id and .status == "ok" and .error == ""' "$TMP/stop" >/dev/null ||
		fail "a stop right after the start (try $i): $(cat "$TMP/stop")"
	expect 200 POST "/api/results/$quick/delete"
done

# ---- diff ----
code=$(curl -sS -o "$TMP/diff.html" -w '%{http_code} %{content_type}' -H "Authorization: Bearer $TOKEN" "$URL/diff?base=$ID1&new=$ID2")
[[ $code == "200 text/html"* ]] || fail "GET /diff: $code $(head -c 300 "$TMP/diff.html")"
assert_contains "$TMP/diff.html" 'id="ember-data"' "the diff page has no ember-data"
sed -n 's/.*<script id="ember-data" type="application\/json">\(.*\)<\/script>.*/\1/p' "$TMP/diff.html" >"$TMP/diff.json"
jq -e '(.base.total > 0) and (.base.label | length > 0)' "$TMP/diff.json" >/dev/null ||
	fail "the diff page's data has no base profile"
expect 404 GET "/diff?base=$ID1&new=00000000"
# Results measuring different things (samples and blocked ns) are refused.
expect 202 POST /api/start "{\"event\": \"offcpu\", \"pid\": $W, \"duration\": 1}"
OFF=$(jq -r .id "$TMP/body")
wait_idle 30
expect 400 GET "/diff?base=$ID1&new=$OFF"
jq -e '.error | test("different things")' "$TMP/body" >/dev/null || fail "diff of cpu and offcpu: $(cat "$TMP/body")"
expect 200 POST "/api/results/$OFF/delete"
expect 404 GET "/diff?base=$ID1"

# ---- settings: round trip, refusals, and the view a new flamegraph opens in ----
VIEW='{"reverse": true, "sort": "name", "transforms": [{"kind": "hide", "re": "^hot_b$"}, {"kind": "rename", "re": "work_(unit)", "to": "w_$1"}]}'
SETTINGS="{\"event\": \"cpu\", \"frequency\": 49, \"duration\": 7, \"min_block\": \"2ms\", \"view\": $VIEW}"
expect 200 POST /api/settings "$SETTINGS"
jq -e --argjson s "$SETTINGS" '. == $s' "$TMP/body" >/dev/null || fail "POST /api/settings answered $(cat "$TMP/body")"
expect 200 GET /api/settings
jq -e --argjson s "$SETTINGS" '. == $s' "$TMP/body" >/dev/null || fail "GET /api/settings after saving: $(cat "$TMP/body")"
jq -e --argjson s "$SETTINGS" '. == $s' "$DIR/settings.json" >/dev/null || fail "settings.json: $(cat "$DIR/settings.json")"
expect 200 GET /api/info
jq -e --argjson s "$SETTINGS" '.settings == $s' "$TMP/body" >/dev/null || fail "/api/info settings: $(cat "$TMP/body")"
for bad in '{"bogus": 1}' '{"frequency": "fast"}' '{"frequency": -5}' '{"event": "disk"}' '{"duration": -1}' \
	'{"view": {"sort": "size"}}' '{"view": {"reverse": "yes"}}' '{"view": {"transforms": [{"kind": "hide"}]}}' \
	'{"view": {"colour": "red"}}' '[1, 2]' 'not json' '"cpu"'; do
	expect 400 POST /api/settings "$bad"
	jq -e '.error | length > 0' "$TMP/body" >/dev/null || fail "settings $bad: 400 without an error: $(cat "$TMP/body")"
done
expect 200 GET /api/settings
jq -e --argjson s "$SETTINGS" '. == $s' "$TMP/body" >/dev/null || fail "a refused POST changed the settings: $(cat "$TMP/body")"
# Fields left out of a start come from the settings: 49 Hz, 7 s (cut short by a stop).
expect 202 POST /api/start "{\"pid\": $W}"
ID3=$(jq -r .id "$TMP/body")
expect 200 GET /api/status
jq -e '.duration == 7 and .event == "cpu"' "$TMP/body" >/dev/null || fail "the start did not take the saved duration: $(cat "$TMP/body")"
sleep 1
expect 200 POST /api/stop
base3=$(jq -r .name "$TMP/body")
assert_contains "$DIR/$base3.log" 'at 49 Hz' "the start did not take the saved frequency: $(head -2 "$DIR/$base3.log")"
sed -n 's/.*<script id="ember-data" type="application\/json">\(.*\)<\/script>.*/\1/p' "$DIR/$base3.html" >"$TMP/data3.json"
jq -e --argjson v "$VIEW" '(.view | fromjson) == $v' "$TMP/data3.json" >/dev/null ||
	fail "the new flamegraph does not open in the saved view: view = $(jq -c .view "$TMP/data3.json")"
sed -n 's/.*<script id="ember-data" type="application\/json">\(.*\)<\/script>.*/\1/p' "$DIR/$base.html" >"$TMP/data1.json"
jq -e 'has("view") | not' "$TMP/data1.json" >/dev/null || fail "a flamegraph written before the settings has a view"

# ---- wrong start requests: 400 with a reason, nothing started ----
gone=$(sh -c 'echo $$')
while [ -e "/proc/$gone" ]; do gone=$((gone + 1)); done
expect 200 GET /api/results
count=$(jq '.results | length' "$TMP/body")
while read -r bad why; do
	expect 400 POST /api/start "$bad"
	jq -e --arg why "$why" '.error | test($why)' "$TMP/body" >/dev/null || fail "start $bad: the error does not say /$why/: $(cat "$TMP/body")"
done <<EOF
{"event":"bogus","pid":$W}	event
{"evnt":"cpu","pid":$W}	evnt
{"event":"cpu","pid":$gone}	no process
{"event":"cpu","pid":-1}	pid
{"event":"cpu","pid":"$W"}	pid
{"event":"cpu","pid":$W,"duration":"2"}	duration
{"event":"cpu","pid":$W,"duration":-3}	duration
{"event":"cpu","pid":$W,"frequency":1000000}	frequency
{"event":"cpu","pid":$W,"frequency":9.5}	frequency
{"event":"offcpu","pid":$W,"min_block":"fast"}	min_block
not-json	JSON
[1,2,3]	object
EOF
expect 200 GET /api/status
[ "$(jq -r .state "$TMP/body")" = idle ] || fail "a refused start left a profile running: $(cat "$TMP/body")"
expect 200 GET /api/results
[ "$(jq '.results | length' "$TMP/body")" = "$count" ] || fail "a refused start left a result: $(jq -c '[.results[].id]' "$TMP/body")"
expect 404 POST /api/results/00000000/delete
expect 404 POST /api/results/0000000g/delete

# ---- delete one, then all ----
files_of() { find "$DIR" -maxdepth 1 -name "*-$1-*" | wc -l; }
(($(files_of "$ID1") == 5)) || fail "result $ID1 has $(files_of "$ID1") files, not 5: $(ls "$DIR")"
expect 200 POST "/api/results/$ID1/delete"
[ "$(jq .deleted "$TMP/body")" = 5 ] || fail "deleting $ID1 answered $(cat "$TMP/body"), not 5 files"
(($(files_of "$ID1") == 0)) || fail "files of $ID1 left after deleting it: $(ls "$DIR")"
expect 200 GET /api/results
jq -e --arg id "$ID1" 'all(.results[]; .id != $id)' "$TMP/body" >/dev/null || fail "$ID1 still listed after deleting it"
expect 404 GET "/results/$base.html"
expect 404 POST "/api/results/$ID1/delete"
for bad in '{}' '{"confirm": false}' '{"confirm": "yes"}' '{"confirm": 1}' 'not json'; do
	expect 400 POST /api/results/delete-all "$bad"
done
(($(files_of "$ID2") == 5)) || fail "a refused delete-all removed files of $ID2"
expect 200 POST /api/results/delete-all '{"confirm": true}'
[ "$(jq .deleted "$TMP/body")" = 2 ] || fail "delete-all answered $(cat "$TMP/body"), not 2 results"
expect 200 GET /api/results
jq -e '.results == []' "$TMP/body" >/dev/null || fail "results left after delete-all: $(cat "$TMP/body")"
left=$(find "$DIR" -maxdepth 1 -name '2*' | wc -l)
((left == 0)) || fail "files left after delete-all: $(ls "$DIR")"
[ -f "$DIR/.token" ] && [ -f "$DIR/settings.json" ] || fail "delete-all removed the token or the settings"
echo "ok: serve API (results $ID1 $ID2 $ID3)"
