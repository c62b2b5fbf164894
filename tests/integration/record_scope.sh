#!/usr/bin/env bash
# -p, --tid and --comm keep only their targets; children of a command are
# followed; the command's exit code is ember's.
. "$(dirname "$0")/../lib.sh"
need_bpf
background "$WORKLOADS/spinner" 30
spinner=${BACKGROUND[-1]}
background "$WORKLOADS/cpu_split" 30
sleep 0.3

"$EMBER" record -p "$spinner" -d 1.5 -o "$TMP/pid.folded" 2>"$TMP/err" || fail "-p: ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/pid.folded" '^spinner;' "-p: spinner missing"
assert_absent "$TMP/pid.folded" '^(cpu_split|ember);' "-p: other processes recorded"

"$EMBER" record --tid "$spinner" -d 1.5 -o "$TMP/tid.folded" 2>"$TMP/err" || fail "--tid: ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/tid.folded" '^spinner;' "--tid: spinner missing"
assert_absent "$TMP/tid.folded" '^cpu_split;' "--tid: other threads recorded"

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
