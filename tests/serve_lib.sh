# Shared by tests/integration/serve_*.sh (after tests/lib.sh): an `ember
# serve` on a free loopback port, and curl helpers for its API.

# start_server DIR [ARGS...]: sets SERVE_PID, PORT, URL, TOKEN, SERVE_ERR
# (its stderr). $SCHEME (http), $LISTEN_HOST (127.0.0.1) and $SERVE_PORT
# (a random free one) change what it listens on. A random port is retried
# while something else holds it; $SERVE_PORT must be free.
start_server() {
	local dir=$1 try
	shift
	for try in 1 2 3 4 5 6 7 8 9 10; do
		PORT=${SERVE_PORT:-$((20000 + RANDOM % 40000))}
		SERVE_ERR=$TMP/serve-$PORT.err
		background "$EMBER" serve --listen "${LISTEN_HOST:-127.0.0.1}:$PORT" --dir "$dir" "$@" 2>"$SERVE_ERR"
		SERVE_PID=${BACKGROUND[-1]}
		for _ in $(seq 100); do
			grep -q '^ember: serving' "$SERVE_ERR" && break
			kill -0 "$SERVE_PID" 2>/dev/null || break
			sleep 0.05
		done
		grep -q '^ember: serving' "$SERVE_ERR" && break
		wait "$SERVE_PID" 2>/dev/null
		grep -q 'cannot listen' "$SERVE_ERR" && [ -z "${SERVE_PORT-}" ] || fail "ember serve did not start: $(cat "$SERVE_ERR")"
	done
	grep -q '^ember: serving' "$SERVE_ERR" || fail "no free port: $(cat "$SERVE_ERR")"
	URL=${SCHEME:-http}://127.0.0.1:$PORT
	TOKEN=$(cat "$dir/.token") || fail "no token file in $dir"
	for _ in $(seq 100); do
		[ "$(curl -sk -o /dev/null -w '%{http_code}' "$URL/api/info")" = 401 ] && return
		sleep 0.05
	done
	fail "ember serve does not answer on $URL"
}

# api METHOD PATH [BODY]: prints the status code; the answer is in $TMP/body.
# A POST without BODY has none, and no Content-Length (as `curl -X POST`).
api() {
	local method=$1 path=$2
	local args=(-sS --max-time 70 -o "$TMP/body" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $TOKEN")
	[ "$method" = POST ] && args+=(-H 'X-Ember-Request: 1')
	(($# > 2)) && args+=(-H 'Content-Type: application/json' --data-binary "$3")
	curl "${args[@]}" "$URL$path"
}

# expect CODE METHOD PATH [BODY]: fails unless the answer has status CODE.
expect() {
	local want=$1 got
	shift
	got=$(api "$@")
	[ "$got" = "$want" ] || fail "$1 $2 ${3-}: status $got, expected $want: $(head -c 500 "$TMP/body")"
}

# wait_idle SECONDS: until /api/status says idle.
wait_idle() {
	for _ in $(seq $(($1 * 10))); do
		expect 200 GET /api/status
		[ "$(jq -r .state "$TMP/body")" = idle ] && return
		sleep 0.1
	done
	fail "the profile did not end within $1 s: $(cat "$TMP/body")"
}
