#!/usr/bin/env bash
# -p, --tid and --comm keep only their targets; children of a command are
# followed, but not ember's own child before it execs; the command's exit
# code is ember's.
. "$(dirname "$0")/../lib.sh"
need_bpf
background "$WORKLOADS/spinner" 30
spinner=${BACKGROUND[-1]}
background "$WORKLOADS/cpu_split" 30
sleep 0.3

"$EMBER" record -p "$spinner" -d 1.5 -o "$TMP/pid.folded" 2>"$TMP/err" || fail "-p: ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/pid.folded" '^spinner;' "-p: spinner missing"
assert_absent "$TMP/pid.folded" '^(cpu_split|ember);' "-p: other processes recorded"

# --tid on one of two busy threads of one process.
background "$WORKLOADS/throughput" 30 2
for _ in $(seq 100); do (( $(ls /proc/${BACKGROUND[-1]}/task | wc -l) >= 3 )) && break; sleep 0.1; done
tid=$(ls /proc/${BACKGROUND[-1]}/task | sort -n | sed -n 2p)
[ -n "$tid" ] || fail "throughput did not start its threads in 10 s"
"$EMBER" record --tid "$tid" --threads -d 1.5 -o "$TMP/tid.folded" 2>"$TMP/err" || fail "--tid: ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/tid.folded" "^throughput;\\[throughput tid=$tid\\];" "--tid: thread $tid missing"
others=$(grep -v "^throughput;\[throughput tid=$tid\];" "$TMP/tid.folded" | head -1)
[ -z "$others" ] || fail "--tid: another thread recorded: $others"

"$EMBER" record --comm '^cpu_spl' -d 1.5 -o "$TMP/comm.folded" 2>"$TMP/err" || fail "--comm: ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/comm.folded" '^cpu_split;' "--comm: cpu_split missing"
assert_absent "$TMP/comm.folded" '^spinner;' "--comm: spinner recorded"
grep -q "filtered" "$TMP/err" || fail "--comm: no filtered count in the summary"

# A shell that forks the workload: the grandchild is profiled.
"$EMBER" record -o "$TMP/child.folded" -- sh -c "$WORKLOADS/cpu_split 1; exit 3" 2>"$TMP/err"
rc=$?
(( rc == 3 )) || fail "exit code of the command not returned: got $rc, want 3"
assert_contains "$TMP/child.folded" '^cpu_split;.*run_split' "child of the command not profiled"
assert_absent "$TMP/child.folded" '^spinner;' "a process outside the command recorded"

# The command's process is ember's own child until it execs the command:
# what it does before (waiting for the start, setting up the environment)
# is ember's, not the command's, and is in no graph.
"$EMBER" record -e offcpu,malloc -o "$TMP/pre.folded" -- sleep 0.3 2>"$TMP/err" ||
	fail "-e offcpu,malloc -- CMD: ember exited $?: $(cat "$TMP/err")"
for g in offcpu malloc; do
	assert_absent "$TMP/pre.$g.folded" '^ember' "$g: ember's child recorded before it ran the command: $(grep '^ember' "$TMP/pre.$g.folded" | head -2)"
done
assert_contains "$TMP/pre.offcpu.folded" '^sleep;.*nanosleep' "offcpu: the command is missing"

# -p stops by itself once its processes have exited (3 s: long enough to be
# sampled after ember's start-up, seconds on a busy machine).
"$WORKLOADS/spinner" 3 &
short=$!
start=$(date +%s)
"$EMBER" record -p "$short" -o "$TMP/short.folded" 2>"$TMP/err" || fail "-p short: ember exited $?"
(( $(date +%s) - start < 10 )) || fail "-p did not stop when its process exited"
grep -q "every target (-p, --tid) has exited" "$TMP/err" || fail "-p: no message on exit"
assert_contains "$TMP/short.folded" '^spinner;.*spinner_loop' "-p short: spinner missing"

# --kernel-only and --user-only
"$EMBER" record --kernel-only -o "$TMP/k.folded" -- "$WORKLOADS/syscall_loop" 1 2>"$TMP/err" || fail "--kernel-only: exit $?"
assert_contains "$TMP/k.folded" '^syscall_loop;[^;]*_\[k\];' "--kernel-only: no kernel frames under the process"
assert_absent "$TMP/k.folded" 'read_zero_loop' "--kernel-only: user frames kept"
"$EMBER" record --user-only -o "$TMP/u.folded" -- "$WORKLOADS/syscall_loop" 1 2>"$TMP/err" || fail "--user-only: exit $?"
assert_contains "$TMP/u.folded" 'read_zero_loop' "--user-only: user frames missing"
assert_absent "$TMP/u.folded" '_\[k\]' "--user-only: kernel frames kept"
