#!/usr/bin/env bash
# `ember jvm PID --track REGEX`: a JVM growing a list of LeakyThing (32
# bytes each) at 20,000 a second (tests/java/Leaky.java). The CSV: a row
# per histogram, instances never fewer, growing at a quarter of the
# workload's rate to all of it, bytes 32 per instance; the page,
# worked in Chromium (tests/browser/track.test.mjs): its table, tooltips,
# bytes, hiding a class. Ctrl-C and the JVM's exit end a tracking with its
# file written; a bad regex and an unknown extension are refused.
. "$(dirname "$0")/../lib.sh"
[ -x "$EMBER" ] || fail "no $EMBER: make build/ember"
java_classes "$TMP/classes"
java -cp "$TMP/classes" Leaky 20000 60 >/dev/null &
jvm=$!
BACKGROUND+=($jvm)
sleep 1

"$EMBER" jvm "$jvm" --track 'LeakyThing$' --every 0.5 -d 3 -o "$TMP/track.csv" >"$TMP/out" 2>"$TMP/err" ||
	fail "--track: exit $?: $(cat "$TMP/err")"
sed 's/^/  /' "$TMP/out"
assert_contains "$TMP/err" "^ember: tracking the classes of JVM $jvm \(Leaky\) matching /LeakyThing\\$/: a histogram every 0.5 s"
assert_contains "$TMP/err" "^ember: wrote $TMP/track.csv \([0-9]+ histograms, 1 classes\)$"
[ "$(head -1 "$TMP/track.csv")" = "seconds,class,instances,bytes" ] || fail "no CSV header"
rows=$(($(wc -l <"$TMP/track.csv") - 1))
# At 0, 0.5, ... 3 s: the duration's end is the last (by the schedule, so
# load cannot add or take one).
(( rows == 7 )) || fail "$rows histograms in 3 s at 0.5 s, not 7"
last=$(tail -1 "$TMP/track.csv" | cut -d, -f1)
awk -v t="$last" 'BEGIN { exit !(t >= 3 && t < 4) }' || fail "the last histogram at $last s, not at the end (3 s)"
awk -F, 'NR > 1 {
	if ($2 != "Leaky$LeakyThing") { print "class " $2; exit 1 }
	if ($4 != 32 * $3) { print "bytes " $4 " for " $3 " instances"; exit 1 }
	if ($3 < last) { print "fewer instances: " $3 " after " last; exit 1 }
	last = $3 }' "$TMP/track.csv" || fail "a CSV row is wrong"
rate=$(awk -F, 'NR == 2 { t0 = $1; n0 = $3 } NR > 1 { t = $1; n = $3 } END { printf "%.0f", (n - n0) / (t - t0) }' "$TMP/track.csv")
# At most what the workload adds; at least a quarter of it: a starved
# machine stalls the JVM itself (CI, beside the kernel matrix's guests:
# nothing added for 1 s of the 3). The counts themselves are exact (bytes).
(( rate >= 5000 && rate <= 25000 )) || fail "LeakyThing grew by $rate a second, the workload adds 20000"
echo "csv: $rows histograms, LeakyThing +$rate a second (the workload adds 20,000), 32 bytes each"

"$EMBER" jvm "$jvm" --track 'Leaky|HashMap' --every 0.3 -d 2 -o "$TMP/track.html" >/dev/null 2>"$TMP/err" ||
	fail "--track to html: $(cat "$TMP/err")"
if [ -x /usr/bin/chromium ] && [ -d "$ROOT/tests/browser/node_modules/playwright-core" ]; then
	mkdir -p "$ROOT/build/screenshots"
	node "$ROOT/tests/browser/track.test.mjs" "$TMP/track.html" 'Leaky$LeakyThing' \
		--screenshot "$ROOT/build/screenshots/track.png" || fail "the tracker's page"
else
	echo "page part skipped: no chromium or playwright-core (scripts/deps.sh test installs them)"
fi

# Ctrl-C ends it, with the file written.
"$EMBER" jvm "$jvm" --track 'LeakyThing' --every 0.3 -o "$TMP/int.csv" >/dev/null 2>"$TMP/err" &
tracker=$!
sleep 1.5
kill -INT "$tracker"
wait "$tracker" || fail "Ctrl-C: exit $?: $(cat "$TMP/err")"
(( $(wc -l <"$TMP/int.csv") >= 3 )) || fail "Ctrl-C: $(wc -l <"$TMP/int.csv") lines written"
# The JVM's exit ends it too.
java -cp "$TMP/classes" Leaky 1000 2 >/dev/null &
brief=$!
BACKGROUND+=($brief)
sleep 0.5
"$EMBER" jvm "$brief" --track 'LeakyThing' --every 0.3 -o "$TMP/brief.csv" >/dev/null 2>"$TMP/err" ||
	fail "a JVM that exits: exit $?: $(cat "$TMP/err")"
assert_contains "$TMP/err" "^ember: JVM $brief \(Leaky\) exited$"
(( $(wc -l <"$TMP/brief.csv") >= 2 )) || fail "the exited JVM's histograms were not written"
echo "ends: Ctrl-C ($(($(wc -l <"$TMP/int.csv") - 1)) histograms written), the JVM's exit ($(($(wc -l <"$TMP/brief.csv") - 1)))"

"$EMBER" jvm "$jvm" --track '(' -d 1 2>"$TMP/err" && fail "a bad regex taken"
assert_contains "$TMP/err" "^ember: --track '\(': not a regular expression"
"$EMBER" jvm "$jvm" --track 'x' -d 1 -o "$TMP/x.txt" 2>"$TMP/err" && fail ".txt taken"
assert_contains "$TMP/err" "^ember: --track writes .html \(a chart\) or .csv, not "
echo "errors: a bad regex, an unknown extension"
