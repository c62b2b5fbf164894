#!/usr/bin/env bash
# `ember serve` keeps its profiles whatever its clients and it go through:
# a client that goes away mid-request, SIGTERM to the server (the running
# profile is written), 50 clients listing results while a 99 Hz CPU profile
# runs (every request answered, the profile undisturbed), and SIGKILL (the
# `ember record` child stops, leaving no BPF object of ember's, and a
# restarted server lists the profile as failed, with the reason).
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/serve_lib.sh"
need_bpf
bpf_mark_before
command -v curl >/dev/null || skip "no curl (scripts/deps.sh test installs it)"
command -v jq >/dev/null || skip "no jq (scripts/deps.sh test installs it)"

# wait_samples N: until the running profile has N samples.
wait_samples() {
	for _ in $(seq 100); do
		expect 200 GET /api/status
		(($(jq -r '.samples // 0' "$TMP/body") >= $1)) && return
		sleep 0.1
	done
	fail "the profile took no $1 samples in 10 s: $(cat "$TMP/body")"
}
# result ID: its listing entry into $TMP/result.
result() {
	expect 200 GET /api/results
	jq -e --arg id "$1" '.results[] | select(.id == $id)' "$TMP/body" >"$TMP/result" || fail "result $1 is not listed: $(cat "$TMP/body")"
}
# assert_written ID: the result is ok, with samples, and its files are on disk.
assert_written() {
	result "$1"
	jq -e '.status == "ok" and .samples > 0 and ([.files[].size] | length == 4 and all(. > 0))' "$TMP/result" >/dev/null ||
		fail "result $1 ${2-} was not written: $(cat "$TMP/result")"
	local base ext
	base=$(jq -r .name "$TMP/result")
	for ext in html folded pb.gz log json; do
		[ -s "$DIR/$base.$ext" ] || fail "result $1 ${2-}: no $base.$ext"
	done
}
# raw_post PATH BODY: sends the request and closes the connection without reading the answer.
raw_post() {
	local fd
	exec {fd}<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot connect to port $PORT"
	printf 'POST %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nX-Ember-Request: 1\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' \
		"$1" "$PORT" "$TOKEN" "${#2}" "$2" >&"$fd"
	exec {fd}>&-
}
# gone PID: the process has ended (exited, or a zombie nobody reaps).
gone() { [[ ! -e /proc/$1 || $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]]; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

DIR=$TMP/results
start_server "$DIR"
DIR=$(cd "$DIR" && pwd -P)
# The workload keeps its CPU against the load below (nice 19) and whatever
# else the machine runs: the samples then measure the profiler alone.
background nice -n -10 "$WORKLOADS/cpu_split" 300
W=${BACKGROUND[-1]}
HZ=$(getconf CLK_TCK)

# ---- a client that goes away does not take the profile with it ----
# The page closed right after its Start: the request arrives, nobody reads the answer.
raw_post /api/start "{\"event\": \"cpu\", \"pid\": $W, \"duration\": 2}"
for _ in $(seq 50); do
	expect 200 GET /api/status
	[ "$(jq -r .state "$TMP/body")" = running ] && break
	sleep 0.1
done
jq -e '.state == "running"' "$TMP/body" >/dev/null || fail "a start whose client left did not start: $(cat "$TMP/body")"
GONE_ID=$(jq -r .id "$TMP/body")
wait_samples 20
wait_idle 20
assert_written "$GONE_ID" "(started by a client that left)"
# A client that leaves while /api/stop waits for the result.
expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W}"
STOP_ID=$(jq -r .id "$TMP/body")
wait_samples 20
raw_post /api/stop '{}'
wait_idle 20
assert_written "$STOP_ID" "(stopped by a client that left)"
# Clients that close mid-download of a large file (the server must not die of SIGPIPE).
BIG=20250102-030405-0b16f11e-cpu-host
printf '{"id": "0b16f11e", "name": "%s", "created": 1735787045000, "event": "cpu", "target": "host", "status": "ok"}\n' "$BIG" >"$DIR/$BIG.json"
head -c 30000000 /dev/zero | tr '\0' 'x' >"$DIR/$BIG.folded"
for _ in 1 2 3 4 5; do
	curl -s -H "Authorization: Bearer $TOKEN" "$URL/results/$BIG.folded" | head -c 10 >/dev/null
done
expect 200 GET /api/info
kill -0 "$SERVE_PID" 2>/dev/null || fail "the server died when clients left mid-download"
rm "$DIR/$BIG.json" "$DIR/$BIG.folded"

# ---- the recording holds none of the server's client connections ----
# cpp-httplib accepts without close-on-exec: a connection `ember record`
# inherited would stay open while it records, past a SIGKILL of the server,
# leaving that client waiting instead of seeing the connection reset.
exec {conn}<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot connect to port $PORT"
body="{\"event\": \"cpu\", \"pid\": $W, \"duration\": 15}"
printf 'POST /api/start HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nX-Ember-Request: 1\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' \
	"$PORT" "$TOKEN" "${#body}" "$body" >&"$conn"
IFS= read -r -t 10 -u "$conn" line || fail "no answer to a start on a kept-alive connection"
[[ $line == "HTTP/1.1 202"* ]] || fail "a start on a kept-alive connection: $line"
wait_samples 5
CHILD=$(pgrep -P "$SERVE_PID") || fail "no ember record child of the server"
# The server's connections: local port $PORT, in /proc/net/tcp{,6} with their inodes.
ports=$(awk -v port="$(printf ':%04X' "$PORT")" 'substr($2, length($2) - 4) == port { print "socket:[" $10 "]" }' /proc/net/tcp $(ls /proc/net/tcp6 2>/dev/null))
grep -q . <<<"$ports" || fail "no connection to port $PORT in /proc/net/tcp"
for f in /proc/"$CHILD"/fd/*; do
	l=$(readlink "$f") || continue
	grep -qxF -- "$l" <<<"$ports" && fail "ember record holds a connection of the server ($f -> $l)"
done
exec {conn}>&-
expect 200 POST /api/stop '{}'
jq -e '.status == "ok"' "$TMP/body" >/dev/null || fail "stopping the profile: $(cat "$TMP/body")"

# ---- 50 clients listing results while a 99 Hz profile runs ----
# profile_99hz SECONDS: a profile of the workload; sets ID, SAMPLES, and
# PREDICTED (99 Hz x its recorded seconds x the CPUs the workload used meanwhile).
profile_99hz() {
	local t0 c0 t1 c1
	t0=$(now_ms) c0=$(cpu_ticks "$W")
	expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W, \"frequency\": 99, \"duration\": $1}"
	ID=$(jq -r .id "$TMP/body")
	wait_idle 30
	t1=$(now_ms) c1=$(cpu_ticks "$W")
	assert_written "$ID" "(99 Hz, $1 s)"
	jq -e '.error == "" and .seconds > 0' "$TMP/result" >/dev/null || fail "result $ID: $(cat "$TMP/result")"
	SAMPLES=$(jq .samples "$TMP/result")
	# The log's "lost N (ring buffer full)" line: the listing has no field for it.
	LOST=$(awk '$1 == "lost" { print $2 }' "$DIR/$(jq -r .name "$TMP/result").log")
	[ "$LOST" = 0 ] || fail "result $ID lost ${LOST:-?} samples: $(cat "$DIR/$(jq -r .name "$TMP/result").log")"
	PREDICTED=$(jq -n --argjson s "$(jq .seconds "$TMP/result")" \
		--argjson busy "$(((c1 - c0) * 1000 / HZ))" --argjson wall "$((t1 - t0))" '99 * $s * $busy / $wall | floor')
}
within() {  # within A B PERCENT: |A - B| <= PERCENT% of B
	local d=$(($1 - $2))
	((${d#-} * 100 <= $3 * $2))
}

profile_99hz 4
BASE_SAMPLES=$SAMPLES BASE_PREDICTED=$PREDICTED
within "$BASE_SAMPLES" "$BASE_PREDICTED" 20 ||
	fail "without load: $BASE_SAMPLES samples, $BASE_PREDICTED predicted from 99 Hz and the workload's CPU time"

CLIENTS=50
mkdir "$TMP/load"
end_us=$((${EPOCHREALTIME/./} + 9000000))  # the load stops by itself after 9 s
# Each client asks at least once, however late a busy machine starts it.
client() {
	while :; do
		curl -s -o /dev/null --max-time 10 -w '%{http_code}\n' -H "Authorization: Bearer $TOKEN" "$URL/api/results" >>"$TMP/load/$1"
		[ $? = 0 ] || echo "curl-failed" >>"$TMP/load/$1"
		((${EPOCHREALTIME/./} < end_us)) || break
	done
}
LOAD=()
for i in $(seq "$CLIENTS"); do
	background nice -n 19 bash -c "$(declare -f client); end_us=$end_us TOKEN=$TOKEN URL=$URL TMP=$TMP; client $i"
	LOAD+=("${BACKGROUND[-1]}")
done
# The profile starts once the load runs: its first answers are in.
for _ in $(seq 100); do
	(( $(cat "$TMP"/load/* 2>/dev/null | wc -l) >= CLIENTS / 2 )) && break
	sleep 0.1
done
answered() { cat "$TMP"/load/* 2>/dev/null | wc -l; }
before=$(answered)
((before > 0)) || fail "the load did not start: no request answered in 10 s"
profile_99hz 4
LOAD_ID=$ID
during=$(($(answered) - before))
# Still under load when the profile was written: it ran through the whole profile.
((${EPOCHREALTIME/./} < end_us)) || echo "note: the load ended before the profile was written"
for p in "${LOAD[@]}"; do wait "$p"; done
total=$(cat "$TMP"/load/* | wc -l)
ok=$(cat "$TMP"/load/* | grep -cx 200)
((ok == total)) || fail "$((total - ok)) of $total requests under load failed: $(cat "$TMP"/load/* | grep -vx 200 | sort | uniq -c | head)"
for i in $(seq "$CLIENTS"); do
	[ -s "$TMP/load/$i" ] || fail "client $i was never answered"
done
# How many requests a busy machine makes varies; that the server answered
# them while it profiled does not.
((during > 0)) || fail "no request was answered while the profile ran ($total in all)"
within "$SAMPLES" "$PREDICTED" 20 ||
	fail "under load: $SAMPLES samples, $PREDICTED predicted from 99 Hz and the workload's CPU time"
# Against the same measure without load: samples per predicted sample (the
# workload's own CPU time may shrink a little under load; that is not the profiler).
within $((SAMPLES * BASE_PREDICTED)) $((BASE_SAMPLES * PREDICTED)) 20 ||
	fail "under load: $SAMPLES samples for $PREDICTED predicted; without load $BASE_SAMPLES for $BASE_PREDICTED"
echo "load: $total requests from $CLIENTS clients ($during while profiling), all 200; samples $SAMPLES under load (predicted $PREDICTED), $BASE_SAMPLES without (predicted $BASE_PREDICTED)"

# ---- SIGTERM while a profile runs: the profile is written, the server exits 0 ----
expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W}"
TERM_ID=$(jq -r .id "$TMP/body")
wait_samples 20
CHILD=$(pgrep -P "$SERVE_PID") || fail "no ember record child of the server"
kill -TERM "$SERVE_PID"
for _ in $(seq 300); do
	kill -0 "$SERVE_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$SERVE_PID" 2>/dev/null && fail "the server is still running 30 s after SIGTERM"
wait "$SERVE_PID"
rc=$?
[ "$rc" = 0 ] || fail "the server exited $rc on SIGTERM: $(cat "$SERVE_ERR")"
gone "$CHILD" || fail "ember record ($CHILD) outlived the server"
grep -q "stopping profile $TERM_ID" "$SERVE_ERR" || fail "the server did not say it stops the profile: $(cat "$SERVE_ERR")"
base=$(ls "$DIR" | sed -n "s/^\(.*-$TERM_ID-.*\)\.json$/\1/p")
jq -e '.status == "ok" and .samples > 0' "$DIR/$base.json" >/dev/null || fail "after SIGTERM, $base.json: $(cat "$DIR/$base.json")"
start_server "$DIR"
assert_written "$TERM_ID" "(running at SIGTERM)"

# ---- SIGKILL: the record child stops, the restarted server lists the profile as failed ----
expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W}"
KILL_ID=$(jq -r .id "$TMP/body")
wait_samples 20
CHILD=$(pgrep -P "$SERVE_PID") || fail "no ember record child of the server"
bpf_learn_ember_maps
{
	kill -KILL "$SERVE_PID"
	wait "$SERVE_PID"
} 2>/dev/null
for _ in $(seq 100); do
	gone "$CHILD" && break
	sleep 0.1
done
gone "$CHILD" || fail "ember record ($CHILD) still runs 10 s after its server was killed"
assert_no_bpf_left "kill -9 of ember serve while it records"
base=$(ls "$DIR" | sed -n "s/^\(.*-$KILL_ID-.*\)\.json$/\1/p")
[ -s "$DIR/$base.pb.gz" ] || fail "ember record did not write its pprof when its server died (no SIGINT?): $(cat "$DIR/$base.log")"
jq -e '.status == "running"' "$DIR/$base.json" >/dev/null || fail "$base.json before the restart: $(cat "$DIR/$base.json")"
start_server "$DIR"
result "$KILL_ID"
jq -e '.status == "failed" and (.error | test("server stopped"))' "$TMP/result" >/dev/null ||
	fail "after SIGKILL and a restart, result $KILL_ID: $(cat "$TMP/result")"
expect 200 GET /api/status
jq -e '.state == "idle"' "$TMP/body" >/dev/null || fail "the restarted server is not idle: $(cat "$TMP/body")"
expect 202 POST /api/start "{\"event\": \"cpu\", \"pid\": $W, \"duration\": 1}"
AFTER_ID=$(jq -r .id "$TMP/body")
wait_idle 20
assert_written "$AFTER_ID" "(after a restart)"
for id in "$GONE_ID" "$STOP_ID" "$LOAD_ID" "$TERM_ID"; do
	result "$id"
	jq -e '.status == "ok"' "$TMP/result" >/dev/null || fail "result $id changed across restarts: $(cat "$TMP/result")"
done
echo "ok: serve reliability"
