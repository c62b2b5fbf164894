#!/usr/bin/env bash
# `ember jvm PID --leaks` on a JVM started with default flags
# (tests/java/LeakHunt.java): a 16 KiB buffer kept in a static map every
# 20 ms, among requests a hundred times as busy, each held in flight for
# half a second.
#   - plain `record -e alloc --live` (its final GC) shows the requests in
#     flight first: they outweigh the leak;
#   - `--leaks -d 16 --min-age 5s`: the first suspect is the leak, all of
#     its sampled objects held through the static field, the map's table
#     retaining what the JVM says it leaked; the requests are no suspect
#     (too young, or garbage no GC root reaches); the page holds only what
#     is held; the JVM runs on with nothing of ember's left in its heap;
#   - the same hunt on JDK 21 or later, where one is installed;
#   - errors: not a JVM, --min-age not shorter than -d, -d alone.
. "$(dirname "$0")/../lib.sh"
[ -x "$EMBER" ] || fail "no $EMBER: make build/ember"
command -v jcmd >/dev/null || skip "no jcmd: scripts/deps.sh installs openjdk-17-jdk-headless"
java_classes "$TMP/classes"
# A map entry: byte[16384] (16 + 16384 bytes), its HashMap$Node (32) and
# Long key (16), with compressed oops.
entry=16448

# hunt JAVA LABEL [plain]: LeakHunt on JAVA (its pid in $jvm), with plain
# --live recorded first if asked, then --leaks, whose report is checked
# ($TMP/LABEL.report, the page $TMP/LABEL.html). The leak stops once the
# heap is being dumped, so that the map the dump holds is about what the
# JVM counts (a few entries may come between the dump and the JVM's look
# at STOP, every 20 ms).
hunt() {
	local java=$1 label=$2 plain=${3:-} leaks leaked retained requests leak first suspects
	rm -f "$TMP/go" "$TMP/stop"
	"$java" -cp "$TMP/classes" LeakHunt "$TMP/go" "$TMP/stop" >"$TMP/$label.out" 2>&1 &
	jvm=$!
	BACKGROUND+=($jvm)
	if [[ $plain ]]; then
		# Plain --live while it leaks: the requests in flight come first.
		"$EMBER" record -p "$jvm" -e alloc --live --alloc-interval 65536 -d 5 -o "$TMP/plain.folded" \
			--progress-fd 3 3>"$TMP/plain.progress" 2>"$TMP/plain.err" &
		local rec=$!
		wait_sampling "$rec" "$TMP/plain.progress"
		touch "$TMP/go"
		wait "$rec" || fail "plain --live: ember exited $?: $(cat "$TMP/plain.err")"
		requests=$(weight "$TMP/plain.folded" ';LeakHunt\.handle_\[[ji0]\];byte\[\] [0-9]+$')
		leak=$(weight "$TMP/plain.folded" ';LeakHunt\.remember_\[[ji0]\];byte\[\] [0-9]+$')
		echo "plain --live: requests $requests bytes, leak $leak bytes"
		((requests > 3 * leak)) || fail "plain --live: the requests in flight ($requests bytes) do not outweigh the leak ($leak) 3:1"
	else
		touch "$TMP/go"
	fi
	"$EMBER" jvm "$jvm" --leaks -d 16 --min-age 5s --alloc-interval 65536 -o "$TMP/$label.html" \
		>"$TMP/$label.report" 2>"$TMP/err" &
	leaks=$!
	for _ in $(seq 600); do grep -q 'dumping the heap' "$TMP/err" && break; sleep 0.1; done
	touch "$TMP/stop"
	wait "$leaks" || fail "$label: --leaks: exit $?: $(cat "$TMP/err" "$TMP/$label.report")"
	for _ in $(seq 100); do grep -q '^stopped leaked' "$TMP/$label.out" && break; sleep 0.1; done
	read -r _ _ leaked <<<"$(grep '^stopped leaked' "$TMP/$label.out")"
	[[ $leaked =~ ^[0-9]+$ ]] || fail "$label: LeakHunt did not say what it leaked: $(cat "$TMP/$label.out")"
	sed 's/^/  /' "$TMP/$label.report"
	assert_contains "$TMP/err" "^ember: following the allocations of JVM $jvm \(LeakHunt\) for 16 s"
	assert_contains "$TMP/$label.report" "^JVM $jvm \(LeakHunt\): 1[6-9][.][0-9] s of allocations followed \(a sample every 65536 bytes\); the dump paused the JVM for [0-9.]+ s$"
	assert_contains "$TMP/$label.report" "^Leak suspects: "
	first=$(awk '/^1\. /{ print; exit }' "$TMP/$label.report")
	[[ $first == "1. byte[] ← LeakHunt.remember ← LeakHunt.main" ]] || fail "$label: the first suspect is not the leak: $first"
	# Its block: up to the next numbered site or section.
	awk '/^1\. /{ on = 1; next } on && (/^[0-9]+\. / || /^[A-Z]/) { exit } on' "$TMP/$label.report" >"$TMP/first"
	assert_contains "$TMP/first" "^   100\.0% through: static LeakHunt\.SESSIONS → java\.util\.HashMap\.table → java\.util\.HashMap\\\$Node\[\] \[\] → java\.util\.HashMap\\\$Node\.value → byte\[\]$"
	retained=$(sed -nE 's/^ +all through one java\.util\.HashMap\$Node\[\], which retains ([0-9.]+) MiB$/\1/p' "$TMP/first")
	[[ $retained ]] || fail "$label: no holder with its retained bytes: $(cat "$TMP/first")"
	echo "$label: the map's table retains $retained MiB; the JVM leaked $leaked entries ($(awk -v n="$leaked" -v e=$entry 'BEGIN { printf "%.1f", n * e / 1048576 }') MiB)"
	awk -v r="$retained" -v n="$leaked" -v e=$entry 'BEGIN { m = r * 1048576; exit !(m >= (n - 25) * e * 0.995 && m <= n * e * 1.01 + 65536) }' ||
		fail "$label: the table retains $retained MiB, the JVM leaked $leaked entries of $entry bytes"
	suspects=$(sed -n '/^Leak suspects/,/^Not leaks/p' "$TMP/$label.report")
	[[ $suspects != *LeakHunt.handle* ]] || fail "$label: the requests in flight are a suspect: $suspects"
}

hunt java default plain

# The page: what is held, allocated 5 s or more before the end.
"$EMBER" convert "$TMP/default.html" -o "$TMP/leaks.folded" 2>"$TMP/convert.err" || fail "convert: $(cat "$TMP/convert.err")"
held=$(weight "$TMP/leaks.folded" ';LeakHunt\.remember_\[[ji0]\];byte\[\] [0-9]+$')
held_requests=$(weight "$TMP/leaks.folded" ';LeakHunt\.handle_\[[ji0]\];byte\[\] [0-9]+$')
echo "page: leak $held bytes, requests $held_requests"
((held > 0 && held_requests == 0)) || fail "the page holds leak $held bytes, requests $held_requests"
# Its Leaks panel says how the heap holds the suspect, as a person reads it.
if [ -x /usr/bin/chromium ] && [ -d "$ROOT/tests/browser/node_modules/playwright-core" ]; then
	mkdir -p "$ROOT/build/screenshots"
	node "$ROOT/tests/browser/leaks.test.mjs" "$TMP/default.html" LeakHunt.remember --site 'byte[]' \
		--held 'through: static LeakHunt.SESSIONS → java.util.HashMap.table' \
		--screenshot "$ROOT/build/screenshots/jvm_leaks.png" || fail "browser checks failed"
else
	echo "the page's panel not read in a browser: no chromium or playwright-core (scripts/deps.sh test installs them)"
	assert_contains "$TMP/default.html" '"held":\["100\.0% through: static LeakHunt\.SESSIONS'
fi

# The JVM runs on; ember's agent holds nothing of its heap any more.
kill -0 "$jvm" || fail "the JVM died"
jcmd "$jvm" GC.heap_dump "$TMP/after.hprof" >/dev/null || fail "jcmd GC.heap_dump failed"
! grep -qa 'ember-pin' "$TMP/after.hprof" || fail "the agent's pin array is still in the JVM's heap"
rm -f "$TMP/after.hprof"

# The same hunt on JDK 21 or later (Temurin 25 on these machines), if one
# is installed: its dumper and its agent interface differ.
newer=$(ls -d /usr/lib/jvm/*-2[1-9]-* /usr/lib/jvm/*-2[1-9] 2>/dev/null | head -1)
if [ -n "$newer" ] && [ -x "$newer/bin/java" ]; then
	kill "$jvm"
	hunt "$newer/bin/java" newer
else
	echo "JDK 21+ part skipped: none under /usr/lib/jvm"
fi

# Errors.
sleep 60 &
other=$!
BACKGROUND+=($other)
"$EMBER" jvm "$other" --leaks -d 2 >/dev/null 2>"$TMP/err" && fail "--leaks on a process that is no JVM succeeded"
assert_contains "$TMP/err" "not a HotSpot JVM|is not a JVM|maps no libjvm"
"$EMBER" jvm "$jvm" --leaks -d 4 --min-age 5s >/dev/null 2>"$TMP/err" && fail "--min-age 5s -d 4 succeeded"
assert_contains "$TMP/err" "^ember: --min-age must be shorter than the 4 s followed \(-d\)"
"$EMBER" jvm "$jvm" -d 4 >/dev/null 2>"$TMP/err"
(($? == 2)) || fail "-d without --track or --leaks: exit not 2"
assert_contains "$TMP/err" "goes with --track or --leaks"
echo "ok"
