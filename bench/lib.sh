# Shared by the bench scripts: settings, and averaging repeated runs.

[ "$(id -u)" = 0 ] || { echo "bench: run as root (it loads BPF programs)" >&2; exit 1; }
SECS=${BENCH_SECONDS:-10} # seconds per run
REPS=${REPS:-2}           # runs per setting

# measure CMD ARGS...: runs `CMD ARGS` REPS times; each run prints two
# numbers; prints their integer means.
measure() {
	local sum_a=0 sum_b=0 a b
	for ((i = 0; i < REPS; i++)); do
		read -r a b < <("$@")
		sum_a=$((sum_a + a)) sum_b=$((sum_b + b))
	done
	echo "$((sum_a / REPS)) $((sum_b / REPS))"
}

# spread: reads numbers, one a line; prints their median, min and max.
spread() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (!NR) { print "0 0 0"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		print m, v[1], v[NR] }'
}

# bpf_time PID -> "run_time_ns run_cnt" of the process's perf_event programs
# (BPF_PROG_TYPE_PERF_EVENT, 7), each program once. Each fd's info starts
# with its pos; fds that close while they are read are left out. Needs
# kernel.bpf_stats_enabled=1.
bpf_time() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null |
		awk '/^pos:/ { type = 0 } /^prog_type:/ { type = $2 } /^prog_id:/ { id = $2 } /^run_time_ns:/ { ns = $2 }
		     /^run_cnt:/ && type == 7 && !(id in seen) { seen[id]; sum_ns += ns; sum_cnt += $2 }
		     END { print sum_ns + 0, sum_cnt + 0 }'
}

# until_sampling PID: waits until the process's programs have run.
until_sampling() {
	local ns cnt
	until read -r ns cnt < <(bpf_time "$1") && [ "$cnt" -gt 0 ]; do
		kill -0 "$1" 2>/dev/null || { echo "bench: profiler $1 exited before sampling" >&2; exit 1; }
		sleep 0.1
	done
}

# bpf_stats_bench [CMD]: for a bench that reads BPF run times: a scratch
# directory $T, kernel.bpf_stats_enabled on, and at exit CMD (its own
# clean-up, if any), every background job killed, the sysctl as it was and
# $T removed.
bpf_stats_bench() {
	T=$(mktemp -d /tmp/ember-bench.XXXXXX)
	BPF_STATS_BEFORE=$(sysctl -n kernel.bpf_stats_enabled)
	BENCH_CLEANUP=${1:-}
	trap 'jobs -p | xargs -r kill -KILL 2>/dev/null || true; wait 2>/dev/null || true; eval "$BENCH_CLEANUP"
	      sysctl -qw kernel.bpf_stats_enabled="$BPF_STATS_BEFORE"; rm -rf "$T"' EXIT
	sysctl -qw kernel.bpf_stats_enabled=1
}
