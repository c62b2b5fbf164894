#!/usr/bin/env bash
# ember record vs perf record -g + perf script + FlameGraph, on the same
# CPU-bound workload (tests/workloads/throughput, one thread per CPU),
# system-wide at 99 and 999 Hz. Prints, as ratios ember/perf:
#   - workload slowdown: requests completed without a profiler / with it
#   - stop-to-flamegraph: from the stop signal to a finished flamegraph
# and ember's peak RSS over an RSS_SECONDS capture at 999 Hz.
#
# Environment: BENCH_SECONDS (10) per run, REPS (2) runs per setting,
# RSS_SECONDS (60), FLAMEGRAPH_DIR: a checkout of FlameGraph
# (stackcollapse-perf.pl, flamegraph.pl); without it perf's pipeline is
# timed up to `perf script` only, which flatters perf.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RSS_SECS=${RSS_SECONDS:-60}
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

# run_with PROFILER FREQ -> prints "requests stop_ms"
run_with() {
	local prof=$1 freq=$2 pid out=$T/work.out
	case $prof in
	none) "$WORK" "$SECS" >"$out"; echo "$(requests "$out") 0"; return ;;
	ember) "$EMBER" record -a -F "$freq" -o "$T/ember.html" 2>"$T/ember.err" & ;;
	perf) perf record -q -a -g -F "$freq" -o "$T/perf.data" 2>"$T/perf.err" & ;;
	esac
	pid=$!
	sleep 1 # let the profiler attach before the workload starts
	"$WORK" "$SECS" >"$out"
	local t0; t0=$(now_ms)
	kill -INT $pid
	wait $pid || true
	if [ "$prof" = perf ]; then
		if [ -n "$FG" ]; then
			perf script -i "$T/perf.data" 2>/dev/null | "$FG/stackcollapse-perf.pl" | "$FG/flamegraph.pl" >"$T/perf.svg"
		else
			perf script -i "$T/perf.data" >/dev/null 2>&1
		fi
	fi
	echo "$(requests "$out") $(( $(now_ms) - t0 ))"
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
echo "ember peak RSS, system-wide at 999 Hz for $RSS_SECS s:"
"$WORK" $((RSS_SECS + 3)) >/dev/null &
work=$!
/usr/bin/time -f '%M' -o "$T/rss" "$EMBER" record -a -F 999 -d "$RSS_SECS" -o "$T/rss.html" 2>"$T/rss.err"
wait $work
samples=$(awk '$1 == "samples" { print $2 }' "$T/rss.err")
echo "  $(( $(cat "$T/rss") / 1024 )) MB peak RSS, $samples samples (target: < 100 MB)"
