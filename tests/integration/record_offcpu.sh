#!/usr/bin/env bash
# Off-CPU time (-e offcpu) and wall-clock time (-e wall), against a workload
# that sleeps known durations in known functions: 300 ms in waitA and
# 100 ms in waitB per cycle, then 200 ms on CPU in burnC. The truth is the
# time it measured in each: on a busy machine a woken thread waits for a
# CPU (off CPU too), and burnC overruns when preempted.
. "$(dirname "$0")/../lib.sh"
need_bpf
cycles=4
"$EMBER" record -e offcpu,wall,cpu-clock -F 999 --no-java -o "$TMP/out.folded" -- "$WORKLOADS/offcpu_waits" $cycles 200 \
	>"$TMP/out" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
cat "$TMP/err"
for e in offcpu wall cpu-clock; do [ -s "$TMP/out.$e.folded" ] || fail "no $TMP/out.$e.folded"; done

# within PCT percent of EXPECT
near() { awk -v v="$1" -v e="$2" -v p="$3" 'BEGIN { d = v - e; if (d < 0) d = -d; exit !(d <= e * p / 100) }'; }
ms() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e6 }'; }
truth() { awk -v k="$1_ns" '$1 == k { print $2 }' "$TMP/out"; }
truth_a=$(truth waitA) truth_b=$(truth waitB) truth_c=$(truth burnC)
[ -n "$truth_a" ] && [ -n "$truth_b" ] && [ -n "$truth_c" ] || fail "the workload did not report its times: $(cat "$TMP/out")"

off=$TMP/out.offcpu.folded
a=$(weight "$off" ';main;waitA;.*__schedule_\[k\] [0-9]+$')
b=$(weight "$off" ';main;waitB;.*__schedule_\[k\] [0-9]+$')
echo "offcpu: waitA $(ms "$a") ms, waitB $(ms "$b") ms (the workload measured $(ms "$truth_a") and $(ms "$truth_b") ms)"
# On failure, every block's stack: CI once had 7 of the 8 blocks (a waitB
# missing from the off-CPU and the wall graphs alike), not seen since.
stacks() { sed -E 's/.*;main;//' "$off" | cut -c1-240; }
near "$a" "$truth_a" 5 || fail "waitA off CPU $(ms "$a") ms, not $(ms "$truth_a") ms ±5%: $(stacks)"
near "$b" "$truth_b" 5 || fail "waitB off CPU $(ms "$b") ms, not $(ms "$truth_b") ms ±5%: $(stacks)"
near "$((a * 100 / b))" "$((truth_a * 100 / truth_b))" 5 || fail "waitA:waitB = $a:$b, not $truth_a:$truth_b (about 3:1) ±5%"
assert_absent "$off" 'burnC' "time on CPU in the off-CPU graph"
assert_absent "$off" 'bpf_prog_|bpf_trace_run' "ember's own BPF frames in off-CPU stacks"

wall=$TMP/out.wall.folded
wa=$(weight "$wall" ';main;waitA;')
wb=$(weight "$wall" ';main;waitB;')
wc=$(weight "$wall" ';main;burnC')
echo "wall: waitA $(ms "$wa") ms, waitB $(ms "$wb") ms, burnC $(ms "$wc") ms (measured $(ms "$truth_a"), $(ms "$truth_b"), $(ms "$truth_c"))"
near "$wa" "$truth_a" 5 || fail "wall: waitA $(ms "$wa") ms, not $(ms "$truth_a") ms ±5%"
near "$wb" "$truth_b" 5 || fail "wall: waitB $(ms "$wb") ms, not $(ms "$truth_b") ms ±5%"
near "$wc" "$truth_c" 10 || fail "wall: burnC $(ms "$wc") ms, not $(ms "$truth_c") ms ±10% (CPU time is sampled)"

cpu=$TMP/out.cpu-clock.folded
assert_contains "$cpu" ';main;burnC' "no burnC in the CPU graph"
# Entering and leaving the sleeps takes a little CPU, no more.
sleeping=$(weight "$cpu" ';main;wait[AB];')
(( sleeping * 100 <= $(total "$cpu") * 3 )) || fail "$sleeping CPU samples in the sleeping functions"

# pprof holds every event of a recording in one file, a sample type each.
"$EMBER" record -e cpu-clock,offcpu,wall -F 999 --no-java -o "$TMP/all.pb.gz" -- "$WORKLOADS/offcpu_waits" 1 100 \
	>/dev/null 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
[ ! -e "$TMP/all.offcpu.pb.gz" ] || fail "pprof output was split by event"
"$ROOT/build/pprof" -raw "$TMP/all.pb.gz" >"$TMP/raw" 2>&1 || fail "pprof cannot read it: $(head -3 "$TMP/raw")"
assert_contains "$TMP/raw" '^cpu-clock/count\[dflt\] cpu/nanoseconds offcpu/nanoseconds wall/nanoseconds$' \
	"pprof sample types: $(grep -A1 '^Samples:' "$TMP/raw")"
"$ROOT/build/pprof" -sample_index=offcpu -top "$TMP/all.pb.gz" >"$TMP/top" 2>&1
assert_contains "$TMP/top" 'waitA' "pprof -sample_index=offcpu does not show waitA"

# --min-block leaves out shorter blocks.
"$EMBER" record -e offcpu --min-block 200ms --no-java -o "$TMP/min.folded" -- "$WORKLOADS/offcpu_waits" 2 \
	>/dev/null 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/min.folded" ';main;waitA;' "--min-block 200ms dropped the 300 ms blocks"
assert_absent "$TMP/min.folded" ';main;waitB;' "--min-block 200ms kept the 100 ms blocks"
"$EMBER" record -e offcpu --min-block 2parsecs -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "a bad --min-block was accepted"
assert_contains "$TMP/err" "is not a duration"
"$EMBER" record -e offcpu,bogus -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "an unknown event was accepted"
assert_contains "$TMP/err" "unknown event 'bogus'"
true
