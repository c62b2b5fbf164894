#!/usr/bin/env bash
# The flamegraph on a big profile: a generated folded file of 100,000
# unique stacks (depth 8-60, ~1M samples; bench/big_profile.awk). Prints
# the time to generate the page from it and the page's size, for ember
# (`ember convert`) and, when given their paths, FlameGraph's flamegraph.pl
# (SVG) and async-profiler's converter (HTML); then the page's speed in
# headless Chromium (bench/viewer.mjs): first paint, search, zoom.
# Environment: FLAMEGRAPH_DIR, ASYNC_PROFILER_DIR (both optional), RUNS (5).
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d /tmp/ember-vbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
awk -f bench/big_profile.awk >"$T/big.folded"
echo "profile: $(wc -l <"$T/big.folded") stacks, $(awk '{ s += $NF } END { print s }' "$T/big.folded") samples, $(($(stat -c %s "$T/big.folded") / 1048576)) MB folded"

# timed NAME OUTPUT CMD...: prints the wall time of CMD and OUTPUT's size
timed() {
	local name=$1 out=$2 start
	shift 2
	start=$(date +%s%N)
	"$@" >/dev/null 2>&1
	printf '%-32s %8d ms %8.1f MB\n' "$name" $((($(date +%s%N) - start) / 1000000)) \
		"$(awk -v b="$(stat -c %s "$out")" 'BEGIN { print b / 1048576 }')"
}
printf '\n%-32s %11s %11s\n' generator time size
timed "ember convert -> html" "$T/ember.html" build/ember convert "$T/big.folded" -o "$T/ember.html"
if [ -n "${FLAMEGRAPH_DIR:-}" ] && [ -x "$FLAMEGRAPH_DIR/flamegraph.pl" ]; then
	timed "flamegraph.pl -> svg" "$T/fg.svg" sh -c "'$FLAMEGRAPH_DIR/flamegraph.pl' '$T/big.folded' >'$T/fg.svg'"
else
	echo "flamegraph.pl: FLAMEGRAPH_DIR not set"
fi
if [ -n "${ASYNC_PROFILER_DIR:-}" ] && [ -x "$ASYNC_PROFILER_DIR/bin/jfrconv" ]; then
	cp "$T/big.folded" "$T/big.collapsed"
	timed "async-profiler jfrconv -> html" "$T/ap.html" "$ASYNC_PROFILER_DIR/bin/jfrconv" -o html "$T/big.collapsed" "$T/ap.html"
else
	echo "async-profiler: ASYNC_PROFILER_DIR not set"
fi
echo
node bench/viewer.mjs "$T/ember.html" --runs "${RUNS:-5}" --search 'lookup_1[0-9]'
