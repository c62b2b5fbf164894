#!/usr/bin/env bash
# A stop at any moment writes complete output: SIGINT, SIGTERM and SIGHUP
# mid-run (SIGTERM twice too, as supervisors send it), and -d; a command's
# stop (SIGTERM forwarded to it, -d waiting for its end); a closed
# pipe on stderr does not stop the recording. The status line shows on a
# terminal and not otherwise. Ctrl-C twice on a terminal, the second while
# the writing waits on a debuginfod server that never answers: ember quits
# at once, writing nothing.
. "$(dirname "$0")/../lib.sh"
need_bpf
background "$WORKLOADS/spinner" 30
for sig in INT TERM HUP TERM-TERM; do
	"$EMBER" record -o "$TMP/$sig.html" 2>"$TMP/$sig.err" --progress-fd 3 3>"$TMP/$sig.progress" &
	pid=$!
	wait_sampling $pid "$TMP/$sig.progress"
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

# A command's stop: SIGTERM sent to ember alone reaches the command, whose
# exit code ember returns; -d shorter than the command waits for its end.
# The command says when its trap is set: a SIGTERM before that ends sh
# with 143 (CI's rehearsal sent it 0.0 s into the recording).
"$EMBER" record -o "$TMP/cmd-term.folded" --progress-fd 3 3>"$TMP/cmd-term.progress" -- \
	sh -c 'trap "exit 7" TERM; : >"$1"; while :; do sleep 0.05; done' sh "$TMP/trapped" 2>"$TMP/cmd-term.err" &
pid=$!
wait_sampling $pid "$TMP/cmd-term.progress"
for _ in $(seq 300); do [ -e "$TMP/trapped" ] && break; sleep 0.1; done
[ -e "$TMP/trapped" ] || fail "the command did not set its trap in 30 s: $(cat "$TMP/cmd-term.err")"
kill -TERM $pid
wait $pid
rc=$?
((rc == 7)) || fail "SIGTERM to ember: exit $rc, not the command's 7 (not forwarded?): $(cat "$TMP/cmd-term.err")"
assert_contains "$TMP/cmd-term.err" "SIGTERM: stopping" "the stop is not told"
start=$(date +%s%N)
"$EMBER" record -d 0.5 -o "$TMP/cmd-d.folded" -- sh -c 'sleep 2; exit 4' 2>"$TMP/cmd-d.err"
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
((rc == 4)) || fail "-d 0.5 -- a 2 s command: exit $rc, not the command's 4: $(cat "$TMP/cmd-d.err")"
((ms >= 2000)) || fail "-d 0.5 -- a 2 s command: ember returned after $ms ms, before the command ended"
assert_contains "$TMP/cmd-d.err" "waiting for 'sh' \\(pid [0-9]+\\) to exit" "the wait is not told"

start=$(date +%s%N)
"$EMBER" record -d 1 -o "$TMP/d.folded" 2>"$TMP/d.err" || fail "-d: ember exited $?"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
(( ms < 6000 )) || fail "-d 1 took $ms ms"
grep -q $'\r' "$TMP/d.err" && fail "status line written to a non-terminal"
command -v script >/dev/null || skip "no script(1) to test the terminal status line"
timeout 30 script -qec "$EMBER record -d 2.5 -o $TMP/tty.folded" /dev/null </dev/null >"$TMP/tty.out" 2>&1
grep -q 'samples/s' "$TMP/tty.out" || fail "no status line on a terminal: $(head -c 300 "$TMP/tty.out")"

# Ctrl-C twice. The stripped program's debug info is asked of debuginfod
# when the profile is named, after the first Ctrl-C; the server takes the
# connection and never answers (ember would give up after its 10 s budget).
strip -o "$TMP/spinner-stripped" "$WORKLOADS/spinner"
background "$TMP/spinner-stripped" 30
spinner=${BACKGROUND[-1]}
background python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True: held.append(s.accept()[0])
' >"$TMP/silent_server"
for _ in $(seq 50); do [ -s "$TMP/silent_server" ] && break; sleep 0.1; done
port=$(head -1 "$TMP/silent_server")
[[ $port =~ ^[0-9]+$ ]] || fail "the silent debuginfod did not start"
start=$EPOCHREALTIME
DEBUGINFOD_URLS=http://127.0.0.1:$port DEBUGINFOD_CACHE_PATH=$TMP/debuginfod-cache \
	python3 "$ROOT/tests/tools/ctrl_c.py" --after 'samples/s' --after 'stopping, writing' -- \
	"$EMBER" record -p $spinner -o "$TMP/twice.folded" >"$TMP/twice.out" 2>&1
rc=$?
secs=$(bc <<<"$EPOCHREALTIME - $start")
((rc == 130)) || fail "Ctrl-C twice: exit $rc, not 130: $(tr '\r' '\n' <"$TMP/twice.out" | tail -5)"
grep -q 'Ctrl-C again: quitting without writing' "$TMP/twice.out" || fail "Ctrl-C twice: not said: $(tail -c 300 "$TMP/twice.out")"
[ -e "$TMP/twice.folded" ] && fail "Ctrl-C twice: the output was written"
ls "$TMP" | grep -q '\.tmp\.' && fail "Ctrl-C twice: temporary file left behind"
(($(bc <<<"$secs < 8") == 1)) || fail "Ctrl-C twice took $secs s: the second did not cut the writing short"
echo "stops ok; -d 1 took $ms ms; Ctrl-C twice ended ember in $secs s"
