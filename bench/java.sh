#!/usr/bin/env bash
# Java: the throughput cost of profiling a CPU-bound JVM (bench/java/
# Throughput.java, one thread per CPU) with ember at 99 and 999 Hz, next to
# async-profiler (-e cpu) at the same rates when ASYNC_PROFILER_DIR points at
# a build of it (lib/libasyncProfiler.so); and the share of Java samples
# whose stack reaches the thread root ("complete"), ember vs async-profiler.
# Both profile from JVM start-up, with the JVM's default flags (no
# -XX:+PreserveFramePointer: ember steps through JIT frames by the sizes its
# agent publishes, async-profiler by HotSpot's own structures).
# Environment: BENCH_SECONDS (10), REPS (2), ASYNC_PROFILER_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
AP=${ASYNC_PROFILER_DIR:-}
[ -n "$AP" ] && [ ! -f "$AP/lib/libasyncProfiler.so" ] && { echo "bench: no $AP/lib/libasyncProfiler.so" >&2; AP=; }
[ -n "$AP" ] || echo "bench: ASYNC_PROFILER_DIR not set: ember figures only"
T=$(mktemp -d /tmp/ember-jbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
javac -d "$T/classes" bench/java/Throughput.java
JAVA=(java -cp "$T/classes")

# run PROFILER FREQ -> "requests complete_permille"
run() {
	local prof=$1 freq=$2 out=$T/run.out
	case $prof in
	none) "${JAVA[@]}" Throughput "$SECS" >"$out" ;;
	ember) build/ember record -F "$freq" -o "$T/ember.folded" -- "${JAVA[@]}" Throughput "$SECS" >"$out" 2>"$T/ember.err" ;;
	async-profiler)
		local interval=$((1000000000 / freq))
		"${JAVA[@]}" -agentpath:"$AP/lib/libasyncProfiler.so=start,event=cpu,interval=$interval,ann,file=$T/ap.folded,collapsed" \
			Throughput "$SECS" >"$out" 2>/dev/null ;;
	esac
	local requests complete=0
	requests=$(awk '/^requests/ { print $2 }' "$out")
	case $prof in
	# Java samples: stacks through Throughput's methods; complete: they
	# also reach the thread's native entry.
	ember) complete=$(awk '/Throughput\.serve_/ { j += $NF; if (/thread_native_entry|start_thread/) c += $NF }
		END { print j ? int(1000 * c / j) : 0 }' "$T/ember.folded") ;;
	# async-profiler starts Java threads' stacks at Thread.run and marks
	# walks it could not finish with [unknown...] or [break...] frames.
	async-profiler) complete=$(awk '/Throughput\.serve/ { j += $NF; if (/^java[\/.]lang[\/.]Thread\.run/ && !/\[(unknown|break)/) c += $NF }
		END { print j ? int(1000 * c / j) : 0 }' "$T/ap.folded") ;;
	esac
	echo "$requests $complete"
}


echo "bench: $(nproc) CPUs, $SECS s x $REPS runs per setting, $(java -version 2>&1 | head -1)"
read -r base _ < <(measure run none 0)
echo "baseline: $base requests"
printf '\n%-6s %-15s %12s %10s %10s\n' freq profiler requests slowdown complete
for freq in 99 999; do
	profilers=(ember)
	[ -n "$AP" ] && profilers+=(async-profiler)
	for prof in "${profilers[@]}"; do
		read -r r c < <(measure run "$prof" "$freq")
		awk -v f="$freq" -v p="$prof" -v r="$r" -v b="$base" -v c="$c" 'BEGIN {
			printf "%-6s %-15s %12d %9.2f%% %9.1f%%\n", f, p, r, 100 * (b - r) / b, c / 10 }'
	done
done
