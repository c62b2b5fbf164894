#!/usr/bin/env bash
# Formats: a recording written as pprof loads in the real pprof tool (built
# from Debian's sources) with the same total and top functions as
# `ember report`; folded -> pprof -> folded is lossless; convert and diff
# write pages.
. "$(dirname "$0")/../lib.sh"
need_bpf
PPROF=$ROOT/build/pprof
[ -x "$PPROF" ] || fail "no build/pprof (make test builds it from golang-github-google-pprof-dev)"
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
# Top functions by self weight (the order of ties differs: compare those
# with a self weight), and their totals, name by name.
awk 'NR > 2 && $1 > 0 { print $NF, $1, $3 }' "$TMP/report" | sort >"$TMP/ember.top"
awk '/flat%/ { on = 1; next } on && $1 > 0 { print $NF, $1, $4 }' "$TMP/top" | sort >"$TMP/pprof.top"
[ -s "$TMP/ember.top" ] || fail "no function with self samples in the report"
diff "$TMP/ember.top" "$TMP/pprof.top" >"$TMP/top.diff" || fail "top functions differ: $(cat "$TMP/top.diff")"
"$PPROF" -traces "$TMP/r.pb.gz" >"$TMP/traces" 2>/dev/null || fail "pprof -traces failed"
grep -q 'hot_a' "$TMP/traces" || fail "pprof -traces lacks hot_a"

"$EMBER" convert "$TMP/r2.folded" -o "$TMP/r2.pb.gz" || fail "convert folded -> pprof"
"$EMBER" convert "$TMP/r2.pb.gz" -o "$TMP/r2-back.folded" || fail "convert pprof -> folded"
diff <(sort "$TMP/r2.folded") <(sort "$TMP/r2-back.folded") >"$TMP/rt.diff" || fail "folded -> pprof -> folded changed: $(head "$TMP/rt.diff")"
"$EMBER" convert "$TMP/r.pb.gz" -o "$TMP/r.html" || fail "convert pprof -> html"
grep -q '</html>' "$TMP/r.html" || fail "incomplete html"
"$EMBER" diff "$TMP/r2.folded" "$TMP/r.pb.gz" -o "$TMP/d.html" || fail "ember diff failed"
grep -q '"base":{"stacks":\[' "$TMP/d.html" || fail "diff page lacks the base profile"

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
echo "pprof agrees with ember report (total $ember_total)"
