#!/usr/bin/env bash
# A stop at any moment writes complete output: SIGINT, SIGTERM and SIGHUP
# mid-run (SIGTERM twice too, as supervisors send it), and -d. A second
# Ctrl-C while writing quits at once without writing; a closed pipe on
# stderr does not stop the recording. The status line shows on a terminal
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

# Ctrl-C twice: the second comes while ember cuts the recording. SIGSTOP
# holds ember there (once its stop message shows) so that the second
# SIGINT is handled before the output is written; a run whose output was
# written before SIGSTOP took hold is tried again.
for attempt in 1 2 3 4 5; do
	"$EMBER" record -a -o "$TMP/twice.html" 2>"$TMP/twice.err" &
	pid=$!
	wait_sampling $pid
	kill -INT $pid
	for _ in $(seq 500); do
		grep -q "SIGINT: stopping, writing what was recorded (Ctrl-C again quits" "$TMP/twice.err" && break
		sleep 0.01
	done
	kill -STOP $pid 2>/dev/null || { wait $pid; rm -f "$TMP/twice.html"; continue; }
	until [[ $(awk '{ print $3 }' /proc/$pid/stat 2>/dev/null) != R ]]; do sleep 0.001; done
	if [ -e "$TMP/twice.html" ]; then
		kill -CONT $pid
		wait $pid
		rm -f "$TMP/twice.html"
		continue
	fi
	kill -INT $pid
	kill -CONT $pid
	wait $pid
	rc=$?
	((rc == 130)) || fail "a second SIGINT: ember exited $rc, not 130: $(cat "$TMP/twice.err")"
	assert_contains "$TMP/twice.err" "stopped again: quitting without writing"
	[ -z "$(ls "$TMP" | grep twice.html)" ] || fail "a second SIGINT left $(ls "$TMP" | grep twice.html)"
	break
done
((attempt < 5)) || [ -n "${rc:-}" ] || fail "five recordings were written before SIGSTOP held them"

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
echo "stops ok; a second Ctrl-C quit on attempt $attempt; -d 1 took $ms ms"
