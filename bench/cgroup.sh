#!/usr/bin/env bash
# What --cgroup costs per CPU sample: the BPF time per sample
# (kernel.bpf_stats_enabled: run_time_ns / run_cnt of each process's
# perf_event program) of recordings at 999 Hz attached together to one run
# of a busy workload (tests/workloads/throughput, one thread per CPU) in a
# cgroup made for it, so that all see the same samples:
#   pid         -p WORKLOAD, the reference: the same samples pass its test
#   cgroup      --cgroup CG: the workload's cgroup
#   16-cgroups  --cgroup CG/last 15 times, then --cgroup CG: the most the
#               programs test, the matching one last
#   base-pid    with BASE_EMBER=path/to/another/build/ember, that build's
#               -p WORKLOAD: the cost of what changed in between (such as
#               the cgroup id every record carries)
# Samples of the host's other processes are turned away by each test, so
# system-wide recordings (-a, --cgroup .), whose time per sample depends on
# whatever else runs, are not compared. Each figure is the median of REPS
# runs with [min-max], then the median of each run's difference to pid.
#
# Environment: REPS (5) runs, WINDOW_SECONDS (10) per run, BASE_EMBER.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
. bench/lib.sh
WINDOW=${WINDOW_SECONDS:-10}
EMBER=build/ember
WORK=build/workloads/throughput
MOUNT=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
[ -n "$MOUNT" ] || { echo "bench: cgroup v2 is not mounted" >&2; exit 1; }
CG=ember-bench.$$
bpf_stats_bench 'rmdir "$MOUNT/$CG/last" "$MOUNT/$CG" 2>/dev/null || true'
mkdir "$MOUNT/$CG" "$MOUNT/$CG/last"
SIXTEEN=()
for _ in $(seq 15); do SIXTEEN+=(--cgroup "$CG/last"); done
SIXTEEN+=(--cgroup "$CG")
NAMES=(pid cgroup 16-cgroups)
[ -z "${BASE_EMBER:-}" ] || NAMES+=(base-pid)

# per_sample_run -> one line "NAME NS" per recording, all attached together.
per_sample_run() {
	local -A pid ns0 cnt0
	local name ns cnt work scope
	sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$MOUNT/$CG" "$WORK" $((WINDOW + 30)) >/dev/null &
	work=$!
	for name in "${NAMES[@]}"; do
		case $name in
		pid) scope=("$EMBER" record -p "$work") ;;
		cgroup) scope=("$EMBER" record --cgroup "$CG") ;;
		16-cgroups) scope=("$EMBER" record "${SIXTEEN[@]}") ;;
		base-pid) scope=("$BASE_EMBER" record -p "$work") ;;
		esac
		"${scope[@]}" --no-java -F 999 -o "$T/$name.folded" 2>"$T/$name.err" &
		pid[$name]=$!
	done
	for name in "${NAMES[@]}"; do until_sampling "${pid[$name]}"; done
	for name in "${NAMES[@]}"; do read -r "ns0[$name]" "cnt0[$name]" < <(bpf_time "${pid[$name]}"); done
	sleep "$WINDOW"
	for name in "${NAMES[@]}"; do
		read -r ns cnt < <(bpf_time "${pid[$name]}")
		echo "$name $(((ns - ns0[$name]) / (cnt - cnt0[$name])))"
	done
	for name in "${NAMES[@]}"; do kill -INT "${pid[$name]}"; done
	kill "$work"
	wait 2>/dev/null || true
}

echo "bench: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs of $WINDOW s"
echo "BPF time per sample at 999 Hz, $WORK in cgroup /$CG, all recordings attached together:"
for ((i = 0; i < REPS; i++)); do per_sample_run; done >"$T/per_sample"
# Each run's difference to pid, the reference, per recording.
awk '$1 == "pid" { ref[++n] = $2 } $1 != "pid" { run[$1, ++k[$1]] = $2; names[$1] }
     END { for (name in names) for (i = 1; i <= k[name]; i++) print name, run[name, i] - ref[i] }' \
	"$T/per_sample" >"$T/differences"
printf '  %-12s %20s %28s\n' recording "ns per sample" "difference to pid, ns"
for name in "${NAMES[@]}"; do
	read -r m lo hi < <(awk -v n="$name" '$1 == n { print $2 }' "$T/per_sample" | spread)
	diff=""
	[ "$name" = pid ] || read -r dm dlo dhi < <(awk -v n="$name" '$1 == n { print $2 }' "$T/differences" | spread)
	[ "$name" = pid ] || diff=$(printf '%+.0f [%+.0f..%+.0f]' "$dm" "$dlo" "$dhi")
	printf '  %-12s %20s %28s\n' "$name" "$(printf '%.0f [%.0f-%.0f]' "$m" "$lo" "$hi")" "$diff"
done
