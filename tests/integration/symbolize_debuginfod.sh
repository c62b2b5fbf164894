#!/usr/bin/env bash
# debuginfod as a source of debug info: a stripped binary whose debug file
# only a (local) debuginfod server has is named fully, static functions and
# inlined calls included; a second run, with the server gone, is served
# from the client's cache (DEBUGINFOD_CACHE_PATH).
. "$(dirname "$0")/../lib.sh"
for tool in g++ objcopy strip readelf nm node; do
	command -v "$tool" >/dev/null || skip "no $tool"
done
g++ -O2 -g -rdynamic "$ROOT/tests/fuzz/seeds/elf_seed.cpp" -o "$TMP/prog" || fail "g++ failed"
helper=$(nm "$TMP/prog" | awk '$3 == "_ZL12local_helperi" { print "0x" $1; exit }')
[ -n "$helper" ] || fail "nm lacks local_helper"
objcopy --only-keep-debug "$TMP/prog" "$TMP/prog.debug" || fail "objcopy failed"
strip --strip-all -o "$TMP/prog-stripped" "$TMP/prog" || fail "strip failed"
id=$(readelf -n "$TMP/prog-stripped" | awk '/Build ID/ { print $3 }')
[ -n "$id" ] || fail "the stripped binary has no build-id"

# The server answers /buildid/ID/debuginfo, and counts what it served.
background node -e '
	const http = require("http"), fs = require("fs");
	const [id, file] = process.argv.slice(1);
	let served = 0;
	http.createServer((req, res) => {
		if (req.url === `/buildid/${id}/debuginfo`) {
			served++;
			console.log("served " + served);
			res.writeHead(200, { "Content-Type": "application/octet-stream" });
			res.end(fs.readFileSync(file));
		} else {
			res.writeHead(404);
			res.end();
		}
	}).listen(0, "127.0.0.1", function () { console.log(this.address().port); });
' "$id" "$TMP/prog.debug" >"$TMP/server"
server=${BACKGROUND[-1]}
for _ in $(seq 50); do [ -s "$TMP/server" ] && break; sleep 0.1; done
port=$(head -1 "$TMP/server")
[[ $port =~ ^[0-9]+$ ]] || fail "the server did not start: $(cat "$TMP/server")"

symbolize() {
	DEBUGINFOD_URLS=http://127.0.0.1:$port DEBUGINFOD_CACHE_PATH=$TMP/cache timeout 60 \
		"$EMBER" symbolize --elf "$TMP/prog-stripped" "$helper" >"$TMP/out" 2>"$TMP/err" || fail "ember exited $?"
}
# Without debuginfod the static function has no name in a stripped binary.
"$EMBER" symbolize --elf "$TMP/prog-stripped" "$helper" >"$TMP/plain" 2>/dev/null
assert_contains "$TMP/plain" $'\t\\?\\? prog-stripped\\+' "the stripped binary names local_helper by itself"

symbolize
cat "$TMP/out"
assert_contains "$TMP/out" $'\tlocal_helper\\(int\\)$' "not named from the debug file debuginfod served: $(cat "$TMP/out" "$TMP/err")"
grep -q '^served 1$' "$TMP/server" || fail "the server served nothing: $(cat "$TMP/server")"

kill "$server"
wait "$server" 2>/dev/null
symbolize
assert_contains "$TMP/out" $'\tlocal_helper\\(int\\)$' "the second run, server gone, did not use the cache: $(cat "$TMP/out" "$TMP/err")"
