#!/usr/bin/env bash
# The unwinder's state stays flat through a stream of short-lived processes
# (issue 14: a session that runs for weeks). 4,000 real processes (cat, 8
# alive at once), each snapshot, given to the unwinder and removed once it
# exited: the rows and tables in use, the kernel's process entries, printed
# every 200, never grow. Then 2,000 processes each of a binary of its own,
# through a row space that holds about 130 such tables: idle tables are
# evicted for new ones, every binary still gets its table.
. "$(dirname "$0")/../lib.sh"
need_bpf
CHURN=$ROOT/build/tools/unwind_churn
[ -x "$CHURN" ] || fail "no $CHURN: make build/tools/unwind_churn"

"$CHURN" 4000 200 >"$TMP/same" 2>&1 || fail "unwind_churn exited $?: $(tail -3 "$TMP/same")"
cat "$TMP/same"
# field VALUE after NAME on the lines "processes N: NAME VALUE ..."
awk '/^processes/ {
	for (i = 3; i < NF; i += 2) v[$i] = $(i + 1)
	if (v["entries"] > 8 || v["held"] > 8) { print "more than the 8 live processes held: " $0; bad = 1 }
	if (v["over_cap"] || v["left_out"]) { print "a table or a process left out: " $0; bad = 1 }
	if (n++ && (v["rows"] != rows || v["tables"] != tables)) { print "rows or tables changed: " $0; bad = 1 }
	rows = v["rows"]; tables = v["tables"]
}
/^end:/ { if ($11 != 0 || $13 != 0 || $15 != 0) { print "left behind: " $0; bad = 1 } }
END { exit bad || n != 20 }' "$TMP/same" || fail "state not flat through 4,000 processes (above)"

TMPDIR=$TMP "$CHURN" 2000 200 --distinct --rows 100000 >"$TMP/distinct" 2>&1 ||
	fail "unwind_churn --distinct exited $?: $(tail -3 "$TMP/distinct")"
cat "$TMP/distinct"
awk '/^processes/ {
	for (i = 3; i < NF; i += 2) v[$i] = $(i + 1)
	if (v["entries"] > 8 || v["held"] > 8) { print "more than the 8 live processes held: " $0; bad = 1 }
	if (v["over_cap"]) { print "a binary without its table: " $0; bad = 1 }
	if (v["rows"] > 100000 || v["tables"] - v["idle"] > 8 + 3) { print "rows or tables past their bound: " $0; bad = 1 }
	evicted = v["evicted"]; n++
}
END { if (evicted < 1800) { print "only " evicted " tables evicted"; bad = 1 }; exit bad || n != 10 }' "$TMP/distinct" ||
	fail "a stream of binaries was not held within the row space (above)"
