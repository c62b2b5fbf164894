#!/usr/bin/env bash
# A stop at any moment writes complete output: SIGINT, SIGTERM and SIGHUP
# mid-run (SIGTERM twice too, as supervisors send it), and -d; a closed
# pipe on stderr does not stop the recording. The status line shows on a terminal
# and not otherwise.
. "$(dirname "$0")/../lib.sh"
need_bpf
background "$WORKLOADS/spinner" 30
for sig in INT TERM HUP TERM-TERM; do
	"$EMBER" record -o "$TMP/$sig.html" 2>"$TMP/$sig.err" &
	pid=$!
	wait_sampling $pid
	sleep 0.5 # mid-run: the spinner has ~50 samples by now
	kill -${sig%-*} $pid
	[[ $sig == *-* ]] && kill -${sig#*-} $pid
	wait $pid || fail "SIG$sig: ember exited $?: $(cat "$TMP/$sig.err")"
	grep -q '</html>' "$TMP/$sig.html" || fail "SIG$sig: incomplete HTML"
	grep -q '"samples":"[1-9]' "$TMP/$sig.html" || fail "SIG$sig: no samples in the page"
	ls "$TMP" | grep -q '\.tmp\.' && fail "SIG$sig: temporary file left behind"
done

# stderr into a pipe whose reader is gone: the recording goes on and is written.
{ "$EMBER" record -d 1.5 -o "$TMP/pipe.folded" 2>&1; echo $? >"$TMP/pipe.rc"; } | head -c 1 >/dev/null
[ "$(cat "$TMP/pipe.rc")" = 0 ] || fail "ember record with stderr into a closed pipe exited $(cat "$TMP/pipe.rc")"
grep -q ';' "$TMP/pipe.folded" || fail "ember record with stderr into a closed pipe wrote no stacks"

start=$(date +%s%N)
"$EMBER" record -d 1 -o "$TMP/d.folded" 2>"$TMP/d.err" || fail "-d: ember exited $?"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
(( ms < 6000 )) || fail "-d 1 took $ms ms"
grep -q $'\r' "$TMP/d.err" && fail "status line written to a non-terminal"
command -v script >/dev/null || skip "no script(1) to test the terminal status line"
timeout 30 script -qec "$EMBER record -d 2.5 -o $TMP/tty.folded" /dev/null </dev/null >"$TMP/tty.out" 2>&1
grep -q 'samples/s' "$TMP/tty.out" || fail "no status line on a terminal: $(head -c 300 "$TMP/tty.out")"
echo "stops ok; -d 1 took $ms ms"
