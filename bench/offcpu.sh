#!/usr/bin/env bash
# Off-CPU recording overhead: a blocking workload (tests/workloads/pingpong:
# pairs of threads passing a token through pipes, one pair per CPU) run
# alone and under `ember record -e offcpu -a` at its default settings, at
# two context-switch rates: heavy (20 us of work per turn, ~100k switches/s
# on 2 CPUs) and typical of a busy service (200 us, ~10k/s). ember takes a
# thread's stacks as it blocks, so its cost follows the switch rate.
# Prints round trips without / with ember, and the slowdown.
#
# Environment: BENCH_SECONDS (10) per run, REPS (2) runs per setting.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
EMBER=build/ember
WORK=build/workloads/pingpong
T=$(mktemp -d /tmp/ember-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

# run_with PROFILER WORK_ROUNDS -> "round_trips 0"
run_with() {
	local prof=$1 rounds=$2 n
	if [ "$prof" = ember ]; then
		"$EMBER" record -e offcpu -a --no-java -d $((SECS + 2)) -o "$T/off.folded" 2>"$T/ember.err" &
		sleep 1
	fi
	n=$("$WORK" "$SECS" "$(nproc)" "$rounds" | awk '/^requests/ { print $2 }')
	[ "$prof" = ember ] && wait
	echo "$n 0"
}

echo "bench: off-CPU overhead, $(nproc) CPUs, ${SECS}s x $REPS runs per setting, $(uname -r)"
printf '%-34s %14s %14s %10s %14s\n' "workload" "alone" "with ember" "slowdown" "switches/s"
for rounds in 20000 200000; do
	read -r alone _ < <(measure run_with none "$rounds")
	read -r with _ < <(measure run_with ember "$rounds")
	printf '%-34s %14s %14s %9s%% %14s\n' "pingpong, $rounds rounds per turn" "$alone" "$with" \
		"$(awk -v a="$alone" -v w="$with" 'BEGIN { printf "%.2f", (a - w) * 100 / a }')" \
		"$(awk -v a="$alone" -v s="$SECS" 'BEGIN { printf "%d", 2 * a / s }')"
done
grep -E '^  (offcpu|lost|untracked) ' "$T/ember.err" | sed 's/^/ember (last run):/'
