#!/usr/bin/env bash
# Formats: a recording written as pprof loads in the real pprof tool (built
# from Debian's sources) with the same total and top functions as
# `ember report`, and its File: is the command's binary; folded -> pprof ->
# folded is lossless; convert and diff write pages; ember's HTML reads back
# as its folded stacks; what is not a profile is refused; --event chooses a
# pprof's sample type.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_pprof
command -v openssl >/dev/null || fail "no openssl: scripts/deps.sh test installs it"
"$EMBER" record -F 299 -o "$TMP/r.pb.gz" -- "$WORKLOADS/cpu_split" 2 2>"$TMP/err" || fail "record: $(cat "$TMP/err")"
"$EMBER" record -F 299 -o "$TMP/r2.folded" -- "$WORKLOADS/cpu_split" 1 2>"$TMP/err" || fail "record: $(cat "$TMP/err")"

"$EMBER" report -n 5 "$TMP/r.pb.gz" >"$TMP/report" || fail "ember report failed"
"$PPROF" -top -nodecount=5 -nodefraction=0 "$TMP/r.pb.gz" >"$TMP/top" 2>"$TMP/top.err" || fail "pprof -top: $(cat "$TMP/top.err")"
cat "$TMP/report" "$TMP/top"
# pprof's convention: the first mapping is the main binary, printed as File:.
assert_contains "$TMP/top" '^File: cpu_split$' "pprof's File: is not the command's binary: $(grep File: "$TMP/top")"
ember_total=$(awk 'NR == 1 { print $2 }' "$TMP/report")
pprof_total=$(grep -oE 'of [0-9]+ total' "$TMP/top" | awk '{ print $2 }')
[ "$ember_total" = "$pprof_total" ] || fail "totals differ: ember $ember_total, pprof $pprof_total"
# Top functions by self weight, and their totals, name by name. When the
# lists were cut (5 functions with self weight), which of the functions
# tied at the cut (the lowest self weight shown) each tool shows is its own
# choice: those are left out. Often work_unit alone has self weight.
awk 'NR > 2 && $1 > 0 { print $NF, $1, $3 }' "$TMP/report" | sort >"$TMP/ember.all"
awk '/flat%/ { on = 1; next } on && $1 > 0 { print $NF, $1, $4 }' "$TMP/top" | sort >"$TMP/pprof.all"
cut=0
(( $(wc -l <"$TMP/ember.all") < 5 && $(wc -l <"$TMP/pprof.all") < 5 )) ||
	cut=$(cat "$TMP/ember.all" "$TMP/pprof.all" | awk 'NR == 1 || $2 < min { min = $2 } END { print min + 0 }')
awk -v cut="$cut" '$2 > cut' "$TMP/ember.all" >"$TMP/ember.top"
awk -v cut="$cut" '$2 > cut' "$TMP/pprof.all" >"$TMP/pprof.top"
[ -s "$TMP/ember.top" ] || fail "no function above the cut's self weight in the report: $(cat "$TMP/ember.all")"
diff "$TMP/ember.top" "$TMP/pprof.top" >"$TMP/top.diff" || fail "top functions differ: $(cat "$TMP/top.diff")"
"$PPROF" -traces "$TMP/r.pb.gz" >"$TMP/traces" 2>/dev/null || fail "pprof -traces failed"
grep -q 'hot_a' "$TMP/traces" || fail "pprof -traces lacks hot_a"

"$EMBER" convert "$TMP/r2.folded" -o "$TMP/r2.pb.gz" || fail "convert folded -> pprof"
"$EMBER" convert "$TMP/r2.pb.gz" -o "$TMP/r2-back.folded" || fail "convert pprof -> folded"
diff <(sort "$TMP/r2.folded") <(sort "$TMP/r2-back.folded") >"$TMP/rt.diff" || fail "folded -> pprof -> folded changed: $(head "$TMP/rt.diff")"
"$EMBER" convert "$TMP/r.pb.gz" -o "$TMP/r.html" || fail "convert pprof -> html"
grep -q '</html>' "$TMP/r.html" || fail "incomplete html"
"$EMBER" diff "$TMP/r2.folded" "$TMP/r.pb.gz" -o "$TMP/d.html" || fail "ember diff failed"
grep -qE '"base":\{"total":[1-9][0-9]*,' "$TMP/d.html" || fail "diff page lacks the base profile"

# Bad input: a clear message, a non-zero exit, no crash.
printf 'a;b 3\nno_count\na;;b 2\n' >"$TMP/bad.folded"
"$EMBER" report "$TMP/bad.folded" >/dev/null 2>"$TMP/err" || fail "report refused a partly bad file"
grep -q 'line 2: no count' "$TMP/err" || fail "no warning for line 2: $(cat "$TMP/err")"
grep -q 'line 3: empty frame' "$TMP/err" || fail "no warning for line 3: $(cat "$TMP/err")"
head -c 100 "$TMP/r.pb.gz" >"$TMP/cut.pb.gz"
"$EMBER" report "$TMP/cut.pb.gz" >/dev/null 2>"$TMP/err" && fail "a truncated pprof was accepted"
grep -q 'truncated' "$TMP/err" || fail "truncated pprof: $(cat "$TMP/err")"
"$EMBER" report "$TMP/nonexistent" 2>"$TMP/err" && fail "a missing file was accepted"
grep -q 'No such file' "$TMP/err" || fail "missing file: $(cat "$TMP/err")"
"$EMBER" report "$TMP" 2>"$TMP/err" && fail "a directory was reported"
assert_contains "$TMP/err" "^ember: $TMP is a directory: ember reads folded stacks" "report of a directory: $(cat "$TMP/err")"
mkdir "$TMP/empty"
"$EMBER" convert "$TMP/empty" -o "$TMP/x.html" 2>"$TMP/err" && fail "an empty directory was converted"
assert_contains "$TMP/err" "holds no period of an ember agent's spool: give a spool's directory" "convert of a directory: $(cat "$TMP/err")"

# ember's HTML reads back: record -> html -> report, convert and diff give
# what the same recording gives as folded stacks.
"$EMBER" record -F 299 -o "$TMP/h.html" -- "$WORKLOADS/cpu_split" 1 2>"$TMP/err" || fail "record html: $(cat "$TMP/err")"
"$EMBER" convert "$TMP/h.html" -o "$TMP/h.folded" 2>"$TMP/err" || fail "convert html -> folded: $(cat "$TMP/err")"
assert_contains "$TMP/err" "^ember: wrote $TMP/h.folded \([0-9]+ stacks\)$" "convert did not say what it wrote"
"$EMBER" convert "$TMP/h.html" -o "$TMP/h.pb.gz" 2>"$TMP/err" || fail "convert html -> pprof: $(cat "$TMP/err")"
"$EMBER" convert "$TMP/h.pb.gz" -o "$TMP/h-pprof.folded" 2>/dev/null || fail "convert pprof -> folded"
diff <(sort "$TMP/h.folded") <(sort "$TMP/h-pprof.folded") >"$TMP/rt.diff" || fail "html -> pprof -> folded changed: $(head "$TMP/rt.diff")"
samples=$(grep -oE '"samples":"[0-9]+"' "$TMP/h.html" | grep -oE '[0-9]+')
[ "$(total "$TMP/h.folded")" = "$samples" ] || fail "html -> folded: $(total "$TMP/h.folded") samples, the recording had $samples"
"$EMBER" report "$TMP/h.html" >"$TMP/h.report" 2>"$TMP/err" || fail "report html: $(cat "$TMP/err")"
# The folded stacks' report too: their first frame is read as the process,
# not counted as one more function.
"$EMBER" report "$TMP/h.folded" >"$TMP/f.report" 2>"$TMP/err" || fail "report folded: $(cat "$TMP/err")"
diff "$TMP/h.report" "$TMP/f.report" >&2 || fail "report of the html differs from the report of its folded stacks"
"$EMBER" report "$TMP/h.pb.gz" >"$TMP/p.report" 2>"$TMP/err" || fail "report pprof: $(cat "$TMP/err")"
diff "$TMP/h.report" "$TMP/p.report" >&2 || fail "report of the html differs from the report of its pprof"
head -1 "$TMP/h.report" | grep -q "^cpu-clock: $samples samples" || fail "report of the html: $(head -1 "$TMP/h.report")"
"$PPROF" -top "$TMP/h.pb.gz" 2>/dev/null | grep -q "of $samples total" || fail "pprof of the html's pprof: not $samples total"
"$EMBER" diff "$TMP/h.html" "$TMP/h.folded" -o "$TMP/hd.html" 2>"$TMP/err" || fail "diff html folded: $(cat "$TMP/err")"
"$EMBER" report "$TMP/hd.html" 2>"$TMP/err" | head -1 | grep -q "^cpu-clock: $samples samples" || fail "report of a diff page: $(cat "$TMP/err")"
assert_contains "$TMP/err" 'a differential flamegraph: reading its NEW profile' "no note on the diff page"
echo "html read back: $samples samples, as its folded"

# What is not a profile: a non-zero exit, the reason, no output file.
# Random bytes, the same every run (AES-CTR of zeros): 12 NUL bytes among them.
head -c 4096 /dev/zero | openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f \
	-iv 00000000000000000000000000000000 >"$TMP/random" 2>/dev/null || fail "openssl enc failed"
: >"$TMP/empty.folded"
printf '<!DOCTYPE html>\n<html><head><title>x</title></head><body>not a profile</body></html>\n' >"$TMP/foreign.html"
printf '\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10' >"$TMP/image.png"
printf 'just text\nno counts\n' >"$TMP/words.txt"
for bad in random empty.folded foreign.html image.png cut.pb.gz words.txt; do
	for cmd in report convert diff; do
		rm -f "$TMP/out.folded" "$TMP/out.html"
		case $cmd in
		report) "$EMBER" report "$TMP/$bad" >"$TMP/out" 2>"$TMP/err" ;;
		convert) "$EMBER" convert "$TMP/$bad" -o "$TMP/out.folded" >"$TMP/out" 2>"$TMP/err" ;;
		diff) "$EMBER" diff "$TMP/h.folded" "$TMP/$bad" -o "$TMP/out.html" >"$TMP/out" 2>"$TMP/err" ;;
		esac
		rc=$?
		((rc != 0)) || fail "$cmd $bad: exit 0: $(cat "$TMP/err")"
		assert_contains "$TMP/err" "^ember: .*$bad.*(binary data|is empty|not an ember flamegraph|truncated|no line is folded stacks)" \
			"$cmd $bad: no reason: $(cat "$TMP/err")"
		[ ! -e "$TMP/out.folded" ] && [ ! -e "$TMP/out.html" ] || fail "$cmd $bad: wrote an output file"
	done
	echo "refused $bad: $(grep -v warning "$TMP/err")"
done

# A pprof with a sample type per event: the default is said, --event chooses.
"$EMBER" record -F 299 -e cpu-clock,offcpu -o "$TMP/m.pb.gz" -- "$WORKLOADS/cpu_split" 1 2>"$TMP/err" || fail "record two events: $(cat "$TMP/err")"
"$EMBER" report "$TMP/m.pb.gz" >"$TMP/out" 2>"$TMP/err" || fail "report of two events: $(cat "$TMP/err")"
assert_contains "$TMP/err" "holds the sample types cpu-clock, cpu, offcpu: reading cpu-clock" "no note of the types: $(cat "$TMP/err")"
"$EMBER" report -e cpu "$TMP/m.pb.gz" >"$TMP/out" 2>"$TMP/err" || fail "report -e cpu: $(cat "$TMP/err")"
assert_contains "$TMP/out" '^cpu: [0-9]+ ns' "report -e cpu: $(head -1 "$TMP/out")"
"$EMBER" report -e wall "$TMP/m.pb.gz" >/dev/null 2>"$TMP/err" && fail "report -e wall of a file without it: exit 0"
assert_contains "$TMP/err" "no sample type 'wall' in it; it holds cpu-clock, cpu, offcpu" "report -e wall: $(cat "$TMP/err")"
"$EMBER" convert -e cpu "$TMP/m.pb.gz" -o "$TMP/m-cpu.folded" 2>/dev/null || fail "convert -e cpu"
[ "$(total "$TMP/m-cpu.folded")" -gt "$(total "$TMP/h.folded")" ] || fail "convert -e cpu: not nanoseconds"
echo "pprof with two events: --event chooses"

echo "pprof agrees with ember report (total $ember_total)"
