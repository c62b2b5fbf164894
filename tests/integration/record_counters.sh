#!/usr/bin/env bash
# The summary prints every counter, even at zero, and counts stacks cut at
# the depth limit.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -o "$TMP/deep.folded" -- "$WORKLOADS/deep_stack" 300 2 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
cat "$TMP/err"
for counter in samples lost truncated unknown; do
	grep -qE "^  $counter +[0-9]+" "$TMP/err" || fail "summary lacks '$counter'"
done
samples=$(awk '$1 == "samples" { print $2 }' "$TMP/err")
truncated=$(awk '$1 == "truncated" { print $2 }' "$TMP/err")
(( samples >= 30 )) || fail "only $samples samples"
# Nearly all samples are at the bottom of a 300-deep recursion.
(( truncated * 10 >= samples * 9 )) || fail "truncated $truncated of $samples samples, expected >= 90%"
limit=$(cat /proc/sys/kernel/perf_event_max_stack)
(( limit > 256 )) && limit=256 # ember carries at most 256 frames
grep -qE "$limit kernel frames.* 256 user frames" "$TMP/err" || fail "summary does not name the depth limits ($limit, 256)"
# Frame pointers: the kernel's walk, at its limit.
"$EMBER" record --unwind fp -o "$TMP/fp.folded" -- "$WORKLOADS/deep_stack" 300 1 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
grep -q "$limit-frame limit" "$TMP/err" || fail "--unwind fp: summary does not name the $limit-frame limit"
