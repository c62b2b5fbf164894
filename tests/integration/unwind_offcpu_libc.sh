#!/usr/bin/env bash
# kind: structural
# Off-CPU time of functions that block inside libc (issue 13): a program
# built -O2 without frame pointers blocks in blocked_in_nanosleep (through
# libc's nanosleep) and in blocked_in_read (libc's read on a pipe that a
# third thread feeds), 3:1 by construction (tests/workloads/unwind/
# offcpu_libc.c). Each must be in its stacks, under its thread's entry, as
# two towers 3:1 (+-5%). A frame-pointer walk loses them: libc keeps no frame
# pointer, so the walk skips the libc function's caller and both sleeps end
# in one tower under the process.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/unwind_lib.sh"
need_bpf
[ -x "$WORKLOADS/offcpu_libc" ] || fail "no $WORKLOADS/offcpu_libc: make build/workloads/offcpu_libc"
# 600 waits of 1-3 ms on the pipe, about 1.2 s; the sleeper then tops up to
# 3.6 s in ~900 blocks of 2-6 ms: many blocks, none long enough to matter.
"$EMBER" record "${UNWIND_OPTS[@]}" -e offcpu --no-java -o "$TMP/out.folded" -- "$WORKLOADS/offcpu_libc" 600 \
	>"$TMP/out" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
truth() { awk -v k="$1_ns" '$1 == k { print $2 }' "$TMP/out"; }
slept=$(truth nanosleep) waited=$(truth read)
[ -n "$slept" ] && [ -n "$waited" ] || fail "the workload did not report its times: $(cat "$TMP/out")"
canonical "$TMP/out.folded" >"$TMP/canon"
ms() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e6 }'; }
a=$(weight "$TMP/canon" ';blocked_in_nanosleep;')
b=$(weight "$TMP/canon" ';blocked_in_read;')
stacks() { sort -t' ' -k2nr "$TMP/canon" | head -8 | cut -c1-400; }
echo "off CPU: blocked_in_nanosleep $(ms "$a") ms, blocked_in_read $(ms "$b") ms (the workload measured $(ms "$slept") and $(ms "$waited") ms)"
(( a > 0 && b > 0 )) || fail "a function that blocks in libc is missing from the stacks: blocked_in_nanosleep $(ms "$a") ms, blocked_in_read $(ms "$b") ms. Heaviest stacks (canonical):
$(stacks)"
# Each under its thread's entry, through libc, into the kernel's wait.
under_root() { weight "$TMP/canon" "^$THREAD_ROOT;$1;$2;"; }
ra=$(under_root sleeper_thread blocked_in_nanosleep) rb=$(under_root reader_thread blocked_in_read)
(( ra * 100 >= a * 98 )) || fail "only $(ms "$ra") of $(ms "$a") ms in blocked_in_nanosleep is under $THREAD_ROOT;sleeper_thread: $(stacks)"
(( rb * 100 >= b * 98 )) || fail "only $(ms "$rb") of $(ms "$b") ms in blocked_in_read is under $THREAD_ROOT;reader_thread: $(stacks)"
assert_contains "$TMP/canon" ';blocked_in_nanosleep;[^;]*nanosleep[^;]*(;| )' "no libc nanosleep frame above blocked_in_nanosleep: $(stacks)"
assert_contains "$TMP/canon" ';blocked_in_read;[^;]*read[^;]*(;| )' "no libc read frame above blocked_in_read: $(stacks)"
# The truth is 3:1 within a block's overshoot (the sleeper's last nanosleep);
# off-CPU time is measured, not sampled, so +-5% leaves room only for the
# CPU time inside the calls (syscall entry and exit, microseconds a block).
# In an emulated guest each block's own CPU time (the switch, ember's
# program unwinding the stack) is emulated, far slower, and more so on a
# busy host: the workload's clock counts it, the off-CPU time does not
# (the read thread lost 19% so, the sleeper 2%). +-50% there: the towers
# apart and in order; the host run holds the 5%.
pct=5
[[ ${EMBER_EMULATED:-} ]] && pct=50
ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')
truth_ratio=$(awk -v a="$slept" -v b="$waited" 'BEGIN { printf "%.3f", a / b }')
echo "blocked_in_nanosleep:blocked_in_read = $ratio (expect 3 +- $pct%; the workload measured $truth_ratio)"
# The truth's own slack is the sleeper's last wakeup, late by up to 56 ms
# of its 4.7 s in CI's 5.10 guest (3.036), and 3.092 there beside two
# busy emulators and a build: 1% here, 10% emulated (where ember's own
# ratio is held to 50%).
truth_pct=1
[[ ${EMBER_EMULATED:-} ]] && truth_pct=10
awk -v r="$truth_ratio" -v p="$truth_pct" 'BEGIN { exit !(r >= 3 * (1 - p / 100) && r <= 3 * (1 + p / 100)) }' ||
	fail "the workload's own split is $truth_ratio, not 3:1 +- $truth_pct%: $(cat "$TMP/out")"
awk -v r="$ratio" -v p="$pct" 'BEGIN { exit !(r >= 3 * (1 - p / 100) && r <= 3 * (1 + p / 100)) }' ||
	fail "blocked_in_nanosleep:blocked_in_read = $(ms "$a"):$(ms "$b") ms = $ratio, not 3 +- $pct% (measured $(ms "$slept"):$(ms "$waited") ms); heaviest stacks:
$(stacks)
the summary:
$(cat "$TMP/err")"
true
