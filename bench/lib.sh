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
