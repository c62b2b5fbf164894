#!/usr/bin/env bash
# The heap analysis' cost: `ember jvm PID --heap` beside `jcmd PID
# GC.heap_dump` (the dump Eclipse MAT users start from) on the same JVM,
# for heaps of many small objects (bench/java/HeapGrid.java: two objects
# a cell). ember has the JVM write the same dump (full GC included), so its
# pause should be the dump's. For each size: the JVM's pause as its own
# safepoint log tells it (-Xlog:safepoint: HeapDumper) for ember's dump and
# for jcmd's, the pause ember reports (from the JVM's safepoint counters),
# the dump's size, ember's time to read and analyse it (issue 18's target:
# under 2 s per million objects) and its peak memory per object (target:
# under 40 bytes; the pages of the mapped dump it holds count).
# Environment: CELLS (1000000 6000000: ~2 and ~12 million objects, about
# 60 MB and 350 MB of heap), RUNS (2), JAVA_BIN (the JDK's bin directory;
# default: java and jcmd on the PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d /tmp/ember-heapbench.XXXXXX)
jvm=""
trap '[ -n "$jvm" ] && kill "$jvm" 2>/dev/null; rm -rf "$T"' EXIT
BIN=${JAVA_BIN:+$JAVA_BIN/}
"${BIN}javac" -d "$T/classes" bench/java/HeapGrid.java

printf '%-10s %-10s %9s %9s %9s %9s %10s %9s %9s %9s\n' cells objects "pause s" "told s" "jcmd s" "dump MB" "analyse s" "s/M obj" "B/obj" "ember s"
for cells in ${CELLS:-1000000 6000000}; do
	"${BIN}java" -Xmx4g -Xlog:safepoint:file="$T/safepoints" -cp "$T/classes" HeapGrid 1000 $((cells / 1000)) 3600 >"$T/out" &
	jvm=$!
	for _ in $(seq 600); do grep -q '^cells ' "$T/out" && break; sleep 0.1; done
	# The Total of the last safepoint of that name, in seconds.
	pause() { grep "Safepoint \"$1\"" "$T/safepoints" | tail -1 | sed -E 's/.*Total: ([0-9]+) ns.*/\1/' | awk '{ printf "%.3f", $1 / 1e9 }'; }
	for run in $(seq "${RUNS:-2}"); do
		start=$(date +%s.%N)
		build/ember jvm "$jvm" --heap --force -n 1 >"$T/report" 2>"$T/err"
		took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
		ours=$(pause HeapDumper)
		told=$(sed -nE 's/.*; the dump paused the JVM for ([0-9.]+) s$/\1/p' "$T/report")
		read -r size objects analyse peak < <(sed -nE 's/.*dump \(([0-9.]+) MiB, ([0-9]+) objects\) read and analysed in ([0-9.]+) s; .* ([0-9]+) MiB$/\1 \2 \3 \4/p' "$T/err")
		rm -f "$T/dump.hprof"
		"${BIN}jcmd" "$jvm" GC.heap_dump "$T/dump.hprof" >/dev/null
		theirs=$(pause HeapDumper)
		rm -f "$T/dump.hprof"
		awk -v c="$cells" -v o="$objects" -v p="$ours" -v t="$told" -v j="$theirs" -v d="$size" -v a="$analyse" \
			-v m="$peak" -v e="$took" 'BEGIN {
				printf "%-10d %-10d %9.2f %9.2f %9.2f %9.1f %10.2f %9.2f %9.1f %9.2f\n",
					c, o, p, t, j, d * 1.048576, a, a / (o / 1e6), m * 1048576 / o, e }'
	done
	kill "$jvm"
	wait "$jvm" 2>/dev/null || true
	jvm=""
done
