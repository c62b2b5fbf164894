#!/usr/bin/env bash
# ember over time, beside a churning host: its own cost and whether it stays
# flat.
#   bench/soak.sh agent [MINUTES]   ember agent at its defaults (19 Hz on all
#                                   CPUs, 15 s periods), pushing to the
#                                   Pyroscope stand-in (default 10 minutes)
#   bench/soak.sh record [MINUTES]  ember record -a at 99 Hz, a window of
#                                   60 s written to disk each minute
# The load: a native CPU workload on about half a CPU, 300 idle processes,
# 2,000 short-lived processes a minute, a JVM that lives 50 s and is
# replaced, and a JVM of 2 s started every ~3.6 s (1,000 JVMs an hour
# attaching and exiting). agent: from minute 3 to 13 the backend flaps,
# every 20 s answering 503 for 5 s and then refusing connections for 5 s.
# Prints a line a minute: ember's CPU % over that minute, RSS, open files,
# BPF map memory (the maps' memlock, from its fds), JVMs whose agent it
# reads, JVMs started so far, profiles (periods or windows) made and
# delivered, and (agent) profiles in the spool. Then the means,
# the start-up peak, the RSS and open-files slopes after the first two
# minutes (least squares), and the checks: ember never exited, every
# period pushed (agent) or every window written and readable (record),
# and no JVM writing to ember once it has exited.
# BASELINE=PATH (agent): another build's ember (its libember-agent.so beside
# it) runs as an agent over the same load at the same time, pushing to a
# receiver of its own; its CPU % and RSS are printed beside ember's each
# minute, and the ratio at the end. The backend does not flap then: a
# comparison, not a resilience run. On a shared VM whose speed drifts from
# one run to the next, this is the figure to compare builds by.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-agent}
MINUTES=${2:-10}
[[ $MODE == agent || $MODE == record ]] || { echo "usage: bench/soak.sh agent|record [MINUTES]" >&2; exit 2; }
BASELINE=${BASELINE:-}
[[ -z $BASELINE || ($MODE == agent && -x $BASELINE) ]] || { echo "bench: BASELINE: an ember binary, with agent" >&2; exit 2; }
TMP=$(mktemp -d /tmp/ember-bench-soak.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; pkill -P $$ 2>/dev/null; pkill -f "$TMP/classes"; wait 2>/dev/null; rm -rf "$TMP"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SECONDS_IN=$((MINUTES * 60 + 60))

# The load.
for _ in $(seq 300); do sleep 100000 & PIDS+=($!); done
"$ROOT/build/workloads/cpu_split" $SECONDS_IN >/dev/null &
PIDS+=($!)
"$ROOT/build/workloads/process_churn" $((MINUTES * 2000 + 2000)) $SECONDS_IN >/dev/null &
PIDS+=($!)
javac -d "$TMP/classes" "$ROOT/tests/java/Workload.java"
(while :; do java -cp "$TMP/classes" Workload 50 >/dev/null 2>&1; done) &
PIDS+=($!)
(while :; do java -cp "$TMP/classes" Workload 2 >/dev/null 2>&1; echo >>"$TMP/short_jvms"; sleep 1; done) &
PIDS+=($!)
short_jvms() { wc -l <"$TMP/short_jvms" 2>/dev/null || echo 0; }
sleep 2

if [[ $MODE == agent ]]; then
	RECV_PORT=$(free_port)
	METRICS_PORT=$(free_port)
	mkdir -p "$TMP/received"
	receive() {
		python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$RECV_PORT" --out "$TMP/received" \
			--status-file "$TMP/status" >>"$TMP/receiver.log" 2>&1 &
		RECV_PID=$!
	}
	receive
	sleep 0.5
	# The flapping backend, second S of the soak: 503, then down, then up.
	# Ends 2 minutes before the soak at the latest, for the spool to drain.
	FLAP_END=$(((MINUTES - 2) * 60 < 780 ? (MINUTES - 2) * 60 : 780))
	flap() {
		local s=$1 phase=$(($1 % 20))
		[[ $BASELINE ]] && return
		((s >= 180 && s < FLAP_END)) || { ((s == FLAP_END)) && { rm -f "$TMP/status"; kill -0 $RECV_PID 2>/dev/null || receive; }; return; }
		if ((phase == 0)); then echo 503 >"$TMP/status"; fi
		if ((phase == 5)); then rm -f "$TMP/status"; kill $RECV_PID; wait $RECV_PID 2>/dev/null; fi
		if ((phase == 10)); then receive; fi
	}
	"$ROOT/build/ember" agent --server.url "http://127.0.0.1:$RECV_PORT" --spool.dir "$TMP/spool" \
		--metrics.listen "127.0.0.1:$METRICS_PORT" 2>"$TMP/ember.log" &
	EMBER_PID=$!
	if [[ $BASELINE ]]; then
		BASE_PORT=$(free_port)
		mkdir -p "$TMP/base_received"
		python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$BASE_PORT" --out "$TMP/base_received" \
			>>"$TMP/base_receiver.log" 2>&1 &
		PIDS+=($!)
		sleep 0.5
		"$BASELINE" agent --server.url "http://127.0.0.1:$BASE_PORT" --spool.dir "$TMP/base_spool" \
			--metrics.listen "" 2>"$TMP/base.log" &
		BASE_PID=$!
		PIDS+=($BASE_PID)
		echo "baseline: $BASELINE, its own receiver; the backend does not flap"
	fi
	metric() { curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
	jvms() { metric ember_agent_jvms; }
	made() { metric ember_agent_profiles_total; }
	delivered() { metric ember_agent_profiles_pushed_total; }
	spooled() { metric ember_agent_profiles_spooled; }
	echo "ember agent for $MINUTES min on $(nproc) CPUs: defaults (19 Hz, 15 s periods)"
else
	"$ROOT/build/ember" record -a -F 99 --window 60 -o "$TMP/soak.pb.gz" 2>"$TMP/ember.log" &
	EMBER_PID=$!
	# JVMs whose agent stream ember holds open (/tmp/ember-PID-*/N.jitmap).
	jvms() { ls /tmp/ember-$EMBER_PID-*/ 2>/dev/null | grep -c 'jitmap$'; }
	made() { grep -c '^ember: window ' "$TMP/ember.log"; }
	delivered() { ls "$TMP" | grep -c '^soak\.[0-9]*\.pb\.gz$'; }
	spooled() { echo -; }
	flap() { :; }
	echo "ember record -a at 99 Hz for $MINUTES min on $(nproc) CPUs, a window a minute"
fi
PIDS+=($EMBER_PID)
echo "load: cpu_split, 300 idle processes, 2,000 short-lived processes a minute, a JVM of 50 s after another, a JVM of 2 s every ~3.6 s"
[[ $MODE == agent && -z $BASELINE ]] && ((FLAP_END > 180)) &&
	echo "the backend flaps from minute 3 to $((FLAP_END / 60)): each 20 s, 5 s of 503 and 5 s refusing connections"

# cpu_ticks [PID], rss_kib [PID]: ember's, or the baseline's.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/${1:-$EMBER_PID}/stat"; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/${1:-$EMBER_PID}/status"; }
open_files() { ls "/proc/$EMBER_PID/fd" | wc -l; }
# The memlock of ember's BPF maps, each once.
bpf_map_kib() {
	cat /proc/$EMBER_PID/fdinfo/* 2>/dev/null |
		awk '/^pos:/ { type = "" } /^map_type:/ { type = $2 } /^map_id:/ { id = $2 }
		     /^memlock:/ && type != "" && !(id in seen) { seen[id]; sum += $2 } END { print int(sum / 1024) }'
}
HZ=$(getconf CLK_TCK)
printf '%6s %8s %8s %8s %6s %8s %5s %7s %6s %9s %7s' min "cpu %" "rss MB" "peak MB" files "bpf MB" jvms started made delivered spooled
[[ $BASELINE ]] && printf ' %11s %11s' "base cpu %" "base rss MB"
echo
start_ticks=0 base_start=0
: >"$TMP/series"
peak=0
began=$EPOCHREALTIME
# Second s of the soak by the clock: the readings take time of their own.
for ((s = 1; s <= MINUTES * 60; s++)); do
	sleep "$(bc -l <<<"d = $began + $s - $EPOCHREALTIME; if (d > 0) d else 0")"
	flap $s
	kill -0 $EMBER_PID 2>/dev/null || { echo "bench: ember exited: $(tail -3 "$TMP/ember.log")"; exit 1; }
	[[ $BASELINE ]] && { kill -0 $BASE_PID 2>/dev/null || { echo "bench: the baseline exited: $(tail -3 "$TMP/base.log")"; exit 1; }; }
	rss=$(rss_kib)
	((rss > peak)) && peak=$rss
	if ((s % 10 == 0)); then echo "$s $rss $(open_files)" >>"$TMP/series"; fi
	if ((s % 60 == 0)); then
		ticks=$(cpu_ticks)
		printf '%6d %8.2f %8.1f %8.1f %6d %8.1f %5s %7s %6s %9s %7s' $((s / 60)) \
			"$(bc -l <<<"100 * ($ticks - $start_ticks) / $HZ / 60")" "$(bc -l <<<"$rss / 1024")" \
			"$(bc -l <<<"$peak / 1024")" "$(open_files)" "$(bc -l <<<"$(bpf_map_kib) / 1024")" "$(jvms)" \
			"$(short_jvms)" "$(made)" "$(delivered)" "$(spooled)"
		if [[ $BASELINE ]]; then
			base_ticks=$(cpu_ticks $BASE_PID)
			printf ' %11.2f %11.1f' "$(bc -l <<<"100 * ($base_ticks - $base_start) / $HZ / 60")" \
				"$(bc -l <<<"$(rss_kib $BASE_PID) / 1024")"
			base_start=$base_ticks
		fi
		echo
		start_ticks=$ticks
	fi
done
total_ticks=$(cpu_ticks)
[[ $BASELINE ]] && base_total=$(cpu_ticks $BASE_PID) && kill -TERM $BASE_PID
made_before_stop=$(made)
kill -TERM $EMBER_PID
wait $EMBER_PID
status=$?
echo
awk -v hz="$HZ" -v ticks="$total_ticks" -v secs="$((MINUTES * 60))" -v peak="$peak" '
	function slope(col,   i, n, sx, sy, sxx, sxy) {
		for (i = 1; i <= NR; i++) if (t[i] > 120) { n++; sx += t[i]; sy += v[col, i]; sxx += t[i] * t[i]; sxy += t[i] * v[col, i] }
		return n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0
	}
	{ t[NR] = $1; v[1, NR] = $2 / 1024; v[2, NR] = $3 }
	END {
		n = 0
		for (i = 1; i <= NR; i++) if (t[i] > 120) { n++; steady += v[1, i] }
		steady = n ? steady / n : v[1, NR]
		printf "CPU: %.2f%% of one core on average (start-up included)\n", 100 * ticks / hz / secs
		printf "RSS: %.1f MB at 10 s, %.1f MB at the end, peak %.1f MB (%.2fx the steady mean %.1f MB)\n", \
			v[1, 1], v[1, NR], peak / 1024, peak / 1024 / steady, steady
		printf "slopes after the first 2 minutes: RSS %+.2f MB/hour, open files %+.1f/hour\n", slope(1) * 3600, slope(2) * 3600
	}' "$TMP/series"
echo "ember exited $status after SIGTERM"
[[ $BASELINE ]] && printf 'baseline: CPU %.2f%% of one core on average; ember used %.2fx its CPU time\n' \
	"$(bc -l <<<"100 * $base_total / $HZ / ($MINUTES * 60)")" "$(bc -l <<<"$total_ticks / $base_total")"
# No JVM it attached goes on writing an agent stream once it is gone.
sleep 3
writing=0
for jvm in $(pgrep -f "$TMP/classes"); do
	ls -l "/proc/$jvm/fd" 2>/dev/null | grep -q '/tmp/ember-' && writing=$((writing + 1))
done
echo "JVMs still writing to ember 3 s after it exited: $writing of $(pgrep -fc "$TMP/classes") running"
if [[ $MODE == agent ]]; then
	grep -E "stopped after" "$TMP/ember.log" | sed 's/^/last line: /'
	echo "profiles received: $(grep -c '"api"' "$TMP/received/log.jsonl") of $made_before_stop made before the stop"
else
	windows=$(delivered)
	unreadable=0
	for f in "$TMP"/soak.[0-9]*.pb.gz; do
		"$ROOT/build/ember" report -n 1 "$f" >/dev/null 2>&1 || unreadable=$((unreadable + 1))
	done
	echo "windows written: $windows ($made_before_stop before the stop, then the last one), $unreadable unreadable"
fi
