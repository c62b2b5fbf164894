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
