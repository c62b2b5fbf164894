#!/usr/bin/env bash
# The heap walker's cost: `ember jvm PID --heap` beside `jcmd PID
# GC.heap_dump` (the dump Eclipse MAT users start from) on the same JVM,
# for heaps of many small objects (bench/java/HeapGrid.java: two objects
# a cell). For each size: the JVM's pauses as its own safepoint log tells
# them (-Xlog:safepoint: the walk's HeapWalkOperation, then the thread
# dump's PrintThreads, where HotSpot frees the walk's tags, the dump's
# HeapDumper, which includes the full GC jcmd asks for by default, and the
# same without it, `-all`: the shortest pause HotSpot's dumper can take),
# the graph's size beside the dump's, ember's time to read and analyse the
# graph (issue 18's target: under 2 s per million objects) and its peak
# memory per object (target: under 40 bytes; the mapped graph counts).
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

printf '%-10s %-10s %9s %9s %9s %9s %9s %9s %10s %9s %9s\n' cells objects "walk s" "free s" "dump s" "-all s" "graph MB" "dump MB" "analyse s" "s/M obj" "B/obj"
for cells in ${CELLS:-1000000 6000000}; do
	"${BIN}java" -Xmx4g -Xlog:safepoint:file="$T/safepoints" -cp "$T/classes" HeapGrid 1000 $((cells / 1000)) 3600 >"$T/out" &
	jvm=$!
	for _ in $(seq 600); do grep -q '^cells ' "$T/out" && break; sleep 0.1; done
	# The Total of the last safepoint of that name, in seconds.
	pause() { grep "Safepoint \"$1\"" "$T/safepoints" | tail -1 | sed -E 's/.*Total: ([0-9]+) ns.*/\1/' | awk '{ printf "%.3f", $1 / 1e9 }'; }
	for run in $(seq "${RUNS:-2}"); do
		build/ember jvm "$jvm" --heap --force -n 1 >"$T/report" 2>"$T/err"
		walk=$(pause HeapWalkOperation)
		free=$(pause PrintThreads)
		read -r graph objects analyse peak < <(sed -nE 's/.*graph \(([0-9.]+) MiB, ([0-9]+) objects\) read and analysed in ([0-9.]+) s; .* ([0-9]+) MiB$/\1 \2 \3 \4/p' "$T/err")
		rm -f "$T/all.hprof" "$T/dump.hprof"
		"${BIN}jcmd" "$jvm" GC.heap_dump -all "$T/all.hprof" >/dev/null
		all=$(pause HeapDumper)
		rm -f "$T/all.hprof"
		"${BIN}jcmd" "$jvm" GC.heap_dump "$T/dump.hprof" >/dev/null
		dump=$(pause HeapDumper)
		awk -v c="$cells" -v o="$objects" -v w="$walk" -v f="$free" -v d="$dump" -v x="$all" -v g="$graph" \
			-v h="$(stat -c %s "$T/dump.hprof")" -v a="$analyse" -v p="$peak" 'BEGIN {
				printf "%-10d %-10d %9.2f %9.2f %9.2f %9.2f %9.1f %9.1f %10.2f %9.2f %9.1f\n",
					c, o, w, f, d, x, g * 1.048576, h / 1e6, a, a / (o / 1e6), p * 1048576 / o }'
	done
	kill "$jvm"
	wait "$jvm" 2>/dev/null || true
	jvm=""
done
