#!/usr/bin/env bash
# What recording an event costs the workload, at ember's default settings,
# each event on a workload that exercises it, at two rates:
#   offcpu  tests/workloads/pingpong: pairs of threads passing a token
#           through pipes (one pair per CPU); every turn blocks twice.
#           ember takes a thread's stacks as it blocks, so its cost follows
#           the context-switch rate: heavy (20 us of work per turn, ~100k
#           switches/s on 2 CPUs) and typical of a busy service (200 us).
#           With --waker, each wakeup of a blocked thread also takes the
#           waker's stacks, and the record carries both.
#   malloc  tests/workloads/alloc_service: one thread per CPU, each request
#           allocating and freeing four buffers. Every allocator call takes
#           a uprobe; stacks are walked once per 512 KiB sampled. Then with
#           buffers 256 times larger, over half of them mapped and unmapped
#           by malloc (about 2.3 mmap calls per request): each mmap takes a
#           uprobe too (ember leaves malloc's own mmaps out).
# Prints requests completed alone / under `ember record -a OPTIONS`, the
# slowdown, and the event rate.
#
# Environment: BENCH_SECONDS (10) per run, REPS (2) runs per setting.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
EMBER=build/ember
T=$(mktemp -d /tmp/ember-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

# run_with "OPTIONS"|none WORKLOAD ARGS... -> "requests 0"
run_with() {
	local options=$1 n
	shift
	if [ "$options" != none ]; then
		# shellcheck disable=SC2086 # the options are words
		"$EMBER" record $options -a --no-java -d $((SECS + 2)) -o "$T/out.folded" 2>"$T/err" &
		sleep 1
	fi
	n=$("$@" | awk '/^requests/ { print $2 }')
	[ "$options" = none ] || wait
	echo "$n 0"
}

echo "bench: event overhead, $(nproc) CPUs, ${SECS}s x $REPS runs per setting, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %-44s %12s %12s %9s %16s\n' options workload alone "with ember" slowdown "rate"
row() { # OPTIONS LABEL RATE_PER_REQUEST RATE_UNIT WORKLOAD ARGS...
	local options=$1 label=$2 per=$3 unit=$4 alone with
	shift 4
	read -r alone _ < <(measure run_with none "$@")
	read -r with _ < <(measure run_with "$options" "$@")
	printf '%-20s %-44s %12s %12s %8s%% %16s\n' "$options" "$label" "$alone" "$with" \
		"$(awk -v a="$alone" -v w="$with" 'BEGIN { printf "%.2f", (a - w) * 100 / a }')" \
		"$(awk -v a="$alone" -v s="$SECS" -v p="$per" 'BEGIN { printf "%d", p * a / s }') $unit"
}
for options in "-e offcpu" "-e offcpu --waker"; do
	row "$options" "pingpong, 20 us per turn" 2 switches/s build/workloads/pingpong "$SECS" "$(nproc)" 20000
	row "$options" "pingpong, 200 us per turn" 2 switches/s build/workloads/pingpong "$SECS" "$(nproc)" 200000
done
row "-e malloc" "alloc_service, 20 us per request" 8 calls/s build/workloads/alloc_service "$SECS" 20000
row "-e malloc" "alloc_service, 200 us per request" 8 calls/s build/workloads/alloc_service "$SECS" 200000
row "-e malloc" "alloc_service, 20 us per request, mmap'd" 2.3 mmaps/s build/workloads/alloc_service "$SECS" 20000 8
