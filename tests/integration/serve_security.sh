#!/usr/bin/env bash
# `ember serve`'s guard, attacked on loopback with curl: the token (401
# without it, cookie, the ?token= link), the token file's mode, path
# traversal in every encoding, links and FIFOs named like results, the CSRF
# guard, methods, body size, TLS, and --listen's checks. Needs no root: the
# results attacked are written by hand.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/serve_lib.sh"
command -v curl >/dev/null || skip "no curl (scripts/deps.sh test installs it)"
command -v jq >/dev/null || skip "no jq (scripts/deps.sh test installs it)"
command -v openssl >/dev/null || skip "no openssl (scripts/deps.sh test installs it)"

DIR=$TMP/results
start_server "$DIR"
DIR=$(cd "$DIR" && pwd -P)
[ "$(stat -c %a "$DIR/.token")" = 600 ] || fail "the token file has mode $(stat -c %a "$DIR/.token"), not 600"
[ "$(stat -c %a "$DIR")" = 700 ] || fail "the results directory has mode $(stat -c %a "$DIR"), not 700"
((${#TOKEN} >= 32)) || fail "the token is ${#TOKEN} characters"
grep -q "open $URL/?token=$TOKEN\$" "$SERVE_ERR" || fail "the first start does not print the link with the new token: $(cat "$SERVE_ERR")"
SECRET=$TMP/secret.txt  # outside the results directory
echo "ember-test-secret-$RANDOM$RANDOM" >"$SECRET"
SECRET_TEXT=$(cat "$SECRET")

# fake_result ID: a finished result written by hand; prints its base name.
fake_result() {
	local base=20250102-030405-$1-cpu-host
	printf '{"id": "%s", "name": "%s", "created": 1735787045000, "event": "cpu", "target": "host", "target_name": "whole host", "status": "ok", "error": "", "unit": "samples", "total": 3, "samples": 3, "seconds": 1}\n' \
		"$1" "$base" >"$DIR/$base.json"
	echo '<!doctype html><title>fake</title>' >"$DIR/$base.html"
	echo 'main;fake_function 3' >"$DIR/$base.folded"
	echo 'ember: recorded' >"$DIR/$base.log"
	printf '%s\n' "$base"
}
FAKE=$(fake_result 0123abcd)

# code [CURL ARGS...]: the status of a request, its answer appended to $TMP/all (checked for leaks).
code() {
	curl -sS --max-time 10 --path-as-is -o "$TMP/body" -w '%{http_code}' "$@"
	cat "$TMP/body" >>"$TMP/all"
}
auth=(-H "Authorization: Bearer $TOKEN")
post=(-X POST -H 'X-Ember-Request: 1' -H 'Content-Type: application/json')

# ---- no token, a wrong token: 401 everywhere, and nothing changes ----
GETS=(/index.html /api/info /api/targets /api/status /api/results /api/settings "/results/$FAKE.html"
	"/results/$FAKE.json" "/diff?base=0123abcd&new=0123abcd" /no/such/page)
POSTS=("/api/start {\"event\":\"cpu\",\"duration\":1}" "/api/stop {}" "/api/settings {\"frequency\":7}"
	"/api/results/0123abcd/delete {}" "/api/results/delete-all {\"confirm\":true}")
WRONG=("" "Bearer" "Bearer " "Bearer wrong" "Bearer ${TOKEN:0:-1}" "Bearer ${TOKEN}x" "Bearer ${TOKEN:0:-1}0"
	"Basic $(printf 'x:%s' "$TOKEN" | base64 -w0)" "Bearer  $TOKEN")
[ "${TOKEN: -1}" = 0 ] && WRONG[6]="Bearer ${TOKEN:0:-1}1"
# Every endpoint without a token and with a wrong one; the other wrong forms on two.
for a in "${WRONG[@]}"; do
	h=()
	[ -n "$a" ] && h=(-H "Authorization: $a")
	gets=("${GETS[@]}") posts=("${POSTS[@]}")
	[[ -z $a || $a == "Bearer wrong" ]] || gets=(/api/info) posts=("${POSTS[2]}")
	for p in "${gets[@]}"; do
		c=$(code "${h[@]}" "$URL$p")
		[ "$c" = 401 ] || fail "GET $p with Authorization '$a': $c, not 401"
	done
	for pb in "${posts[@]}"; do
		c=$(code "${h[@]}" "${post[@]}" --data-binary "${pb#* }" "$URL${pb%% *}")
		[ "$c" = 401 ] || fail "POST ${pb%% *} with Authorization '$a': $c, not 401"
	done
done
for m in PUT DELETE PATCH OPTIONS; do
	c=$(code -X "$m" "$URL/results/$FAKE.html")
	[ "$c" = 401 ] || fail "$m without a token: $c, not 401"
done
# The page alone loads without the token (it says how to sign in), holding no data.
for m in POST PUT; do
	c=$(code -X "$m" -H 'X-Ember-Request: 1' -d '{}' "$URL/")
	[ "$c" = 401 ] || fail "$m / without a token: $c, not 401"
done
[ "$(code "$URL/")" = 200 ] || fail "GET / without a token: not the page"
grep -qi '<html' "$TMP/body" || fail "GET / without a token is not the page"
! grep -qE "0123abcd|$FAKE|$DIR" "$TMP/body" || fail "the page served without a token holds data"
for bad in "ember_token=wrong" "ember_token=" "ember_token=${TOKEN:0:-1}" "other=$TOKEN" "xember_token=$TOKEN"; do
	c=$(code -H "Cookie: $bad" "$URL/api/info")
	[ "$c" = 401 ] || fail "cookie '$bad': $c, not 401"
done
curl -sS -D "$TMP/h401" -o /dev/null "$URL/api/info"
grep -qi '^www-authenticate: bearer' "$TMP/h401" || fail "a 401 has no WWW-Authenticate: Bearer"
[ -f "$DIR/$FAKE.html" ] && [ ! -f "$DIR/settings.json" ] || fail "a request without the token changed something"
jq -e '.error | test("token")' "$TMP/body" >/dev/null || fail "the 401 does not say a token is needed: $(cat "$TMP/body")"

# ---- the right token: Authorization, the cookie, and the ?token= link ----
[ "$(code "${auth[@]}" "$URL/api/info")" = 200 ] || fail "GET /api/info with the token: not 200"
[ "$(code -H "Cookie: ember_token=$TOKEN" "$URL/api/info")" = 200 ] || fail "the token in the cookie is refused"
[ "$(code -H "Cookie: theme=dark; ember_token=$TOKEN; x=y" "$URL/api/results")" = 200 ] || fail "the cookie among others is refused"
c=$(code -H "Cookie: ember_token=$TOKEN" "${post[@]}" --data-binary '{"frequency": 41}' "$URL/api/settings")
[ "$c" = 200 ] || fail "POST with the token in the cookie: $c"
c=$(curl -sS -D "$TMP/hlink" -o /dev/null -c "$TMP/jar" -w '%{http_code}' "$URL/?token=$TOKEN")
[ "$c" = 303 ] || fail "/?token=T: $c, not 303"
tr -d '\r' <"$TMP/hlink" | grep -qix 'location: /' || fail "/?token=T does not redirect to /: $(grep -i '^location' "$TMP/hlink")"
cookie=$(grep -i '^set-cookie:' "$TMP/hlink" | tr -d '\r')
[[ $cookie == *"ember_token=$TOKEN;"* && $cookie == *"; HttpOnly"* && $cookie == *"; SameSite=Strict"* && $cookie == *"; Path=/"* ]] ||
	fail "/?token=T set the cookie '$cookie', not an HttpOnly SameSite=Strict ember_token for /"
[[ $cookie != *Secure* ]] || fail "a cookie over plain HTTP is marked Secure (the browser would drop it)"
[ "$(curl -sS -o "$TMP/page" -b "$TMP/jar" -w '%{http_code}' "$URL/")" = 200 ] || fail "the page refuses the cookie the link set"
grep -qi '<html' "$TMP/page" || fail "/ is not the page"
! grep -q "$TOKEN" "$TMP/page" || fail "the page contains the token"
c=$(curl -sS -D "$TMP/hwrong" -o /dev/null -w '%{http_code}' "$URL/?token=${TOKEN:0:-1}")
[ "$c" = 401 ] && ! grep -qi '^set-cookie' "$TMP/hwrong" || fail "/?token=WRONG: $c $(grep -i set-cookie "$TMP/hwrong")"
curl -sS -D "$TMP/hpage" -o /dev/null "${auth[@]}" "$URL/"
grep -qi "^content-security-policy: default-src 'none'" "$TMP/hpage" || fail "the page has no restrictive Content-Security-Policy"
grep -qi '^x-frame-options: deny' "$TMP/hpage" || fail "the page may be framed"

# ---- path traversal: 404 for everything but the names of results ----
ln -s /etc/passwd "$DIR/20250102-030405-0badf00d-cpu-host.html"
ln -s "$DIR/.token" "$DIR/20250102-030405-0badf00d-cpu-host.folded"
ln -s "$SECRET" "$DIR/20250102-030405-0badf00d-cpu-host.log"
ln -s / "$DIR/20250102-030405-0badf00d-cpu-host.pb.gz"
printf '{"id": "0badf00d", "name": "20250102-030405-0badf00d-cpu-host", "created": 1735787045000, "event": "cpu", "target": "host", "status": "ok"}\n' \
	>"$DIR/20250102-030405-0badf00d-cpu-host.json"
ln -s "$DIR/$FAKE.json" "$DIR/20250102-030405-0ddba11d-cpu-host.json"  # a description claiming another's files
mkfifo "$DIR/20250102-030405-f1f0f1f0-cpu-host.html" "$DIR/20250102-030405-f1f0f1f0-cpu-host.pb.gz"
printf '{"id": "f1f0f1f0", "name": "20250102-030405-f1f0f1f0-cpu-host", "created": 1735787045000, "event": "cpu", "target": "host", "status": "ok"}\n' \
	>"$DIR/20250102-030405-f1f0f1f0-cpu-host.json"
passwd_sum=$(sha256sum </etc/passwd)
: >"$TMP/all"
TRAVERSALS=(
	/results/../.token /results/../../../../../etc/passwd /results/..%2f.token /results/..%2F..%2F..%2Fetc%2Fpasswd
	/results/%2e%2e%2f.token /results/%2E%2E%2F.token /results/%2e%2e/.token /results/.%2e/.token
	/results/%252e%252e%252f.token /results/%252e%252e/.token /results/..%252f..%252fetc%252fpasswd
	/results/%2fetc%2fpasswd /results//etc/passwd /results/%2F%2Fetc%2Fpasswd /results/etc/passwd /etc/passwd
	/results/..%5c.token /results/..%c0%af.token /results/%c0%ae%c0%ae%c0%af.token /results/.token /results/settings.json
	/results/ /results /results/. /results/.. "/results/$FAKE.html/../../.token" "/results/$FAKE.html%00.token"
	"/results/$FAKE.html%2f..%2f..%2f.token" "/results/..%2f$(basename "$DIR")%2f$FAKE.html"
	"/results/$FAKE.htm" "/results/$FAKE.txt" "/results/${FAKE}x.html"
	/results/20250102-030405-0badf00d-cpu-host.html /results/20250102-030405-0badf00d-cpu-host.folded
	/results/20250102-030405-0badf00d-cpu-host.log /results/20250102-030405-0badf00d-cpu-host.pb.gz
	/results/20250102-030405-0badf00d-cpu-host.pb.gz/etc/passwd /results/20250102-030405-0badf00d-cpu-host.pb.gz%2fetc%2fpasswd
	/results/20250102-030405-0ddba11d-cpu-host.json /results/20250102-030405-f1f0f1f0-cpu-host.html
	/results/20250102-030405-f1f0f1f0-cpu-host.pb.gz "/results/%2e%2e%2f%2e%2e%2f%2e%2e%2f$SECRET"
	"/results/..%2f..%2f..%2f..%2f..%2f..%2f${SECRET//\//%2f}" "/results/${SECRET//\//%2f}")
for p in "${TRAVERSALS[@]}"; do
	c=$(code "${auth[@]}" "$URL$p")
	[ "$c" = 404 ] || fail "GET $p: $c, not 404: $(head -c 200 "$TMP/body")"
done
# Request targets no browser sends (curl normalises nothing with --request-target).
for t in /etc/passwd ../../etc/passwd "$URL/results/../.token" "http://evil.example/results/../../etc/passwd" \
	"//results/../.token" "/results/../../../etc/passwd"; do
	c=$(code "${auth[@]}" --request-target "$t" "$URL/")
	[[ $c == 4?? ]] || fail "request target $t: $c, not refused"
done
grep -q 'root:' "$TMP/all" && fail "a traversal served /etc/passwd"
grep -qF "$TOKEN" "$TMP/all" && fail "an answer contains the token"
grep -qF "$SECRET_TEXT" "$TMP/all" && fail "a link served a file outside the results directory"
# The real one is served (so the 404s above are about the names, not the server).
[ "$(code "${auth[@]}" "$URL/results/$FAKE.html")" = 200 ] && grep -q '<title>fake' "$TMP/body" || fail "GET /results/$FAKE.html is not served"
[ "$(code "${auth[@]}" "$URL/results/$FAKE.json")" = 200 ] || fail "GET /results/$FAKE.json is not served"
# A differential graph reads the two results' .pb.gz: not through a link, nor from a FIFO.
printf 'main;ember_secret_frame 5\n' >"$TMP/outside.folded"
ln -sfn "$TMP/outside.folded" "$DIR/20250102-030405-0badf00d-cpu-host.pb.gz"  # -n: the old link points to /
ln -s "$TMP/outside.folded" "$DIR/$FAKE.pb.gz"
for q in "base=0badf00d&new=0badf00d" "base=0123abcd&new=0123abcd" "base=f1f0f1f0&new=f1f0f1f0"; do
	c=$(code "${auth[@]}" "$URL/diff?$q")
	[[ $c == 4?? ]] || fail "/diff?$q through a link or a FIFO: $c, not refused"
	! grep -q ember_secret_frame "$TMP/body" || fail "/diff?$q read a file outside the results directory through a link"
done
rm "$DIR/$FAKE.pb.gz"
# The listing shows neither the links nor the FIFOs as files, nor the borrowed description.
[ "$(code "${auth[@]}" "$URL/api/results")" = 200 ] || fail "GET /api/results: not 200"
jq -e '[.results[].id] | sort == ["0123abcd", "0badf00d", "f1f0f1f0"]' "$TMP/body" >/dev/null ||
	fail "the listing: $(jq -c '[.results[].id]' "$TMP/body")"
jq -e '.results[] | select(.id != "0123abcd") | .files == {}' "$TMP/body" >/dev/null ||
	fail "links or FIFOs listed as files: $(jq -c '.results[] | {id, files}' "$TMP/body")"
# Deleting a result with links removes the links, not what they point to.
c=$(code "${auth[@]}" "${post[@]}" -d '{}' "$URL/api/results/0badf00d/delete")
[ "$c" = 200 ] || fail "deleting the result of links: $c"
ls "$DIR" | grep -q 0badf00d && fail "links left after deleting their result: $(ls "$DIR")"
[ "$(sha256sum </etc/passwd)" = "$passwd_sum" ] && [ "$(cat "$SECRET")" = "$SECRET_TEXT" ] &&
	[ "$(cat "$DIR/.token")" = "$TOKEN" ] && [ -f "$TMP/outside.folded" ] || fail "deleting links removed or changed their targets"
c=$(code "${auth[@]}" "${post[@]}" -d '{}' "$URL/api/results/f1f0f1f0/delete")
[ "$c" = 200 ] && ! ls "$DIR" | grep -q f1f0f1f0 || fail "deleting the result of FIFOs: $c, left $(ls "$DIR")"
rm -f "$DIR/20250102-030405-0ddba11d-cpu-host.json"

# ---- CSRF: a POST needs X-Ember-Request: 1 and no foreign origin ----
settings_before=$(cat "$DIR/settings.json")
csrf() {  # csrf WANT HEADERS...: POST /api/settings with the token
	local want=$1 c
	shift
	c=$(code "${auth[@]}" -X POST -H 'Content-Type: application/json' "$@" --data-binary '{"frequency": 13}' "$URL/api/settings")
	[ "$c" = "$want" ] || fail "POST /api/settings with [$*]: $c, not $want: $(cat "$TMP/body")"
}
csrf 403
csrf 403 -H 'X-Ember-Request: 0'
csrf 403 -H 'X-Ember-Request: true'
csrf 403 -H 'Content-Type: text/plain'
csrf 403 -H 'X-Ember-Request: 1' -H 'Origin: http://evil.example'
csrf 403 -H 'X-Ember-Request: 1' -H 'Origin: null'
csrf 403 -H 'X-Ember-Request: 1' -H "Origin: http://127.0.0.1:$PORT.evil.example"
csrf 403 -H 'X-Ember-Request: 1' -H "Origin: https://127.0.0.1:$PORT"
csrf 403 -H 'X-Ember-Request: 1' -H 'Sec-Fetch-Site: cross-site'
csrf 403 -H 'X-Ember-Request: 1' -H 'Sec-Fetch-Site: same-site'
[ "$(cat "$DIR/settings.json")" = "$settings_before" ] || fail "a refused cross-site POST changed the settings"
for pb in "${POSTS[@]}"; do
	c=$(code "${auth[@]}" -X POST --data-binary "${pb#* }" "$URL${pb%% *}")
	[ "$c" = 403 ] || fail "POST ${pb%% *} without X-Ember-Request: $c, not 403"
	c=$(code "${auth[@]}" "${post[@]}" -H 'Origin: http://evil.example' --data-binary "${pb#* }" "$URL${pb%% *}")
	[ "$c" = 403 ] || fail "POST ${pb%% *} from a foreign Origin: $c, not 403"
done
[ -f "$DIR/$FAKE.html" ] || fail "a refused cross-site delete removed a result"
[ "$(code "${auth[@]}" "$URL/api/status")" = 200 ] && jq -e '.state == "idle"' "$TMP/body" >/dev/null ||
	fail "a refused cross-site start started a profile: $(cat "$TMP/body")"
csrf 200 -H 'X-Ember-Request: 1'
csrf 200 -H 'X-Ember-Request: 1' -H "Origin: http://127.0.0.1:$PORT" -H 'Sec-Fetch-Site: same-origin'
# Other methods are refused, and no CORS is granted.
for m in PUT DELETE PATCH OPTIONS; do
	c=$(code "${auth[@]}" -X "$m" -H 'X-Ember-Request: 1' -H 'Origin: http://evil.example' \
		-H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: x-ember-request' -D "$TMP/hm" "$URL/results/$FAKE.html")
	[ "$c" = 405 ] || fail "$m /results/$FAKE.html: $c, not 405"
	! grep -qi '^access-control-allow' "$TMP/hm" || fail "$m answered with CORS headers: $(grep -i '^access-control' "$TMP/hm")"
done
[ -f "$DIR/$FAKE.html" ] || fail "DELETE removed a result file"

# ---- bodies over 64 KiB: 413 ----
head -c 70000 /dev/zero | tr '\0' ' ' >"$TMP/big"
echo '{"frequency": 17}' >>"$TMP/big"
c=$(code "${auth[@]}" "${post[@]}" --data-binary @"$TMP/big" "$URL/api/settings")
[ "$c" = 413 ] || fail "a 70 000-byte body: $c, not 413"
# cpp-httplib bounds only bodies of a stated length: the others are refused.
c=$(code "${auth[@]}" "${post[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/big" "$URL/api/settings")
[[ $c == 411 || $c == 413 ]] || fail "a 70 000-byte chunked body: $c, not 411 or 413"
c=$(code "${auth[@]}" "${post[@]}" -H 'Transfer-Encoding: chunked' --data-binary '{"frequency": 17}' "$URL/api/settings")
[[ $c == 411 || $c == 413 ]] || fail "a chunked body: $c, not 411 (only bodies of a stated length are bounded)"
c=$(code "${auth[@]}" -X POST -H 'X-Ember-Request: 1' "$URL/api/stop")
[ "$c" = 409 ] || fail "a POST without Content-Length (no body): $c, not 409 (nothing runs)"
head -c 20000000 /dev/zero | gzip -c >"$TMP/bomb.gz"
c=$(code "${auth[@]}" "${post[@]}" -H 'Content-Encoding: gzip' --data-binary @"$TMP/bomb.gz" "$URL/api/settings")
[[ $c == 415 || $c == 413 ]] || fail "a gzip body of $(stat -c %s "$TMP/bomb.gz") bytes inflating to 20 MB: $c, not 415 or 413"
head -c 2000000 /dev/zero | tr '\0' ' ' >"$TMP/huge"
c=$(code "${auth[@]}" "${post[@]}" --data-binary @"$TMP/huge" "$URL/api/start")
[ "$c" = 413 ] || fail "a 2 MB body: $c, not 413"
grep -q '"frequency": 17' "$DIR/settings.json" && fail "a body over the limit was applied"
head -c 60000 /dev/zero | tr '\0' ' ' >"$TMP/fits"
echo '{"frequency": 19}' >>"$TMP/fits"
c=$(code "${auth[@]}" "${post[@]}" --data-binary @"$TMP/fits" "$URL/api/settings")
[ "$c" = 200 ] && grep -q '"frequency": 19' "$DIR/settings.json" || fail "a 60 000-byte body (under the limit): $c"

# ---- a restart prints where the token is, not the token ----
kill "$SERVE_PID"
wait "$SERVE_PID"
rc=$?
[ "$rc" = 0 ] || fail "ember serve exited $rc on SIGTERM"
start_server "$DIR"
! grep -qF "$TOKEN" "$SERVE_ERR" || fail "a restart printed the token again"
grep -qF "$DIR/.token" "$SERVE_ERR" || fail "a restart does not say where the token is: $(cat "$SERVE_ERR")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" "$URL/api/info")" = 200 ] || fail "the token changed across a restart"
kill "$SERVE_PID"
wait "$SERVE_PID"

# ---- token files the server refuses ----
refuse() {  # refuse WHY ARGS...: ember serve must exit 1 or 2 saying /WHY/
	local why=$1 rc
	shift
	timeout 10 "$EMBER" serve "$@" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	[[ $rc == 1 || $rc == 2 ]] || fail "ember serve $*: exit $rc, expected 1 or 2: $(cat "$TMP/err")"
	grep -qiE -- "$why" "$TMP/err" || fail "ember serve $*: no message matching /$why/: $(cat "$TMP/err")"
}
echo 0123456789abcdef0123456789abcdef >"$TMP/open.token"
chmod 644 "$TMP/open.token"
refuse 'chmod 600' --listen 127.0.0.1:1 --dir "$TMP/r2" --token-file "$TMP/open.token"
echo short >"$TMP/short.token"
chmod 600 "$TMP/short.token"
refuse 'shorter' --listen 127.0.0.1:1 --dir "$TMP/r2" --token-file "$TMP/short.token"
ln -s "$DIR/.token" "$TMP/link.token"
refuse 'token' --listen 127.0.0.1:1 --dir "$TMP/r2" --token-file "$TMP/link.token"

# ---- --listen values refused ----
for bad in nonsense 127.0.0.1 127.0.0.1: :: 127.0.0.1:0 127.0.0.1:65536 127.0.0.1:99999999999 127.0.0.1:80a \
	127.0.0.1:-1 ::1:8080 '[::1]' '[::1:8080' 300.1.1.1:8080 example.invalid:8080 "" ' 127.0.0.1:8080'; do
	refuse 'listen|address' --listen "$bad" --dir "$TMP/r2"
done

# ---- one server per port: a second is refused, the first keeps every request ----
# cpp-httplib sets SO_REUSEPORT by default: a second server listened too,
# and the kernel shared the connections, half meeting the other's token.
start_server "$TMP/first"
refuse "cannot listen on 127.0.0.1:$PORT: Address already in use" --listen "127.0.0.1:$PORT" --dir "$TMP/second"
# ... and made no token: the start after it still shows the new token's link.
[ -e "$TMP/second/.token" ] && fail "a start that could not listen left a token file"
codes=$(for _ in $(seq 12); do code -H "Authorization: Bearer $TOKEN" "$URL/api/info"; echo; done | sort | uniq -c | xargs)
[ "$codes" = "12 200" ] || fail "12 requests to the first server after a second tried its port: $codes"

# ---- a restart right after a stop binds again (SO_REUSEADDR) ----
# The stopping server closes a client's open connection first: its end
# stays on the port (FIN-WAIT, then TIME-WAIT), which a plain bind refuses.
exec {conn}<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n' "$TOKEN" >&"$conn"
read -r -t 10 -u "$conn" line || fail "no answer on a kept-alive connection"
kill "$SERVE_PID"
wait "$SERVE_PID"
[ -n "$(ss -Htan exclude listening "( sport = :$PORT )")" ] ||
	fail "no connection left on port $PORT by the stopped server: the restart below tests nothing"
SERVE_PORT=$PORT start_server "$TMP/first"
exec {conn}>&-
kill "$SERVE_PID"
wait "$SERVE_PID"

# ---- TLS: HTTPS with a self-signed certificate; the cookie is Secure ----
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
	-keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>"$TMP/openssl.err" || fail "openssl: $(cat "$TMP/openssl.err")"
SCHEME=https start_server "$TMP/tls" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"
grep -q "serving https://127.0.0.1:$PORT/" "$SERVE_ERR" || fail "the TLS server does not print an https link: $(cat "$SERVE_ERR")"
! grep -qi 'warning' "$SERVE_ERR" || fail "a loopback TLS server warns: $(cat "$SERVE_ERR")"
c=$(curl -sS --cacert "$TMP/cert.pem" -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/api/info")
[ "$c" = 200 ] || fail "GET /api/info over HTTPS: $c"
curl -s -o /dev/null -H "Authorization: Bearer $TOKEN" "$URL/api/info"
rc=$?
[ "$rc" = 60 ] || fail "curl without the CA accepted the certificate (exit $rc): not our certificate?"
c=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/info")
[ "$c" != 200 ] || fail "the TLS port answers plain HTTP"
c=$(curl -sS --cacert "$TMP/cert.pem" -D "$TMP/htls" -o /dev/null -w '%{http_code}' "$URL/?token=$TOKEN")
cookie=$(grep -i '^set-cookie:' "$TMP/htls" | tr -d '\r')
[ "$c" = 303 ] && [[ $cookie == *"; Secure"* && $cookie == *"; HttpOnly"* ]] || fail "over HTTPS /?token=T: $c, cookie '$cookie' (not Secure)"
c=$(curl -sS --cacert "$TMP/cert.pem" -o /dev/null -w '%{http_code}' "$URL/api/info")
[ "$c" = 401 ] || fail "HTTPS without the token: $c, not 401"
c=$(curl -sS --cacert "$TMP/cert.pem" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -X POST \
	-H 'X-Ember-Request: 1' -H "Origin: http://127.0.0.1:$PORT" -d '{}' "$URL/api/settings")
[ "$c" = 403 ] || fail "over HTTPS, a POST from the http:// origin: $c, not 403"
kill "$SERVE_PID"
wait "$SERVE_PID"
echo garbage >"$TMP/bad.pem"
refuse 'certificate|PEM' --listen 127.0.0.1:1 --dir "$TMP/r3" --tls-cert "$TMP/bad.pem" --tls-key "$TMP/bad.pem"
refuse 'tls-key' --listen 127.0.0.1:1 --dir "$TMP/r3" --tls-cert "$TMP/cert.pem"
refuse 'cannot read' --listen 127.0.0.1:1 --dir "$TMP/r3" --tls-cert "$TMP/none.pem" --tls-key "$TMP/key.pem"

# ---- beyond loopback without TLS: a warning ----
LISTEN_HOST=0.0.0.0 start_server "$TMP/wide"
grep -q 'warning.*TLS\|warning.*in clear' "$SERVE_ERR" || fail "--listen 0.0.0.0 without TLS does not warn: $(cat "$SERVE_ERR")"
kill "$SERVE_PID"
echo "ok: serve security"
