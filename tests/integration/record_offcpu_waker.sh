#!/usr/bin/env bash
# kind: structural
# -e offcpu --waker: each block with the stack of whoever woke the thread,
# upside down above a "--" frame, ending in "[waker: NAME]" (BCC
# offwaketime's layout). tests/workloads/wakeups blocks on a pipe in
# wait_for_x until another process (ywaker: the same program executed
# again, so its code lies at other addresses) writes to it from wake_from_y
# 30 ms later, then from wake_from_z 10 ms later; it measures its waits.
# A JVM's wakers: record_offcpu_waker_java.sh.
. "$(dirname "$0")/../lib.sh"
need_bpf
# 80 cycles: on a busy machine a block is lost now and then (about one in
# a thousand, with or without --waker: a switch back in that the
# sched_switch program does not see; a CI run lost two of 40 10 ms blocks
# once); one or two 10 ms blocks are then 1.25% or 2.5% of a total, inside
# the tolerances below.
cycles=80
"$EMBER" record -e offcpu,wall --waker --no-java -o "$TMP/w.folded" -- "$WORKLOADS/wakeups" $cycles \
	>"$TMP/out" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
cat "$TMP/err"
off=$TMP/w.offcpu.folded
ms() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e6 }'; }

# The wakee's stack, the wakeup in the kernel (a pipe write), then the
# waker's stack from its system call down to its root. The kernel's first
# frame of a system call: its entry from user mode.
entry='entry_SYSCALL_64_after_hwframe'
[ "$(uname -m)" = aarch64 ] && entry='el0t_64_sync'
wakee=";main;wait_for_x;sys3;${entry}_\\[k\\];.*;__schedule_\\[k\\];--;try_to_wake_up_\\[k\\];"
# (frame pointers stop in libc; CFI unwinding goes on to _start)
root=';__libc_start_call_main;(__libc_start_main;_start;)?'
waker_of() { echo "${wakee}.*pipe_write_\[k\];.*;sys3;wake_from_$1;waker;main${root}\[waker: ywaker\] [0-9]+$"; }
y=$(weight "$off" "$(waker_of y)")
z=$(weight "$off" "$(waker_of z)")
measured() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/out"; }
truth_y=$(measured blocked_y_ns) runnable_y=$(measured blocked_y_runnable_ns)
truth_z=$(measured blocked_z_ns) runnable_z=$(measured blocked_z_runnable_ns)
echo "wait_for_x woken by wake_from_y: $(ms "$y") ms, by wake_from_z: $(ms "$z") ms (the workload measured $(ms "$truth_y") and $(ms "$truth_z") ms off CPU, $(ms "$runnable_y") and $(ms "$runnable_z") ms of it runnable)"
(( truth_y > 0 && truth_z > 0 )) || fail "the workload did not report its waits: $(cat "$TMP/out")"
# Within 5%, or 10% in an emulated guest: there a loaded host's stalls land
# inside and outside the workload's clocks unevenly (CI's arm64 guest, its
# 10 ms waits taking 33 ms: wake_from_z 4.1% over; on the host and in an
# idle guest, within 0.5%).
pct=5
[[ ${EMBER_EMULATED:-} ]] && pct=10
blocked_within "$y" "$truth_y" "$runnable_y" $pct ||
	fail "blocked until wake_from_y: $(ms "$y") ms, not $(ms "$truth_y") ms (less up to $(ms "$runnable_y") ms runnable) ±$pct%: $(grep wait_for_x "$off")"
blocked_within "$z" "$truth_z" "$runnable_z" $pct ||
	fail "blocked until wake_from_z: $(ms "$z") ms, not $(ms "$truth_z") ms (less up to $(ms "$runnable_z") ms runnable) ±$pct%: $(grep wait_for_x "$off")"
# ywaker's own sleeps end in a timer interrupt: the interrupt's kernel
# frames only, not the stack of the task it happened to interrupt.
# (arm64's kernel calls try_to_wake_up from wake_up_process, x86's jumps.)
woken='try_to_wake_up_\[k\];'
[ "$(uname -m)" = aarch64 ] && woken+='wake_up_process_\[k\];'
timer=$(weight "$off" "^ywaker;.*;__schedule_\\[k\\];--;${woken}hrtimer_wakeup_\\[k\\];([^;]*_\\[k\\];)*\\[waker: hardirq\\] [0-9]+\$")
slept=$(measured slept_ns) slept_runnable=$(measured slept_runnable_ns)
echo "ywaker's sleeps, woken by timer interrupts: $(ms "$timer") ms (it measured $(ms "$slept") ms, $(ms "$slept_runnable") ms of it runnable)"
blocked_within "$timer" "$slept" "$slept_runnable" $pct ||
	fail "ywaker's sleeps: $(ms "$timer") ms, not $(ms "$slept") ms (less up to $(ms "$slept_runnable") ms runnable) ±$pct%: $(grep '^ywaker' "$off")"
line=$(grep -E '^  waker +offcpu: ' "$TMP/err") || fail "no waker line in the summary"
read -r threads interrupts <<<"$(sed -E 's/.*: ([0-9]+) blocks woken by threads, ([0-9]+) by interrupts.*/\1 \2/' <<<"$line")"
(( threads * 100 >= 2 * cycles * 97 && interrupts * 100 >= 2 * cycles * 97 )) ||
	fail "summary: $threads blocks woken by threads, $interrupts by interrupts; the workload alone has $((2 * cycles)) of each"
# Wall-clock time stays one stack per block.
assert_contains "$TMP/w.wall.folded" ';main;wait_for_x;' "no wait_for_x in the wall graph"
assert_absent "$TMP/w.wall.folded" ';--;' "the wall graph has waker stacks"
assert_absent "$off" 'bpf_prog_|bpf_trace_run' "ember's own BPF frames in the stacks"

# A waker outside the profiled processes (-p names the sleeper only) is
# named from its own process, as --pid-frames shows.
[ "$(cat /proc/sys/kernel/randomize_va_space)" != 0 ] ||
	echo "note: ASLR is off: ywaker's code lies where the sleeper's does, so naming it from the wrong process would go unnoticed"
# (Cycles for far longer than the test: ember may take seconds to start on
# a busy machine; the test kills it at its end.)
background "$WORKLOADS/wakeups" 10000 >/dev/null
sleeper=${BACKGROUND[-1]}
for _ in $(seq 50); do ywaker=$(pgrep -P "$sleeper" ywaker) && break; sleep 0.1; done
[ -n "$ywaker" ] || fail "the workload did not start its waker"
"$EMBER" record -e offcpu --waker --pid-frames --no-java -p "$sleeper" -d 2 -o "$TMP/p.folded" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
y=$(weight "$TMP/p.folded" ";wake_from_y;waker;main${root}\\[waker: ywaker \\($ywaker\\)\\] [0-9]+$")
z=$(weight "$TMP/p.folded" ";wake_from_z;waker;main${root}\\[waker: ywaker \\($ywaker\\)\\] [0-9]+$")
echo "-p: woken from wake_from_y $(ms "$y") ms, from wake_from_z $(ms "$z") ms (about 3:1)"
# The figures are checked above, against the workload's own; here, that
# both wakers are found and named. Their ratio moves with the load: in an
# emulated guest on a loaded host, the few cycles of 2 s take its stalls
# unevenly (CI's arm64 guest: z 1220 ms, y 694), so it is checked on the
# host alone.
(( y > 0 && z > 0 )) || fail "a waker is missing: y:z = $y:$z: $(cat "$TMP/p.folded")"
[[ ${EMBER_EMULATED:-} ]] || (( y > z )) || fail "y:z = $y:$z, not about 3:1: $(cat "$TMP/p.folded")"
assert_absent "$TMP/p.folded" '^ywaker' "ywaker's own waits, out of scope, in the graph"

"$EMBER" record -e cpu-clock --waker -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "--waker without -e offcpu was accepted"
assert_contains "$TMP/err" "--waker applies to blocked threads: add -e offcpu"
