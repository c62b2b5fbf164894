#!/usr/bin/env bash
# A syscall-heavy workload: kernel frames (_[k]) stand under its user frames
# in the same stacks.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -o "$TMP/out.folded" -- "$WORKLOADS/syscall_loop" 3 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
out=$TMP/out.folded
assert_contains "$out" ';main;read_zero_loop;.*_\[k\];.*read.*_\[k\]' "no kernel read path under read_zero_loop: $(sort -t' ' -k2 -nr "$out" | head -3)"
k=$(weight "$out" 'read_zero_loop;.*_\[k\]')
all=$(total "$out")
echo "stacks with kernel frames under read_zero_loop: $k of $all samples"
(( 2 * k > all )) || fail "kernel frames in fewer than half the samples"
# Kernel frames come after user frames, never before.
bad=$(awk '{ sub(/ [0-9]+$/, ""); n = split($0, f, ";"); k = 0
	for (i = 2; i <= n; i++) { if (f[i] ~ /_\[k\]$/) k = 1; else if (k) { print; break } } }' "$out" | head -1)
[ -z "$bad" ] || fail "a user frame above a kernel frame: $bad"
