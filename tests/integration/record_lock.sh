#!/usr/bin/env bash
# -e lock: time blocked in futex waits (pthread mutexes), with the waiter's
# stack. Two threads take turns holding one mutex for 20 ms, 10 times each:
# the waits add up to about 19 x 20 ms.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -e lock --no-java -o "$TMP/lock.folded" -- "$WORKLOADS/lock_contention" 10 20 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
waits=$(weight "$TMP/lock.folded" ';worker;.*futex_wait_\[k\].*__schedule_\[k\] [0-9]+$')
echo "lock: workers waited $((waits / 1000000)) ms for the mutex (about 380 ms by construction)"
(( waits >= 250000000 && waits <= 450000000 )) || fail "workers waited $((waits / 1000000)) ms: $(cat "$TMP/lock.folded")"
assert_absent "$TMP/lock.folded" 'hold_lock' "the holder's sleep (not a futex) counted as a lock wait"
assert_contains "$TMP/err" "waiting for locks \\(futex\\)"
