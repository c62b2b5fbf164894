#!/usr/bin/env bash
# What taking stacks costs (issue 13): ember's frame-pointer walk
# (--unwind fp) and its CFI unwinder (--unwind cfi) beside their peers, on
# busy workloads:
#   1. BPF time per sample (kernel.bpf_stats_enabled: run_time_ns / run_cnt
#      of each process's perf_event programs) of ember fp, ember cfi and the
#      bpftrace reference `profile:hz:999 { @[kstack, ustack] = count(); }`,
#      all attached system-wide at 999 Hz to the same run, with their ratios
#      to bpftrace (per run, then the median); on tests/workloads/throughput
#      (one thread per CPU, a short loop) and on a deep random call graph
#      (tests/workloads/unwind/call_graph.c: 8 to 96 calls, thousands of
#      stacks), built with frame pointers and without. On a build without
#      them, bpftrace's (and ember fp's) walks stop after a frame or two:
#      ember cfi is compared with bpftrace on the frame-pointer build too.
#   2. The workload's slowdown at 99 and 999 Hz under ember fp, ember cfi and
#      `perf record --call-graph dwarf -e cpu-clock`, system-wide, and what
#      each needs after the stop to give its result (ember: the written
#      profile; perf: the end of perf record and `perf report` of its file,
#      where perf does its unwinding). "total" adds that time, on one CPU,
#      to the work lost during the run: the cost as a share of the
#      workload's CPU time.
# Every figure is the median of REPS runs, with [min-max].
#
# Environment: BENCH_SECONDS (10) per run, REPS (5) runs per setting,
# WINDOW_SECONDS (10) per BPF-time run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
. bench/lib.sh
WINDOW=${WINDOW_SECONDS:-10}
EMBER=build/ember
WORK=build/workloads/throughput
REFERENCE='profile:hz:999 { @[kstack, ustack] = count(); }'
CPUS=$(nproc)
bpf_stats_bench
now_ms() { echo $(($(date +%s%N) / 1000000)); }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", 100 * (a - b) / a }'; }
fmt_spread() { awk -v m="$1" -v lo="$2" -v hi="$3" -v f="$4" 'BEGIN { printf f " [" f "-" f "]", m, lo, hi }'; }

# ember's walks: frame pointers (the kernel's walk) and its CFI unwinder.
declare -A UNWIND=([fp]="--unwind fp" [cfi]="--unwind cfi")
WALKS=(fp cfi)
command -v bpftrace >/dev/null || { echo "bench: no bpftrace (the reference): install it with scripts/deps.sh bench" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: no perf: install it with scripts/deps.sh bench" >&2; exit 1; }

# per_sample_run WORKLOAD -> one line "NAME NS" per profiler: its BPF time
# per sample over WINDOW seconds, all attached together to WORKLOAD (its
# first argument: seconds to run).
per_sample_run() {
	local -A pid ns0 cnt0
	local name ns cnt work
	"$1" $((WINDOW + 30)) "$CPUS" >/dev/null &
	work=$!
	for name in "${WALKS[@]}"; do
		# shellcheck disable=SC2086 # the options are words
		"$EMBER" record -a --no-java -F 999 ${UNWIND[$name]} -o "$T/$name.folded" 2>"$T/$name.err" &
		pid[ember-$name]=$!
	done
	bpftrace -e "$REFERENCE" >/dev/null 2>"$T/bpftrace.err" &
	pid[bpftrace]=$!
	for name in "${!pid[@]}"; do until_sampling "${pid[$name]}"; done
	for name in "${!pid[@]}"; do read -r "ns0[$name]" "cnt0[$name]" < <(bpf_time "${pid[$name]}"); done
	sleep "$WINDOW"
	for name in "${!pid[@]}"; do
		read -r ns cnt < <(bpf_time "${pid[$name]}")
		echo "$name $(((ns - ns0[$name]) / (cnt - cnt0[$name])))"
	done
	# bpftrace prints its map as it exits, resolving every stack of the
	# host (minutes): its figures are read already.
	kill -KILL "${pid[bpftrace]}"
	for name in "${WALKS[@]}"; do kill -INT "${pid[ember-$name]}"; done
	kill "$work"
	wait 2>/dev/null || true
}

requests() { awk '/^requests/ { print $2 }' "$1"; }

# slowdown_run PROFILER FREQ -> "requests after_stop_ms"
slowdown_run() {
	local prof=$1 freq=$2 pid out=$T/work.out t0
	# shellcheck disable=SC2086 # the options are words
	case $prof in
	none) "$WORK" "$SECS" >"$out"; echo "$(requests "$out") 0"; return ;;
	ember-*) "$EMBER" record -a --no-java -F "$freq" ${UNWIND[${prof#ember-}]} -o "$T/ember.html" 2>"$T/ember.err" & ;;
	perf) perf record -q -a -e cpu-clock --call-graph dwarf -F "$freq" -o "$T/perf.data" 2>"$T/perf.err" & ;;
	esac
	pid=$!
	sleep 1 # let the profiler attach before the workload starts
	"$WORK" "$SECS" >"$out"
	t0=$(now_ms)
	kill -INT $pid
	wait $pid || true
	[ "$prof" != perf ] || perf report -i "$T/perf.data" --stdio >/dev/null 2>&1
	echo "$(requests "$out") $(($(now_ms) - t0))"
}

echo "bench: $CPUS CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per setting"
echo
echo "BPF time per sample, system-wide at 999 Hz, $WINDOW s of each workload, all attached together:"
for work in "$WORK" build/workloads/call_graph-fp build/workloads/call_graph-nofp; do
	for ((i = 0; i < REPS; i++)); do per_sample_run "$work"; done >"$T/per_sample.${work##*/}"
	awk '$1 == "bpftrace" { ref[++n] = $2 } $1 != "bpftrace" { run[$1, ++k[$1]] = $2; names[$1] }
	     END { for (name in names) for (i = 1; i <= k[name]; i++) print name, run[name, i], run[name, i] / ref[i] }' \
		"$T/per_sample.${work##*/}" >"$T/ratios.${work##*/}"
done
printf '  %-16s %-10s %24s %26s\n' workload program "ns per sample" "ratio to bpftrace"
for work in "$WORK" build/workloads/call_graph-fp build/workloads/call_graph-nofp; do
	for name in "${WALKS[@]/#/ember-}" bpftrace; do
		read -r m lo hi < <(awk -v n="$name" '$1 == n { print $2 }' "$T/per_sample.${work##*/}" | spread)
		if [ "$name" = bpftrace ]; then
			ratio=1
		else
			read -r rm rlo rhi < <(awk -v n="$name" '$1 == n { print $3 }' "$T/ratios.${work##*/}" | spread)
			ratio=$(fmt_spread "$rm" "$rlo" "$rhi" %.2f)
		fi
		printf '  %-16s %-10s %24s %26s\n' "${work##*/}" "$name" "$(fmt_spread "$m" "$lo" "$hi" %d)" "$ratio"
	done
done
# ember's CFI walk of the build without frame pointers against bpftrace's
# whole walk of the build with them: the same stacks, walked to the end.
read -r rm rlo rhi < <(paste <(awk '$1 == "ember-cfi" { print $2 }' "$T/per_sample.call_graph-nofp") \
	<(awk '$1 == "bpftrace" { print $2 }' "$T/per_sample.call_graph-fp") | awk '{ print $1 / $2 }' | spread)
echo "  ember-cfi on call_graph-nofp against bpftrace on call_graph-fp (runs paired in order): $(fmt_spread "$rm" "$rlo" "$rhi" %.2f)"

echo
echo "Workload slowdown, system-wide, $SECS s runs of $WORK ($CPUS threads):"
profilers=(none "${WALKS[@]/#/ember-}" perf)
for freq in 99 999; do
	for ((i = 0; i < REPS; i++)); do
		for prof in "${profilers[@]}"; do echo "$prof $(slowdown_run "$prof" "$freq")"; done
	done >"$T/slowdown.$freq"
done
printf '  %-5s %-10s %30s %10s %24s %8s\n' Hz profiler requests slowdown "after the stop, ms" total
for freq in 99 999; do
	read -r base blo bhi < <(awk '$1 == "none" { print $2 }' "$T/slowdown.$freq" | spread)
	printf '  %-5s %-10s %30s %9s%% %24s %8s\n' "$freq" none "$(fmt_spread "$base" "$blo" "$bhi" %d)" \
		"±$(awk -v m="$base" -v lo="$blo" -v hi="$bhi" 'BEGIN { d = (hi - m > m - lo ? hi - m : m - lo); printf "%.2f", 100 * d / m }')" - -
	for prof in "${profilers[@]:1}"; do
		read -r r rlo rhi < <(awk -v p="$prof" '$1 == p { print $2 }' "$T/slowdown.$freq" | spread)
		read -r ms mlo mhi < <(awk -v p="$prof" '$1 == p { print $3 }' "$T/slowdown.$freq" | spread)
		total=$(awk -v b="$base" -v r="$r" -v ms="$ms" -v s="$SECS" -v c="$CPUS" \
			'BEGIN { printf "%.2f", 100 * ((b - r) / b + ms / 1000 / (s * c)) }')
		printf '  %-5s %-10s %30s %9s%% %24s %7s%%\n' "$freq" "$prof" "$(fmt_spread "$r" "$rlo" "$rhi" %d)" \
			"$(pct "$base" "$r")" "$(fmt_spread "$ms" "$mlo" "$mhi" %d)" "$total"
	done
done
echo
echo "  slowdown: requests lost against the median run without a profiler (its spread, ± above, is the noise);"
echo "  total: that, plus the time after the stop on one CPU, as a share of the workload's $((SECS * CPUS)) CPU-seconds."
