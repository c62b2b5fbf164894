#!/usr/bin/env bash
# What recording an event costs the workload, at ember's default settings,
# each event on a workload that exercises it, at two rates:
#   offcpu  tests/workloads/pingpong: pairs of threads passing a token
#           through pipes (one pair per CPU); every turn blocks twice.
#           ember takes a thread's stacks as it blocks, so its cost follows
#           the context-switch rate: heavy (20 us of work per turn, ~100k
#           switches/s on 2 CPUs) and typical of a busy service (200 us).
#   malloc  tests/workloads/alloc_service: one thread per CPU, each request
#           allocating and freeing four buffers. Every allocator call takes
#           a uprobe; stacks are walked once per 512 KiB sampled.
# Prints requests completed alone / under `ember record -a -e EVENT`, the
# slowdown, and the event rate.
#
# Environment: BENCH_SECONDS (10) per run, REPS (2) runs per setting.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
EMBER=build/ember
T=$(mktemp -d /tmp/ember-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

# run_with EVENT|none WORKLOAD ARGS... -> "requests 0"
run_with() {
	local event=$1 n
	shift
	if [ "$event" != none ]; then
		"$EMBER" record -e "$event" -a --no-java -d $((SECS + 2)) -o "$T/$event.folded" 2>"$T/$event.err" &
		sleep 1
	fi
	n=$("$@" | awk '/^requests/ { print $2 }')
	[ "$event" = none ] || wait
	echo "$n 0"
}

echo "bench: event overhead, $(nproc) CPUs, ${SECS}s x $REPS runs per setting, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-40s %12s %12s %9s %16s\n' event workload alone "with ember" slowdown "rate"
row() { # EVENT LABEL RATE_PER_REQUEST RATE_UNIT WORKLOAD ARGS...
	local event=$1 label=$2 per=$3 unit=$4 alone with
	shift 4
	read -r alone _ < <(measure run_with none "$@")
	read -r with _ < <(measure run_with "$event" "$@")
	printf '%-8s %-40s %12s %12s %8s%% %16s\n' "$event" "$label" "$alone" "$with" \
		"$(awk -v a="$alone" -v w="$with" 'BEGIN { printf "%.2f", (a - w) * 100 / a }')" \
		"$(awk -v a="$alone" -v s="$SECS" -v p="$per" 'BEGIN { printf "%d", p * a / s }') $unit"
}
row offcpu "pingpong, 20 us per turn" 2 switches/s build/workloads/pingpong "$SECS" "$(nproc)" 20000
row offcpu "pingpong, 200 us per turn" 2 switches/s build/workloads/pingpong "$SECS" "$(nproc)" 200000
row malloc "alloc_service, 20 us per request" 8 calls/s build/workloads/alloc_service "$SECS" 20000
row malloc "alloc_service, 200 us per request" 8 calls/s build/workloads/alloc_service "$SECS" 200000
