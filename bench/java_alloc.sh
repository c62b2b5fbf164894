#!/usr/bin/env bash
# Java allocation and lock profiling: the cost of the agent's alloc, live
# and lock events at their default settings (alloc: one sample per 512 KiB;
# lock: waits under 10 us sampled, one per 10 us of them).
#   alloc: tests/java/AllocRatio.java at WORK=0 (one thread allocating ~10
#          GB/s: the worst case, ~20k samples/s) and WORK=100 (~1 GB/s,
#          nearer a busy service)
#   lock:  tests/java/Contention.java, two threads on one monitor with
#          ~20 us critical sections, and eight with tiny ones
# alloc,live,nogc is what `record -e alloc --live --min-age` runs: the
# same following of objects (the ages come from the A lines' times, which
# every stream has), without the full GC at the end.
# Each runs without the agent, with the agent writing only its code map
# (what any `ember record` of a JVM costs), and with the events on, the
# settings interleaved run by run. Figures against the run without the
# agent: throughput lost, CPU time (user + system, all of the JVM's
# threads) per unit of work added, and the time one event costs (the
# throughput lost over the events a second). Rows at higher event rates
# (alloc=65536; lock=0, every wait) make that cost stand out of the noise
# of a shared machine (+-3% run to run here): with it, the overhead of any
# allocation rate follows (one sample per 512 KiB allocated).
# Fixed 1 GiB heap, pre-touched. Environment: BENCH_SECONDS (10), REPS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
T=$(mktemp -d /tmp/ember-jallocbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
AGENT=$PWD/build/libember-agent.so
javac -d "$T/classes" tests/java/AllocRatio.java tests/java/Contention.java
JAVA=(java -Xms1g -Xmx1g -XX:+AlwaysPreTouch -cp "$T/classes")

# run OPTIONS CLASS ARGS... -> "work cpu_ms events": the workload's count
# (rounds or entries), the JVM's CPU time, the A or C lines the agent wrote.
run() {
	local opts=$1 agent=()
	shift
	rm -f "$T/map"
	[ "$opts" = none ] || agent=(-agentpath:"$AGENT=out=$T/map${opts:+,$opts}")
	local TIMEFORMAT='%3U %3S'
	{ time "${JAVA[@]}" "${agent[@]}" "$@" >"$T/out"; } 2>"$T/time"
	local events=0
	[ -f "$T/map" ] && events=$(grep -c '^[AC] ' "$T/map" || true)
	awk -v e="$events" 'NR == FNR { n = $2; next } { printf "%.0f %.0f %.0f\n", n, 1000 * ($1 + $2), e }' "$T/out" "$T/time"
}

# bench LABEL "OPTIONS..." CLASS ARGS...: interleaved runs, one row per option set.
bench() {
	local label=$1 settings=($2) i s n c e
	shift 2
	declare -A work=() cpu=() events=()
	for ((i = 0; i < REPS; i++)); do
		for s in none "${settings[@]}"; do
			read -r n c e < <(run "$([ "$s" = code-map ] && echo "" || echo "$s")" "$@")
			work[$s]=$((${work[$s]:-0} + n)) cpu[$s]=$((${cpu[$s]:-0} + c)) events[$s]=$((${events[$s]:-0} + e))
		done
	done
	for s in none "${settings[@]}"; do
		awk -v l="$label" -v s="$s" -v n="${work[$s]}" -v c="${cpu[$s]}" -v e="${events[$s]}" \
			-v bn="${work[none]}" -v bc="${cpu[none]}" -v secs="$((SECS * REPS))" -v reps="$REPS" 'BEGIN {
			if (s == "none") { printf "%-30s %-16s %12.0f %10s %9s %9s %9s\n", l, s, n / reps, "-", "-", "-", "-"; exit }
			lost = (bn - n) / bn
			printf "%-30s %-16s %12.0f %9.2f%% %8.2f%% %9.0f %9s\n", l, s, n / reps, 100 * lost,
				100 * (c / n - bc / bn) / (bc / bn), e / secs, e ? sprintf("%.2f", 1e6 * lost / (e / secs)) : "-" }'
	done
}

echo "bench: $(nproc) CPUs, $SECS s x $REPS runs per setting, $(java -version 2>&1 | head -1)"
printf '\n%-30s %-16s %12s %10s %9s %9s %9s\n' workload agent "work/run" throughput cpu/work events/s us/event
bench "AllocRatio (work 0)" "code-map alloc alloc,live alloc,live,nogc alloc=65536" AllocRatio "$SECS" 0
bench "AllocRatio (work 100)" "code-map alloc alloc,live alloc,live,nogc" AllocRatio "$SECS" 100
bench "Contention (2 x 20000/2000)" "code-map lock" Contention "$SECS" 20000 2000 2
bench "Contention (8 x 200/200)" "code-map lock lock=0" Contention "$SECS" 200 200 8
