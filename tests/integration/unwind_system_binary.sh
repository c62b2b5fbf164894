#!/usr/bin/env bash
# kind: structural
# A distribution's binary without frame pointers (issue 13): Debian's
# sqlite3 (and its libsqlite3) runs a CPU-bound query, recorded at once by
# ember and by perf --call-graph dwarf (elfutils/libunwind, independent of
# ember). ember's mean user stack depth must be within 10% of perf's, and
# its top-5 functions by inclusive time perf's. Before CFI unwinding ember's
# stacks averaged 2.6 frames on sqlite3 against perf's 13.6 (the issue).
# EMBER_UNWIND=cfi (or fp, auto) adds --unwind to ember's recording.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/unwind_lib.sh"
need_bpf
need_perf
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed (scripts/deps.sh test installs it)"

# A recursive CTE of random blobs turned to hex: 3-5 s of CPU in one thread,
# stacks of ~12 frames, and one clear fifth function by inclusive time
# (sqlite3_randomness, ~45%, the sixth below 10%) after the four every
# sample has. In an emulated guest (the kernel matrix) a fifth of the rows:
# the same share of each function, in a fifth of its minutes there.
rows=1000000
[[ ${EMBER_EMULATED:-} ]] && rows=200000
query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT $rows)
	SELECT sum(length(hex(randomblob(1000)))) FROM c;"
# sqlite3 reads its SQL from a pipe that gets it once ember and perf sample.
mkfifo "$TMP/sql" "$TMP/ctl" "$TMP/ack"
exec {sql}<>"$TMP/sql" {ctl}<>"$TMP/ctl" {ack}<>"$TMP/ack"
sqlite3 :memory: <&$sql >"$TMP/sqlite.out" 2>&1 &
db=$!
BACKGROUND+=($db)
"$EMBER" record "${UNWIND_OPTS[@]}" -F 999 --no-java -p $db -o "$TMP/ember.folded" 2>"$TMP/ember.err" --progress-fd 3 3>"$TMP/progress" &
ember=$!
BACKGROUND+=($ember)
wait_sampling $ember "$TMP/progress"
# 16 KB of stack per sample: with perf's default 8 KB, every stack stopped
# in the shell's frames (its input buffers are on the stack), short of
# __libc_start_main. perf's samples that still stop short are left out.
"${PERF_RECORD[@]}" --call-graph dwarf,16384 -p $db -D -1 --control "fifo:$TMP/ctl,$TMP/ack" \
	-o "$TMP/perf.data" >"$TMP/perf.out" 2>&1 &
perf=$!
BACKGROUND+=($perf)
echo enable >&$ctl
# perf takes a minute or more to start in a busy emulated guest.
read -r -t 200 -u $ack reply || fail "perf record did not start in 200 s: $(cat "$TMP/perf.out")"
printf '%s\n.quit\n' "$query" >&$sql
wait $db || fail "sqlite3 exited $?: $(cat "$TMP/sqlite.out")"
kill -INT $perf 2>/dev/null
wait $perf
wait $ember || fail "ember exited $?: $(cat "$TMP/ember.err")"
[ "$(cat "$TMP/sqlite.out")" = $((rows * 2000)) ] || fail "sqlite3 answered: $(cat "$TMP/sqlite.out")"
perf_folded "$TMP/perf.data" >"$TMP/perf.folded"
! grep -q 'failed to process' "$TMP/perf-script.err" || fail "perf script could not read perf's recording: $(head -3 "$TMP/perf-script.err")"
for run in ember perf; do canonical "$TMP/$run.folded" >"$TMP/$run.canon"; done

# perf unwound a sample fully when it reached main's caller in libc.
grep -E '(^|;)libc_start_call_main;' "$TMP/perf.canon" >"$TMP/perf-full.canon"
heaviest() { sort -t' ' -k2nr "$1" | head -"${2:-6}" | cut -c1-400; }
# depth FILE: "MEAN SAMPLES" over user frames, named or not.
depth() { awk '{ c = $NF; sub(/ [0-9]+$/, ""); d += c * split($0, f, ";"); t += c } END { printf "%.2f %d\n", t ? d / t : 0, t }' "$1"; }
read -r ember_depth ember_n < <(depth "$TMP/ember.canon")
read -r perf_depth perf_n < <(depth "$TMP/perf-full.canon")
read -r _ perf_all < <(depth "$TMP/perf.canon")
echo "mean user stack depth: ember $ember_depth frames ($ember_n samples), perf $perf_depth ($perf_n of $perf_all samples it unwound to libc_start_call_main)"
(( ember_n >= 2000 && perf_n >= 2000 )) || fail "too few samples: ember $ember_n, perf $perf_n of $perf_all, expected 3000-5000 (3-5 s of CPU at 999 Hz)"
awk -v e="$ember_depth" -v p="$perf_depth" 'BEGIN { d = e - p; if (d < 0) d = -d; exit !(d <= p / 10) }' ||
	fail "ember's mean stack depth $ember_depth is not within 10% of perf's $perf_depth; heaviest stacks, ember:
$(heaviest "$TMP/ember.canon")
perf:
$(heaviest "$TMP/perf.canon")"

# inclusive FILE: "SHARE NAME" of each named function, once per sample it
# is in (frames without a name, [unknown] or a file name once the offset is
# dropped, left out), heaviest first.
inclusive() {
	awk '{ c = $NF; sub(/ [0-9]+$/, ""); n = split($0, f, ";"); split("", seen); t += c
		for (i = 1; i <= n; i++) if (!(f[i] in seen)) { seen[f[i]]; w[f[i]] += c } }
		END { for (k in w) if (k != "[unknown]" && k !~ /\.so(\.[0-9]+)*$/ && k != "sqlite3") printf "%.4f %s\n", w[k] / t, k }' "$1" |
		sort -k1,1nr -k2
}
inclusive "$TMP/ember.canon" >"$TMP/ember.top"
inclusive "$TMP/perf-full.canon" >"$TMP/perf.top"
show_top() { head -7 "$1" | awk '{ printf "  %5.1f%% %s\n", 100 * $1, $2 }'; }
echo "top functions by inclusive time, ember:"; show_top "$TMP/ember.top"
echo "perf:"; show_top "$TMP/perf.top"
# The same top 5, where a function swapped with one of a near-equal share
# counts as the same (5 sigma of the difference of two sampled shares).
bad=$(awk -v ne="$ember_n" -v np="$perf_n" '
	FNR == 1 { run++ }
	run == 1 { e[$2] = $1; if (FNR <= 5) { te[$2]; e5 = $1 } }
	run == 2 { p[$2] = $1; if (FNR <= 5) { tp[$2]; p5 = $1 } }
	function tol(s) { return 5 * sqrt(s * (1 - s) * (1 / ne + 1 / np)) }
	END {
		for (k in te) if (!(k in tp) && p[k] + tol(p5) < p5) printf "%s (ember %.1f%%, perf %.1f%%, perf'\''s 5th %.1f%%) ", k, 100 * e[k], 100 * p[k], 100 * p5
		for (k in tp) if (!(k in te) && e[k] + tol(e5) < e5) printf "%s (perf %.1f%%, ember %.1f%%, ember'\''s 5th %.1f%%) ", k, 100 * p[k], 100 * e[k], 100 * e5
	}' "$TMP/ember.top" "$TMP/perf.top")
[ -z "$bad" ] || fail "the top 5 functions by inclusive time differ: $bad"
true
