#!/usr/bin/env bash
# ember agent against a Pyroscope stand-in written from Pyroscope's push
# contract (tests/tools/pyroscope_receiver.py), with Debian's Prometheus
# scraping /metrics, over one run of about 50 s with a period of 1 s:
#   1. the first periods arrive: a series per service and event, labelled,
#      with the bearer token and the tenant; the real pprof reads each one,
#      and its totals equal the values the agent says it made;
#   2. the server goes away for 25 s, and longer until the cap has dropped
#      (a busy agent cuts its periods late): the agent keeps cutting periods
#      into its spool, whose cap (64 KiB, the least it takes: about 10
#      periods of these profiles, ember's own off-CPU stacks the most of
#      them) drops the oldest and counts them;
#      meanwhile a SIGHUP changes the rate;
#   3. the server comes back: every period the cap kept arrives, in order,
#      with its own time; the rate changed with the period after the SIGHUP;
#      a JVM started now has Java frames within a period of its start;
#   4. SIGTERM mid-period: that period is delivered too, and the profiles
#      pushed plus those the cap dropped are all the agent made.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_pprof
command -v prometheus >/dev/null || fail "prometheus missing: scripts/deps.sh test installs it"
java_classes "$TMP/classes"

RECV_PORT=$(free_port)
METRICS_PORT=$(free_port)
PROM_PORT=$(free_port)
RECV=$TMP/received
echo "t0ken" >"$TMP/token"
PERIOD=1

receiver() {
	python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$RECV_PORT" --out "$RECV" \
		--token t0ken --tenant team-a >>"$TMP/receiver.log" 2>&1 &
	RECV_PID=$!
	BACKGROUND+=($RECV_PID)
	for _ in $(seq 50); do grep -q listening "$TMP/receiver.log" 2>/dev/null && return; sleep 0.1; done
	fail "the receiver did not start: $(cat "$TMP/receiver.log")"
}

cat >"$TMP/agent.toml" <<EOF
period = "${PERIOD}s"
frequency = 49
events = ["cpu", "offcpu"]
labels = { env = "test" }

[server]
url = "http://127.0.0.1:$RECV_PORT"
tenant = "team-a"
token_file = "$TMP/token"
max_backoff = "2s"

[spool]
dir = "$TMP/spool"
max_size = "64KiB"

# The services under test only: fewer profiles for pprof to read.
[[relabel]]
action = "keep"
label = "service_name"
regex = "spinner|Workload|ember"

[metrics]
listen = "127.0.0.1:$METRICS_PORT"
EOF

cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: ember
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
EOF
background prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom" \
	--web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn 2>"$TMP/prometheus.log"

receiver
background "$WORKLOADS/spinner" 120
"$EMBER" agent --config "$TMP/agent.toml" 2>"$TMP/agent.log" &
AGENT=$!
BACKGROUND+=($AGENT)

# What the real pprof reads in each profile the receiver took, one line each:
# file service type host env __delta__ id start_ns period total (start
# from the pprof's Time, total: the sum of its first sample type; its
# Duration is cut to 4 characters by -raw, "520." for 520.4ms: see the end).
profiles() {
	python3 - "$RECV" "$PPROF" <<'EOF'
import datetime, json, os, re, subprocess, sys
recv, pprof = sys.argv[1:3]
from concurrent.futures import ThreadPoolExecutor
entries = [json.loads(line) for line in open(recv + "/log.jsonl")]
def read(e):  # pprof's reading, once per profile
    raw = recv + "/" + e["file"] + ".raw"
    if not os.path.exists(raw):
        out = subprocess.run([pprof, "-raw", recv + "/" + e["file"]], capture_output=True, text=True)
        if out.returncode: return "ERROR pprof cannot read %s: %s" % (e["file"], out.stderr.strip())
        open(raw, "w").write(out.stdout)
    return open(raw).read()
with ThreadPoolExecutor(2) as pool:
    texts = list(pool.map(lambda e: "" if "error" in e else read(e), entries))
for e, text in zip(entries, texts):
    if "error" in e:
        print("ERROR", e["error"]); continue
    if text.startswith("ERROR"):
        print(text); continue
    t = re.search(r"^Time: (\d+-\d+-\d+ \d+:\d+:\d+)\.(\d+)", text, re.M)
    start = int(datetime.datetime.strptime(t.group(1) + "+0000", "%Y-%m-%d %H:%M:%S%z").timestamp()) * 10**9 + int(t.group(2).ljust(9, "0"))
    period = re.search(r"^Period: (\d+)", text, re.M).group(1)
    samples = text.split("\nSamples:\n", 1)[1].split("\nLocations", 1)[0]
    total = sum(int(m.group(1)) for m in re.finditer(r"^\s*(\d+)(?:\s+\d+)*: ", samples, re.M))
    l = e["labels"]
    print(e["file"], l.get("service_name"), l.get("__name__"), l.get("host"), l.get("env"), l.get("__delta__"),
          e["id"], start, period, total, e["duration_ns"])
EOF
}
metric() { curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# 1. The first periods: labelled series, and the values the agent says it
# made equal the totals pprof reads in what the server holds. Read between
# two cuts, once everything cut was pushed.
for _ in $(seq 150); do
	[ "$(grep -c '"spinner"' "$RECV/log.jsonl" 2>/dev/null)" -ge 2 ] && break
	kill -0 $AGENT 2>/dev/null || fail "the agent exited: $(cat "$TMP/agent.log")"
	sleep 0.1
done
for _ in $(seq 50); do
	pushed=$(metric ember_agent_profiles_pushed_total)
	made_cpu=$(metric 'ember_agent_profile_values_total{event="cpu-clock",unit="samples"}')
	made_off=$(metric 'ember_agent_profile_values_total{event="offcpu",unit="ns"}')
	[ "$pushed" = "$(metric ember_agent_profiles_total)" ] && [ "$pushed" = "$(grep -c . "$RECV/log.jsonl")" ] && break
	sleep 0.1
done
kill $RECV_PID  # 2. the outage starts
wait $RECV_PID 2>/dev/null
down_at=$(date +%s.%N)
profiles >"$TMP/first.txt"
grep -q '^ERROR' "$TMP/first.txt" && fail "$(grep ERROR "$TMP/first.txt")"
[ "$(grep -c . "$TMP/first.txt")" = "$pushed" ] || fail "the agent pushed $pushed profiles, the server holds $(grep -c . "$TMP/first.txt")"
assert_contains "$TMP/first.txt" "^[0-9]+\.pprof spinner process_cpu $(hostname) test false [0-9a-f-]{36} " \
	"no labelled spinner CPU series: $(cat "$TMP/first.txt")"
assert_contains "$TMP/first.txt" " off_cpu " "no off-CPU series"
got_cpu=$(awk '$3 == "process_cpu" { s += $10 } END { print s }' "$TMP/first.txt")
got_off=$(awk '$3 == "off_cpu" { s += $10 } END { printf "%.0f\n", s }' "$TMP/first.txt")
[ "$got_cpu" = "$made_cpu" ] || fail "the agent made $made_cpu CPU samples, pprof reads $got_cpu in the server's profiles"
[ "$got_off" = "$made_off" ] || fail "the agent made $made_off ns off-CPU, pprof reads $got_off in the server's profiles"
echo "before the outage: $pushed profiles, $got_cpu CPU samples and $got_off ns off-CPU, as the agent counted"
file=$(awk '$2 == "spinner" && $3 == "process_cpu" { print $1; exit }' "$TMP/first.txt")
"$PPROF" -top -nodecount=5 "$RECV/$file" >"$TMP/top.txt" 2>&1
assert_contains "$TMP/top.txt" "spinner_loop" "pprof: the spinner's profile lacks spinner_loop"

# The outage goes on for 25 s, and until the cap has dropped a period (up
# to 120 s): a SIGHUP doubles the rate.
sleep 2
sed -i 's/^frequency = 49/frequency = 99/' "$TMP/agent.toml"
kill -HUP $AGENT
hup_at=$(date +%s.%N)
sleep "$(python3 -c "import time; print(max(0, 25 - (time.time() - $down_at)))")"
dropped() { local v; v=$(metric ember_agent_profiles_dropped_total); echo "${v:-0}"; }
for _ in $(seq 950); do (($(dropped) > 0)) && break; sleep 0.1; done
(($(dropped) > 0)) ||
	fail "the 64 KiB cap dropped nothing in a 120 s outage: $(ls -l "$TMP/spool"; tail -4 "$TMP/agent.log")"
receiver
back_ns=$(date +%s%N)
# A JVM starts: the agent finds it and names its Java frames. Its clock
# starts when it runs Workload's code (its first method compiled): a JVM's
# own start-up takes seconds on a busy host, and is not ember's.
java -XX:CompileThresholdScaling=0.1 -XX:+PrintCompilation -cp "$TMP/classes" Workload 30 >"$TMP/jit.log" 2>&1 &
JVM=$!
BACKGROUND+=($JVM)
(
	until grep -q ' Workload::' "$TMP/jit.log"; do sleep 0.05; done
	date +%s.%N >"$TMP/jvm_at"
) &
BACKGROUND+=($!)
# Attached: its code map in the agent's directory for it, seen as it comes
# (the wait for the spool below may take seconds).
(
	until ls /tmp/ember-$AGENT-*/"$JVM".jitmap >/dev/null 2>&1; do sleep 0.05; done
	date +%s.%N >"$TMP/attached_at"
) &
BACKGROUND+=($!)

# 3. Everything the cap kept arrives: no period that started before the
# server came back is still pending (later ones are cut every second, each
# pending until its push: on a busy machine one nearly always is).
# START_NS.DURATION_MS.PROFILES.STATE (user/fleet/spool.h).
old_pending() { ls "$TMP/spool" | awk -F. -v back="$back_ns" '$NF == "pending" && $1 + 0 < back + 0'; }
for _ in $(seq 200); do
	[ -z "$(old_pending)" ] && break
	sleep 0.1
done
[ -z "$(old_pending)" ] || fail "periods still unsent 20 s after the server came back: $(old_pending)"
caught_up_at=$(date +%s.%N)
for _ in $(seq 600); do [ -s "$TMP/jvm_at" ] && break; sleep 0.1; done
[ -s "$TMP/jvm_at" ] || fail "the JVM ran none of Workload's code in 60 s: $(tail -5 "$TMP/jit.log")"
jvm_at=$(cat "$TMP/jvm_at")
# How long the JVM takes to answer is its own (on a busy host, seconds).
for _ in $(seq 300); do [ -s "$TMP/attached_at" ] && break; sleep 0.1; done
[ -s "$TMP/attached_at" ] || fail "the late JVM not attached in 30 s: $(tail -3 "$TMP/agent.log")"
attached_at=$(cat "$TMP/attached_at")

# 4. 2.5 s after the attach or later, SIGTERM half a period into a period.
# A busy agent cuts its periods late, so the phase is taken from each new
# period's file (START_NS.DURATION_MS...: the next period starts at its
# end) as it appears, not counted on from an older one.
python3 - "$TMP/spool" "$attached_at" "$PERIOD" <<'EOF'
import os, sys, time
spool, attached_at, period = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def newest():
    cuts = [[int(x) for x in n.split(".")[:2]] for n in os.listdir(spool) if n.split(".")[0].isdigit()]
    return max(cuts, default=None)
seen, give_up = newest(), time.time() + 30
while True:
    if time.time() > give_up: sys.exit("no period cut in 30 s")
    time.sleep(0.01)
    cut = newest()
    if cut == seen: continue
    seen = cut
    at = cut[0] / 1e9 + cut[1] / 1e3 + period / 2
    if at >= attached_at + 2.5 and at > time.time() + 0.05: break
time.sleep(max(0, at - time.time()))
EOF
[ $? = 0 ] || fail "the agent cut no period: $(tail -3 "$TMP/agent.log")"
date +%s.%N >"$TMP/term_at"
kill -TERM $AGENT
wait $AGENT
rc=$?
[ $rc = 0 ] || fail "the agent exited $rc after SIGTERM: $(tail -5 "$TMP/agent.log")"

# Prometheus scraped the agent's health all along.
query() {
	curl -sf "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
		jq -r '.data.result[0].value[1] // "none"'
}
for m in ember_agent_profiles_pushed_total process_resident_memory_bytes process_cpu_seconds_total \
	ember_agent_bpf_map_bytes ember_agent_push_failures_total ember_agent_profiles_dropped_total \
	'ember_agent_profile_values_total{event="cpu-clock"}' ember_agent_symbolizer_bytes; do
	v=$(query "max_over_time(${m}[5m])")
	[ "$v" != none ] && [ "$v" != 0 ] ||
		fail "Prometheus scraped no $m above 0 ($v): $(cat "$TMP/prometheus.log"); the agent's last lines: $(tail -4 "$TMP/agent.log")"
done

profiles >"$TMP/all.txt"
python3 - "$TMP/all.txt" "$TMP/agent.log" "$hup_at" "$jvm_at" "$RECV" "$PPROF" "$PERIOD" "$TMP/first.txt" "$caught_up_at" "$TMP/spool" "$attached_at" "$(cat "$TMP/term_at")" <<'EOF'
import os, re, subprocess, sys
lines, agent_log, hup_at, jvm_at, recv, pprof, period, before, caught_up_at, spool_dir, attached_at, term_at = sys.argv[1:13]
hup_at, jvm_at, period, caught_up_at, attached_at, term_at = map(float, (hup_at, jvm_at, period, caught_up_at, attached_at, term_at))
# Every period cut before the outage was pushed: the cap may drop from the next.
down_at = max(int(r[7]) + int(r[10]) for r in (l.split() for l in open(before))) / 1e9
log = open(agent_log).read()

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

rows = [l.split() for l in open(lines)]
if any(r[0] == "ERROR" for r in rows): fail("the receiver refused: %s" % [r for r in rows if r[0] == "ERROR"][:3])
profiles = [dict(file=r[0], service=r[1], type=r[2], start=int(r[7]), period=int(r[8]), duration=int(r[10]))
            for r in rows]

m = re.search(r"stopped after (\d+) periods \(made (\d+) profiles: [^)]*\); pushed (\d+), refused (\d+), "
              r"dropped (\d+); (\d+) wait", log)
if not m: fail("no final line in the agent's log:\n" + log)
cut, made, pushed, refused, dropped, waiting = map(int, m.groups())
if refused or waiting: fail("refused %d, waiting %d:\n%s" % (refused, waiting, log))
if dropped == 0: fail("the 64 KiB cap dropped nothing in the outage: the cap is not tested")
if pushed + dropped != made:
    fail("pushed %d + dropped %d != made %d; the spool at the end: %s; the agent's log:\n%s"
         % (pushed, dropped, made, sorted(os.listdir(spool_dir)), log))
if pushed != len(profiles): fail("the agent pushed %d profiles, the server holds %d" % (pushed, len(profiles)))
print("%d periods, %d profiles made, %d pushed, %d dropped by the cap (oldest first)" % (cut, made, pushed, dropped))

# In order, each with its own time. A period runs from one cut to the next,
# so the periods kept touch each other but where the cap dropped some: while
# they waited to be sent, from the first period cut in the outage until the
# agent caught up (a busy agent's retries after the server is back may let
# it drop more then). The cap drops the oldest: the first period of the
# outage is the first dropped.
starts = [p["start"] for p in profiles]
if starts != sorted(starts): fail("periods arrived out of order: %s" % [(p["file"], p["start"]) for a, p in zip(profiles, profiles[1:]) if p["start"] < a["start"]][:5])
spans = sorted({p["start"]: p["duration"] for p in profiles}.items())
holes = [((a + d) / 1e9, b / 1e9) for (a, d), (b, _) in zip(spans, spans[1:]) if b - (a + d) > period / 2 * 1e9]
if not holes: fail("no period missing, though the cap dropped %d profiles" % dropped)
stray = [h for h in holes if h[0] < down_at - 0.001 or h[1] > caught_up_at]
if stray: fail("periods missing outside the outage (%.3f s, the end of the last period pushed before it, to %.1f s, when the agent caught up): %s" % (down_at, caught_up_at, stray))
if holes[0][0] > down_at + 0.001:
    fail("the cap dropped newer periods and kept the outage's first, cut at %.3f s: %s" % (down_at, holes))
print("periods missing in the outage: %s" % ", ".join("%.1f s to %.1f s" % (a - down_at, b - down_at) for a, b in holes))

# The rate: 49 Hz before the period that ends after the SIGHUP, 99 Hz from
# a period soon after it (the next on a quiet host; a busy agent reloads
# later), and never 49 Hz again.
old_rate, new_rate, switched = 10**9 // 49, 10**9 // 99, None
for p in sorted((p for p in profiles if p["type"] == "process_cpu"), key=lambda p: p["start"]):
    start = p["start"] / 1e9
    if start + period < hup_at and abs(p["period"] - old_rate) > 1:
        fail("a profile at %.1f s has period %d ns, before the SIGHUP at %.1f" % (start, p["period"], hup_at))
    if abs(p["period"] - new_rate) <= 1 and switched is None:
        switched = start
    if switched is not None and abs(p["period"] - new_rate) > 1:
        fail("a profile at %.1f s has period %d ns, after the rate changed at %.1f" % (start, p["period"], switched))
if switched is None: fail("no profile at the new rate")
last_old = max(p["start"] / 1e9 for p in profiles if p["type"] == "process_cpu" and abs(p["period"] - old_rate) <= 1)
if last_old > hup_at + 10 * period:
    fail("the old rate still in a period starting %.1f s after the SIGHUP" % (last_old - hup_at))
print("the old rate last in a period starting %+.1f s from the SIGHUP (periods the cap dropped left out)"
      % (last_old - hup_at))

# The late JVM: found within a scan (2 s) and attached, then Java frames in
# its service's profile from the period in progress or the next (a busy
# host's agent a few later): compiled or interpreted (a JVM starved on a
# busy host may still interpret).
first = None
for p in profiles:
    if p["type"] == "process_cpu" and p["service"] == "Workload":
        text = open(recv + "/" + p["file"] + ".raw").read()
        if re.search(r"Workload\.\w+_\[[ji0]\]", text):
            first = p["start"] / 1e9
            break
if first is None: fail("no profile of the late JVM (service Workload) with named Java frames")
if first > attached_at + 4 * period:  # 2 on a quiet host; 2.7 s seen beside the kernel matrix
    fail("the late JVM's Java frames first in a period starting %.1f s after its attach" % (first - attached_at))
print("the late JVM attached %.1f s after it ran Java code; its Java frames in the period starting %+.1f s from then"
      % (attached_at - jvm_at, first - attached_at))

# The period SIGTERM cut short arrived: the last, holding the SIGTERM and
# ending within a second of it. How far into it the SIGTERM came varies:
# aimed at its middle, but a busy agent that cut the one before late keeps
# its schedule by cutting this one early; and a busy agent takes a while to
# stop (0.6 s beside the kernel matrix, past the period's end).
last = max(profiles, key=lambda p: p["start"])
top = subprocess.run([pprof, "-top", recv + "/" + last["file"]], capture_output=True, text=True).stdout
d = re.search(r"^Duration: ([\d.]+)(ms|s),", top, re.M)
if not d: fail("pprof -top gives no duration for %s:\n%s" % (last["file"], top))
duration = float(d.group(1)) / (1000 if d.group(2) == "ms" else 1)
start = last["start"] / 1e9
if not (start - 0.1 <= term_at <= start + duration + 0.1 and start + duration <= term_at + 1.0):
    fail("the last period, %.2f s long, is not the one SIGTERM cut short: it starts %.2f s from the SIGTERM"
         % (duration, start - term_at))
print("the last period: %.2f s long, cut short by the SIGTERM %.2f s into it" % (duration, term_at - start))
EOF
[ $? = 0 ] || fail "see above"
