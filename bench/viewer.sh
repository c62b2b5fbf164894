#!/usr/bin/env bash
# The flamegraph at fleet scale: folded profiles made by
# bench/fleet_profile.mjs (one service merged over an hour: unique stacks
# sharing only their first frames, long Java and C++ names, depth 8-150,
# mean 37), at 100,000 stacks and, with SIZES, more. For each size:
# the time and peak memory of `ember convert` to HTML, and of
# async-profiler's converter when ASYNC_PROFILER_DIR is given (and
# FlameGraph's flamegraph.pl, FLAMEGRAPH_DIR, at 100,000 stacks only);
# the page's size; then its speed in headless Chromium (bench/viewer.mjs):
# first paint and its parts, search, zoom.
# Then time: a day-long recording made by bench/day_profile.mjs (pprof with
# each sample's time: HOURS at 19 Hz on 2 CPUs), converted to a page with
# a heatmap: its size, first paint and the redraw of a range picked on it.
# (async-profiler's heatmap reads only its own JFR recordings: no peer.)
# Environment: SIZES (100000), RUNS (5), HOURS (24), ASYNC_PROFILER_DIR (a
# built tree: its bin/jfrconv), FLAMEGRAPH_DIR (holding flamegraph.pl).
# Issue 17's targets: at 100,000 stacks a page of at most 12 MB, first paint
# 700 ms, search 60 ms, zoom 30 ms; at 1,000,000: 100 MB, 5 s, 500 ms, and
# convert under 10 s and 2 GB; for a day at 19 Hz on 2 CPUs (3.3 million
# samples), a page of at most 30 MB, first paint under 3 s, a range redrawn
# in under 200 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d /tmp/ember-vbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
command -v /usr/bin/time >/dev/null || { echo "bench: no /usr/bin/time (scripts/deps.sh bench installs it)" >&2; exit 1; }

# timed NAME OUTPUT CMD...: the wall time and peak RSS of CMD, OUTPUT's size
timed() {
	local name=$1 out=$2
	shift 2
	/usr/bin/time -f '%e %M' -o "$T/time" "$@" >/dev/null 2>"$T/err" || { echo "$name failed: $(tail -3 "$T/err")"; return; }
	read -r secs kib <"$T/time"
	printf '%-34s %8.2f s %8d MB %9.1f MB\n' "$name" "$secs" $((kib / 1024)) \
		"$(awk -v b="$(stat -c %s "$out")" 'BEGIN { print b / 1e6 }')"
}

for stacks in ${SIZES:-100000}; do
	node bench/fleet_profile.mjs --stacks "$stacks" >"$T/p.folded"
	echo "profile: $stacks stacks, $(awk '{ s += $NF } END { print s }' "$T/p.folded") samples, $(($(stat -c %s "$T/p.folded") / 1000000)) MB folded"
	printf '%-34s %10s %11s %12s\n' converter time "peak RSS" "page size"
	timed "ember convert -> html" "$T/ember.html" build/ember convert "$T/p.folded" -o "$T/ember.html"
	if [ -n "${ASYNC_PROFILER_DIR:-}" ] && [ -x "$ASYNC_PROFILER_DIR/bin/jfrconv" ]; then
		cp "$T/p.folded" "$T/p.collapsed"
		timed "async-profiler jfrconv -> html" "$T/ap.html" "$ASYNC_PROFILER_DIR/bin/jfrconv" -o html "$T/p.collapsed" "$T/ap.html"
		rm "$T/p.collapsed"
	fi
	if ((stacks <= 100000)) && [ -n "${FLAMEGRAPH_DIR:-}" ] && [ -x "$FLAMEGRAPH_DIR/flamegraph.pl" ]; then
		timed "flamegraph.pl -> svg" "$T/fg.svg" sh -c "'$FLAMEGRAPH_DIR/flamegraph.pl' '$T/p.folded' >'$T/fg.svg'"
	fi
	rm "$T/p.folded"
	node bench/viewer.mjs "$T/ember.html" --runs "${RUNS:-5}" --search 'Repository\.find|::merge'
	if [ -f "$T/ap.html" ]; then
		echo "async-profiler's page:"
		node bench/viewer.mjs "$T/ap.html" --runs "${RUNS:-5}" --paint-only
	fi
	echo
done

node bench/day_profile.mjs --hours "${HOURS:-24}" >"$T/day.pb.gz"
echo "profile: ${HOURS:-24} h at 19 Hz on 2 CPUs, $(($(stat -c %s "$T/day.pb.gz") / 1000000)) MB of pprof"
printf '%-34s %10s %11s %12s\n' converter time "peak RSS" "page size"
timed "ember convert -> html" "$T/day.html" build/ember convert "$T/day.pb.gz" -o "$T/day.html"
rm "$T/day.pb.gz"
node bench/viewer.mjs "$T/day.html" --runs "${RUNS:-5}" --search 'G1FullCollector'
