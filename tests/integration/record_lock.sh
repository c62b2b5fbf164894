#!/usr/bin/env bash
# kind: structural
# -e lock: time blocked in futex waits (pthread mutexes), with the waiter's
# stack. Two threads take turns holding one mutex for 20 ms, 10 times each
# (40 emulated);
# the workload measures its own waits around pthread_mutex_lock. A third
# waits on a condition variable all along: no lock wait.
. "$(dirname "$0")/../lib.sh"
need_bpf
# Under emulation beside busy emulators, 40 rounds: the collector reads a
# process's mappings from /proc once it is first sampled (before Linux
# 6.16 nothing keeps them past its exit), and a starved guest's collector
# came to it after the 10 rounds' 0.4 s were over: no frame was named.
rounds=10
[[ ${EMBER_EMULATED:-} ]] && rounds=40
"$EMBER" record -e lock --no-java -o "$TMP/lock.folded" -- "$WORKLOADS/lock_contention" $rounds 20 >"$TMP/out" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
measured() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/out"; }
truth=$(measured waited_ns) runnable=$(measured waited_runnable_ns)
waits=$(weight "$TMP/lock.folded" ';worker;.*futex_wait_\[k\].*__schedule_\[k\] [0-9]+$')
echo "lock: workers waited $((waits / 1000000)) ms in futex waits; they measured $((truth / 1000000)) ms off CPU, $((runnable / 1000000)) ms of it runnable"
(( truth > 50000000 )) || fail "the workload barely contended ($truth ns): nothing to measure"
blocked_within "$waits" "$truth" "$runnable" 10 ||
	fail "$waits ns, not $truth ns (less up to $runnable ns runnable) ±10%: $(cat "$TMP/lock.folded")"
assert_absent "$TMP/lock.folded" 'hold_lock' "the holder's sleep (not a futex) counted as a lock wait"
# The idle thread waits ~400 ms for work; on its wakeup it may wait some
# microseconds more for the condition's mutex, a lock wait indeed.
idle=$(weight "$TMP/lock.folded" ';wait_for_work;')
(( idle < 20000000 )) || fail "a condition variable's wait counted as a lock wait: $idle ns in wait_for_work: $(cat "$TMP/lock.folded")"
assert_contains "$TMP/err" "waiting for locks \\(mutexes"

# A priority-inheriting mutex: glibc waits in FUTEX_LOCK_PI, whose kernel
# path (futex_lock_pi, rt_mutex_slowlock) has no futex_wait frame.
"$EMBER" record -e lock --no-java -o "$TMP/pi.folded" -- "$WORKLOADS/lock_contention" $rounds 20 pi >"$TMP/out" 2>"$TMP/err" ||
	fail "pi: ember exited $?: $(cat "$TMP/err")"
truth=$(measured waited_ns) runnable=$(measured waited_runnable_ns)
waits=$(weight "$TMP/pi.folded" ';worker;.*futex_lock_pi_\[k\].*__schedule_\[k\] [0-9]+$')
echo "pi: workers waited $((waits / 1000000)) ms in futex_lock_pi; they measured $((truth / 1000000)) ms off CPU, $((runnable / 1000000)) ms of it runnable"
(( truth > 50000000 )) || fail "pi: the workload barely contended ($truth ns): nothing to measure"
blocked_within "$waits" "$truth" "$runnable" 10 ||
	fail "pi: $waits ns, not $truth ns (less up to $runnable ns runnable) ±10%: $(cat "$TMP/pi.folded")"

# With a second program on the scheduler's tracepoints (another ember here;
# offcputime or an always-on agent in production) the kernel reaches them
# through __traceiter_sched_switch: the stacks must not change.
"$EMBER" record -e offcpu -o "$TMP/other.folded" --progress-fd 3 3>"$TMP/other.progress" -- sleep 60 2>/dev/null &
other=$!
BACKGROUND+=($other)
for _ in $(seq 100); do [ -s "$TMP/other.progress" ] && break; sleep 0.1; done
[ -s "$TMP/other.progress" ] || fail "the second recording did not start"
"$EMBER" record -e lock --no-java -o "$TMP/lock2.folded" -- "$WORKLOADS/lock_contention" $rounds 20 >"$TMP/out" 2>"$TMP/err" ||
	fail "beside another recording: ember exited $?: $(cat "$TMP/err")"
kill -INT $other
truth=$(measured waited_ns) runnable=$(measured waited_runnable_ns)
waits=$(weight "$TMP/lock2.folded" ';worker;.*futex_wait_\[k\].*__schedule_\[k\] [0-9]+$')
echo "beside another recording: $((waits / 1000000)) ms in futex waits; measured $((truth / 1000000)) ms off CPU, $((runnable / 1000000)) ms of it runnable"
blocked_within "$waits" "$truth" "$runnable" 10 ||
	fail "beside another recording: $waits ns, not $truth ns (less up to $runnable ns runnable) ±10%: $(cat "$TMP/lock2.folded")"
assert_absent "$TMP/lock2.folded" '__traceiter_|bpf_trace_run' "the tracepoint's own frames are in the stacks"
