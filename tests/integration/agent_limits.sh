#!/usr/bin/env bash
# Pyroscope refuses a profile over its limits whole (16,000 samples, 4 MiB
# before gzip, by default): ember agent cuts the lightest stacks short to
# fit, keeping the totals. Against the stand-in told to refuse more than 16
# samples, with server.max_samples = 16 (the least allowed) and
# tests/workloads/stack_zoo.c making 4,096 stacks: every profile of every
# service is taken, none has more than 16 samples as the real pprof reads
# it, the cut ones end in "[lighter stacks cut]", and the totals equal what
# the agent made. With thread_label: each sample has its thread's labels.
# Then, its server gone, a SIGTERM ends the agent at once.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_pprof

PORT=$(free_port)
METRICS_PORT=$(free_port)
RECV=$TMP/received
python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$PORT" --out "$RECV" --max-samples 16 \
	>"$TMP/receiver.log" 2>&1 &
RECV_PID=$!
BACKGROUND+=($RECV_PID)
for _ in $(seq 50); do grep -q listening "$TMP/receiver.log" && break; sleep 0.1; done
# Thousands of distinct stacks a second off CPU, in one service.
background "$WORKLOADS/stack_zoo" 60

"$EMBER" agent --period 2s --frequency 99 --events cpu offcpu --server.url "http://127.0.0.1:$PORT" \
	--server.max_samples 16 --thread_label true --spool.dir "$TMP/spool" --metrics.listen "127.0.0.1:$METRICS_PORT" \
	--java.attach false 2>"$TMP/agent.log" &
AGENT=$!
BACKGROUND+=($AGENT)
metric() { curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
received() { grep -c . "$RECV/log.jsonl" 2>/dev/null || echo 0; }

# Three periods in, read between two cuts: all made was pushed.
sleep 6
for _ in $(seq 40); do
	kill -0 $AGENT 2>/dev/null || fail "the agent exited: $(cat "$TMP/agent.log")"
	made=$(metric ember_agent_profiles_total)
	made_cpu=$(metric 'ember_agent_profile_values_total{event="cpu-clock",unit="samples"}')
	made_off=$(metric 'ember_agent_profile_values_total{event="offcpu",unit="ns"}')
	cut=$(metric ember_agent_profiles_cut_total)
	[ -n "$made" ] && [ "$made" = "$(metric ember_agent_profiles_pushed_total)" ] && [ "$made" = "$(received)" ] && break
	sleep 0.1
done
kill $RECV_PID
wait $RECV_PID 2>/dev/null
grep -q '"error"' "$RECV/log.jsonl" && fail "the server refused: $(grep '"error"' "$RECV/log.jsonl" | head -3)"
[ "$made" = "$(received)" ] || fail "the agent made $made profiles, the server holds $(received)"
((cut > 0)) || fail "no profile was cut ($made profiles): stack_zoo makes thousands of stacks a second"

# The real pprof's reading of each: its samples and their total.
python3 - "$RECV" "$PPROF" "$made_cpu" "$made_off" <<'EOF' || fail "see above"
import json, re, subprocess, sys
recv, pprof, made_cpu, made_off = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(float(sys.argv[4]))
totals = {"process_cpu": 0, "off_cpu": 0}
cut_seen = largest = 0
for line in open(recv + "/log.jsonl"):
    e = json.loads(line)
    out = subprocess.run([pprof, "-raw", recv + "/" + e["file"]], capture_output=True, text=True)
    if out.returncode:
        sys.exit("pprof cannot read %s: %s" % (e["file"], out.stderr))
    samples = out.stdout.split("\nSamples:\n", 1)[1].split("\nLocations", 1)[0]
    values = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+)(?:\s+\d+)*: ", samples, re.M)]
    if len(values) > 16:
        sys.exit("%s (%s) has %d samples" % (e["file"], e["labels"]["service_name"], len(values)))
    largest = max(largest, len(values))
    totals[e["labels"]["__name__"]] += sum(values)
    cut_seen += "[lighter stacks cut]" in out.stdout
    if e["labels"]["service_name"] == "stack_zoo" and not re.search(r"thread:\[stack_zoo\]\s+tid:\[\d+\]", samples):
        sys.exit("%s: stack_zoo's samples lack thread labels:\n%s" % (e["file"], samples))
print("%d profiles, at most %d samples each, %d with stacks cut; %d CPU samples and %d ns off-CPU, as the agent made"
      % (sum(1 for _ in open(recv + "/log.jsonl")), largest, cut_seen, totals["process_cpu"], totals["off_cpu"]))
if not cut_seen:
    sys.exit("no profile has a [lighter stacks cut] frame")
if totals["process_cpu"] != made_cpu or totals["off_cpu"] != made_off:
    sys.exit("the agent made %d CPU samples and %d ns off-CPU; pprof reads %d and %d"
             % (made_cpu, made_off, totals["process_cpu"], totals["off_cpu"]))
EOF
# Its server gone, a stop does not wait on it: the period it cut short
# stays in the spool.
start=$EPOCHREALTIME
kill -TERM $AGENT
wait $AGENT
rc=$?
secs=$(bc <<<"$EPOCHREALTIME - $start")
[ $rc = 0 ] || fail "the agent exited $rc after SIGTERM: $(tail -5 "$TMP/agent.log")"
echo "stopped in $secs s with its server gone"
# What it must not wait on is the next try (its backoff here: minutes); its
# own work at a stop (the period cut, hundreds of profiles written) took
# 8 s on a machine busy with two emulators.
(($(bc <<<"$secs < 30") == 1)) || fail "the agent took $secs s to stop with its server gone: $(tail -3 "$TMP/agent.log")"
assert_contains "$TMP/agent.log" 'while stopping; the spool keeps the rest' "no word of the failed push at the stop"
