#!/usr/bin/env bash
# ember record vs perf record -g + perf script + FlameGraph, on the same
# CPU-bound workload (tests/workloads/throughput, one thread per CPU),
# system-wide at 99 and 999 Hz. Prints, as ratios ember/perf:
#   - workload slowdown: requests completed without a profiler / with it
#   - stop-to-flamegraph: from the stop signal to a finished flamegraph
# then the stop-to-flamegraph of both after a MIXED_SECONDS capture at 999
# Hz beside bench/mixed_load.sh (many binaries, processes and JVMs: the
# naming that a CPU-bound loop of one binary never tests), and ember's peak
# RSS over an RSS_SECONDS capture at 999 Hz.
#
# Environment: BENCH_SECONDS (10) per run, REPS (2) runs per setting,
# MIXED_SECONDS (30), RSS_SECONDS (60), FLAMEGRAPH_DIR: a checkout of FlameGraph
# (stackcollapse-perf.pl, flamegraph.pl); without it perf's pipeline is
# timed up to `perf script` only, which flatters perf.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RSS_SECS=${RSS_SECONDS:-60}
MIXED_SECS=${MIXED_SECONDS:-30}
FG=${FLAMEGRAPH_DIR:-}
EMBER=build/ember
WORK=build/workloads/throughput
T=$(mktemp -d /tmp/ember-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

if [ -n "$FG" ] && [ -x "$FG/flamegraph.pl" ] && [ -x "$FG/stackcollapse-perf.pl" ]; then
	perf_pipeline="perf script | stackcollapse-perf.pl | flamegraph.pl"
else
	FG=
	perf_pipeline="perf script only"
	echo "bench: FLAMEGRAPH_DIR not set (or lacks the scripts): perf's stop-to-flamegraph is timed to 'perf script' only."
	echo "       get them with: git clone https://github.com/brendangregg/FlameGraph and set FLAMEGRAPH_DIR"
fi

requests() { awk '/^requests/ { print $2 }' "$1"; }

# start PROFILER FREQ: starts it system-wide in the background (pid in $prof_pid).
start() {
	case $1 in
	ember) "$EMBER" record -a -F "$2" -o "$T/ember.html" 2>"$T/ember.err" & ;;
	perf) perf record -q -a -g -F "$2" -o "$T/perf.data" 2>"$T/perf.err" & ;;
	esac
	prof_pid=$!
	sleep 1 # let the profiler attach before the workload starts
}

# stop PROFILER: sets stop_ms, from its stop signal to a finished flamegraph.
# Not in a subshell: the profiler must be its child to be waited for.
stop() {
	local t0; t0=$(now_ms)
	kill -INT "$prof_pid"
	wait "$prof_pid" || true
	if [ "$1" = perf ]; then
		if [ -n "$FG" ]; then
			perf script -i "$T/perf.data" 2>/dev/null | "$FG/stackcollapse-perf.pl" | "$FG/flamegraph.pl" >"$T/perf.svg"
		else
			perf script -i "$T/perf.data" >/dev/null 2>&1
		fi
	fi
	stop_ms=$(($(now_ms) - t0))
}

# run_with PROFILER FREQ -> prints "requests stop_ms"
run_with() {
	local out=$T/work.out
	if [ "$1" = none ]; then
		"$WORK" "$SECS" >"$out"
		echo "$(requests "$out") 0"
		return
	fi
	start "$1" "$2"
	"$WORK" "$SECS" >"$out"
	stop "$1"
	echo "$(requests "$out") $stop_ms"
}

# mixed PROFILER -> prints the stop_ms of a MIXED_SECS capture at 999 Hz beside bench/mixed_load.sh.
mixed() {
	start "$1" 999
	bench/mixed_load.sh "$MIXED_SECS" >/dev/null 2>&1
	stop "$1"
	echo "$stop_ms"
}

echo "bench: $(nproc) CPUs, workload $SECS s x $REPS runs per setting, $(uname -r)"
read -r base _ < <(measure run_with none 0)
echo "baseline: $base requests"
printf '\n%-6s %-8s %12s %10s %16s\n' freq profiler requests slowdown stop-to-graph
for freq in 99 999; do
	read -r er es < <(measure run_with ember "$freq")
	read -r pr ps < <(measure run_with perf "$freq")
	eslow=$(awk -v b="$base" -v r="$er" 'BEGIN { printf "%.2f", 100 * (b - r) / b }')
	pslow=$(awk -v b="$base" -v r="$pr" 'BEGIN { printf "%.2f", 100 * (b - r) / b }')
	printf '%-6s %-8s %12s %9s%% %13s ms\n' "$freq" ember "$er" "$eslow" "$es"
	printf '%-6s %-8s %12s %9s%% %13s ms\n' "$freq" perf "$pr" "$pslow" "$ps"
	awk -v e="$er" -v p="$pr" -v es="$es" -v ps="$ps" -v f="$freq" -v how="$perf_pipeline" 'BEGIN {
		printf "%-6s ratio    throughput ember/perf %.3f; stop-to-flamegraph perf/ember %.1fx faster (%s)\n",
			f, e / p, ps / (es > 0 ? es : 1), how }'
done

echo
echo "stop to finished flamegraph, system-wide at 999 Hz for $MIXED_SECS s beside bench/mixed_load.sh (compiler, xz, Python, javac), $REPS runs each:"
for ((r = 0; r < REPS; r++)); do
	echo "ember $(mixed ember)"
	echo "perf $(mixed perf)"
done >"$T/mixed"
em=$(awk '$1 == "ember" { print $2 }' "$T/mixed" | spread)
pm=$(awk '$1 == "perf" { print $2 }' "$T/mixed" | spread)
read -r emed emin emax <<<"$em"
read -r pmed pmin pmax <<<"$pm"
printf '  ember %s ms [%s-%s], perf %s ms [%s-%s] (%s): perf/ember %.1fx (target: 30x)\n' \
	"$emed" "$emin" "$emax" "$pmed" "$pmin" "$pmax" "$perf_pipeline" "$(awk -v e="$emed" -v p="$pmed" 'BEGIN { print p / (e > 0 ? e : 1) }')"

echo
echo "ember peak RSS, system-wide at 999 Hz for $RSS_SECS s:"
"$WORK" $((RSS_SECS + 3)) >/dev/null &
work=$!
/usr/bin/time -f '%M' -o "$T/rss" "$EMBER" record -a -F 999 -d "$RSS_SECS" -o "$T/rss.html" 2>"$T/rss.err"
wait $work
samples=$(awk '$1 == "samples" { print $2 }' "$T/rss.err")
echo "  $(( $(cat "$T/rss") / 1024 )) MB peak RSS, $samples samples (target: < 100 MB)"
