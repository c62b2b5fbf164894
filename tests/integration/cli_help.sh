#!/usr/bin/env bash
# --help names what the commands accept: every event `ember record -e`
# takes (the list its "unknown event" error gives) and no other, and every
# output extension, each of which convert then writes in its format.
. "$(dirname "$0")/../lib.sh"

"$EMBER" record --help >"$TMP/help" 2>&1 || fail "record --help: exit $?"
# The -e text: "...: NAME: what; NAME: what; ..." on the line after -e.
events_help=$(awk '/^ *-e,--event/ { getline; print; exit }' "$TMP/help")
[ -n "$events_help" ] || fail "no -e in record --help: $(cat "$TMP/help")"
help_events=$(sed 's/^.*comma-separated): //' <<<"$events_help" | tr ';' '\n' | sed -E 's/^ *([a-z-]+):.*/\1/' | sort)
"$EMBER" record -e no-such-event -d 0.1 -o "$TMP/x.folded" >/dev/null 2>"$TMP/err" && fail "-e no-such-event accepted"
assert_contains "$TMP/err" "unknown event 'no-such-event'" "no unknown-event error: $(cat "$TMP/err")"
accepted=$(sed 's/.*give one of //' "$TMP/err" | tr ',' '\n' | sed -E 's/ or /\n/; s/\([^)]*\)//g' | tr -d ' ' | grep . | sort)
echo "accepted: $(echo $accepted)"
echo "in --help: $(echo $help_events)"
[ "$help_events" = "$accepted" ] || fail "record --help's events differ from those accepted: $(diff <(echo "$help_events") <(echo "$accepted"))"

# Output extensions: every one of them in record's and convert's help, and
# each one named there writes its format.
printf 'main;work 3\nmain;idle 1\n' >"$TMP/in.folded"
"$EMBER" convert --help >"$TMP/convert.help" 2>&1 || fail "convert --help: exit $?"
for ext in .html .folded .txt .collapsed .pb.gz .pprof .otlp; do
	for h in help convert.help; do
		grep -A1 -E '^ *-o,--output' "$TMP/$h" | grep -qE -- "\\$ext( |,|\\)|$)" || fail "$h: -o does not name $ext"
	done
done
grep -A1 -E '^ *-o,--output' "$TMP/help" | grep -oE '\.[a-z]+(\.gz)?' | sort -u >"$TMP/exts"
while read -r ext; do
	out=$TMP/out$ext
	"$EMBER" convert "$TMP/in.folded" -o "$out" 2>"$TMP/err" || fail "record --help names $ext, convert refuses it: $(cat "$TMP/err")"
	case $ext in
	.html) assert_contains "$out" '<html' "$ext is not HTML" ;;
	.pb.gz | .pprof) [ "$(head -c 2 "$out" | od -An -tx1 | tr -d ' ')" = 1f8b ] || fail "$ext is not gzipped pprof" ;;
	.otlp) "$EMBER" convert "$out" -o "$TMP/back.folded" 2>/dev/null && diff -q "$TMP/in.folded" <(sort -r "$TMP/back.folded") >/dev/null ||
		fail "$ext does not read back as the folded stacks it was made of" ;;
	*) diff -q "$TMP/in.folded" <(sort -r "$out") >/dev/null || fail "$ext is not folded: $(cat "$out")" ;;
	esac
	echo "-o x$ext: written"
done <"$TMP/exts"
