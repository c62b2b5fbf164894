#!/usr/bin/env bash
# ember agent's own cost over time (issue 15's targets: CPU under 1% of one
# core on average, RSS under 100 MB and flat, start-up peak under 1.5x the
# steady state, no profile lost while the backend is up), at its defaults
# (19 Hz on all CPUs, 15 s periods), pushing to the Pyroscope stand-in,
# with a mixed load: a native CPU workload, a JVM, 300 idle processes and
# 2,000 short-lived processes a minute.
#   bench/agent.sh              10 minutes
#   AGENT_MINUTES=60 bench/agent.sh
# Prints a line every minute (the agent's CPU % over that minute, RSS, BPF
# map memory, profiles made/pushed) and a summary: mean CPU, RSS at start,
# peak and end, the RSS slope over the steady part (after the first two
# minutes, by least squares), profiles lost.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINUTES=${AGENT_MINUTES:-10}
TMP=$(mktemp -d /tmp/ember-bench-agent.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; pkill -P $$ 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
RECV_PORT=$(free_port)
METRICS_PORT=$(free_port)

python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$RECV_PORT" --out "$TMP/received" >"$TMP/receiver.log" 2>&1 &
PIDS+=($!)
# The load: 300 idle processes, a native CPU workload on about half a CPU,
# a JVM, and 2,000 processes a minute (each 1 ms of CPU).
for _ in $(seq 300); do sleep 100000 & PIDS+=($!); done
"$ROOT/build/workloads/cpu_split" $((MINUTES * 60 + 60)) >/dev/null &
PIDS+=($!)
javac -d "$TMP/classes" "$ROOT/tests/java/Workload.java"
java -cp "$TMP/classes" Workload $((MINUTES * 60 + 60)) >/dev/null 2>&1 &
PIDS+=($!)
"$ROOT/build/workloads/process_churn" $((MINUTES * 2000 + 2000)) $((MINUTES * 60 + 60)) >/dev/null &
PIDS+=($!)
sleep 2

"$ROOT/build/ember" agent --server.url "http://127.0.0.1:$RECV_PORT" --spool.dir "$TMP/spool" \
	--metrics.listen "127.0.0.1:$METRICS_PORT" 2>"$TMP/agent.log" &
AGENT=$!
PIDS+=($AGENT)
metric() { curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$AGENT/stat"; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$AGENT/status"; }
HZ=$(getconf CLK_TCK)

echo "ember agent for $MINUTES min on $(nproc) CPUs, $(free -g | awk '/^Mem/ { print $2 }') GiB: defaults (19 Hz, 15 s periods)"
echo "load: 300 idle processes, cpu_split, a JVM (Workload), 2,000 short-lived processes a minute"
printf '%6s %8s %8s %9s %9s %8s %8s\n' min "cpu %" "rss MB" "peak MB" "bpf MB" made pushed
start_ticks=0
began=$(date +%s.%N)
: >"$TMP/rss"
peak=0
for ((s = 1; s <= MINUTES * 60; s++)); do
	sleep 1
	kill -0 $AGENT 2>/dev/null || { echo "bench: the agent exited: $(tail -3 "$TMP/agent.log")"; exit 1; }
	rss=$(rss_kib)
	((rss > peak)) && peak=$rss
	echo "$s $rss" >>"$TMP/rss"
	if ((s % 60 == 0)); then
		ticks=$(cpu_ticks)
		printf '%6d %8.2f %8.1f %9.1f %9.1f %8s %8s\n' $((s / 60)) \
			"$(bc -l <<<"100 * ($ticks - $start_ticks) / $HZ / 60")" "$(bc -l <<<"$rss / 1024")" \
			"$(bc -l <<<"$peak / 1024")" "$(bc -l <<<"$(metric ember_agent_bpf_map_bytes) / 1048576")" \
			"$(metric ember_agent_profiles_total)" "$(metric ember_agent_profiles_pushed_total)"
		start_ticks=$ticks
	fi
done
total_ticks=$(cpu_ticks)
made=$(metric ember_agent_profiles_total)
kill -TERM $AGENT
wait $AGENT
echo
awk -v hz="$HZ" -v ticks="$total_ticks" -v secs="$((MINUTES * 60))" -v peak="$peak" '
	{ t[NR] = $1; r[NR] = $2 / 1024 }
	END {
		n = 0
		for (i = 1; i <= NR; i++) if (t[i] > 120) { n++; sx += t[i]; sy += r[i]; sxx += t[i] * t[i]; sxy += t[i] * r[i] }
		slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0
		steady = n ? sy / n : r[NR]
		printf "agent CPU: %.2f%% of one core on average (start-up included)\n", 100 * ticks / hz / secs
		printf "RSS: %.1f MB after 10 s, %.1f MB at the end, peak %.1f MB (%.2fx the steady mean %.1f MB)\n", \
			r[10], r[NR], peak / 1024, peak / 1024 / steady, steady
		printf "RSS slope after the first 2 minutes: %+.2f MB/hour\n", slope * 3600
	}' "$TMP/rss"
grep -E "stopped after" "$TMP/agent.log" | sed 's/^/last line: /'
echo "profiles received: $(grep -c '"api"' "$TMP/received/log.jsonl") of $made made before the stop"
