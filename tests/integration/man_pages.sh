#!/usr/bin/env bash
# The man pages (man/) say what --help says: for ember and each of its
# commands, the options `ember [CMD] --help` prints (every -x and --long
# form of its option lines; -h/--help and --version too, which each page
# lists like any other option) are exactly those the page documents: the
# option forms in the tags (the line after .TP) of its OPTIONS section and
# of ember-agent.1's CONFIGURATION section, whose tags name each key's flag
# (`server.url, --server.url URL`). Placeholders are upper case (--KEY), so
# a long form there is lower case. Every command of `ember --help` has a
# page man/ember-CMD.1 and a line in ember.1's COMMANDS, and every page a
# command; groff formats each page without a warning (groff -man -ww -z).
# No BPF, no root. MAN_DIR (default man/) points the check at other pages,
# such as a copy with an option taken out, which must fail.
. "$(dirname "$0")/../lib.sh"
MAN_DIR=${MAN_DIR:-$ROOT/man}
[ -f "$MAN_DIR/ember.1" ] || fail "no $MAN_DIR/ember.1"

# help_options [CMD]: the option forms `ember [CMD] --help` prints, one a
# line: the first word of each line "  -x,--long TYPE ...", less CLI11's
# "{false}" of a negated flag.
help_options() {
	"$EMBER" "$@" --help >"$TMP/help" 2>&1 || fail "ember $* --help: exit $?"
	awk '/^  -/ { print $1 }' "$TMP/help" | sed 's/{[^}]*}//g' | tr ',' '\n' | grep . | sort -u
}

# page_tags FILE SECTION...: the tag lines of .TP items in these sections,
# comments skipped, roff escapes removed (fonts, \-, \&, \c, \(xx, quotes).
page_tags() {
	local file=$1
	shift
	awk -v sections="$*" '
		BEGIN { n = split(sections, s, " "); for (i = 1; i <= n; i++) want[s[i]] = 1 }
		/^\.\\"/ { next }
		/^\.SH/ { sec = $0; sub(/^\.SH[ \t]*/, "", sec); gsub(/"/, "", sec); in_sec = (sec in want); tag = 0; next }
		!in_sec { next }
		/^\.TP/ { tag = 1; next }
		tag { tag = 0; print }
	' "$file" | sed -E 's/^\.[A-Z]+[ \t]*//; s/\\f(\[[^]]*\]|\(..|.)//g; s/\\-/-/g; s/\\\(..//g; s/\\[&c]//g; s/"//g'
}

# page_options FILE: the option forms a page documents, one a line.
page_options() {
	page_tags "$1" OPTIONS CONFIGURATION | tr ' ,|[]=' '\n' |
		grep -E '^(-[A-Za-z0-9]|--[a-z0-9][a-z0-9._-]*)$' | sort -u
}

# compare WHAT FILE: the options of `ember WHAT --help` against FILE's.
errors=()
compare() {
	local what=$1 file=$2 o
	help_options $what >"$TMP/from_help"
	[ -s "$TMP/from_help" ] || fail "ember $what --help lists no option: $(cat "$TMP/help")"
	page_options "$file" >"$TMP/from_page"
	for o in $(comm -23 "$TMP/from_help" "$TMP/from_page"); do
		errors+=("${file#"$ROOT"/} lacks $o (in \`ember${what:+ $what} --help\`)")
	done
	for o in $(comm -13 "$TMP/from_help" "$TMP/from_page"); do
		errors+=("${file#"$ROOT"/} documents $o, which \`ember${what:+ $what} --help\` does not list")
	done
	echo "ember${what:+ $what}: $(wc -l <"$TMP/from_help") options, $(wc -l <"$TMP/from_page") in ${file##*/}"
}

# The commands: those of `ember --help` ("Subcommands:" up to a blank
# line), the pages there are, and the COMMANDS of ember.1.
"$EMBER" --help >"$TMP/top" 2>&1 || fail "ember --help: exit $?"
awk '/^Subcommands:/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }' "$TMP/top" | sort >"$TMP/commands"
[ -s "$TMP/commands" ] || fail "no Subcommands in ember --help: $(cat "$TMP/top")"
for f in "$MAN_DIR"/ember-*.1; do
	[ -e "$f" ] && basename "$f" .1 | sed 's/^ember-//'
done | sort >"$TMP/pages"
for c in $(comm -23 "$TMP/commands" "$TMP/pages"); do errors+=("no man page for ember $c: ${MAN_DIR#"$ROOT"/}/ember-$c.1"); done
for c in $(comm -13 "$TMP/commands" "$TMP/pages"); do errors+=("${MAN_DIR#"$ROOT"/}/ember-$c.1: ember has no command $c"); done
page_tags "$MAN_DIR/ember.1" COMMANDS | awk '{ print $1 }' | sort -u >"$TMP/listed"
for c in $(comm -23 "$TMP/commands" "$TMP/listed"); do errors+=("${MAN_DIR#"$ROOT"/}/ember.1 lacks command $c in COMMANDS"); done
for c in $(comm -13 "$TMP/commands" "$TMP/listed"); do errors+=("${MAN_DIR#"$ROOT"/}/ember.1 lists command $c, which ember --help does not"); done

compare "" "$MAN_DIR/ember.1"
while read -r c; do
	[ -f "$MAN_DIR/ember-$c.1" ] && compare "$c" "$MAN_DIR/ember-$c.1"
done <"$TMP/commands"

# groff's warnings (all of them: -ww), for each page.
if command -v groff >/dev/null; then
	for f in "$MAN_DIR"/ember.1 "$MAN_DIR"/ember-*.1; do
		[ -e "$f" ] || continue
		w=$(groff -man -ww -z "$f" 2>&1)
		[ -z "$w" ] || errors+=("groff warns about ${f#"$ROOT"/}: $w")
	done
	echo "groff: $(ls "$MAN_DIR"/*.1 | wc -l) pages checked"
else
	echo "no groff: the pages' formatting is not checked (Debian's man-db depends on groff-base)"
fi

((${#errors[@]} == 0)) || fail "$(printf '%s\n' "${errors[@]}")"
