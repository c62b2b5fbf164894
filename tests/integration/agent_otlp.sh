#!/usr/bin/env bash
# ember agent with server.api = "otlp": each period goes as one OTLP/HTTP
# export request (POST /v1development/profiles, protobuf, gzip) to the
# receiver, which reads it with the classes protoc generates from
# opentelemetry-proto's files (tests/tools/otlp_read.py), turns each
# profile into a pprof and labels it as Pyroscope's OTLP receiver does.
# The spinner's CPU series is named process_cpu, its service and host come
# from the resource; every profile's total equals that of the same
# period's pprof in the agent's spool, read by the real pprof; the real
# pprof reads every profile received; a 503 is tried again, a 400 is not.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_otlp_reader
need_pprof

RECV_PORT=$(free_port)
RECV=$TMP/received
background /usr/bin/python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$RECV_PORT" --out "$RECV" \
	--status-file "$TMP/status" >"$TMP/receiver.log" 2>&1
cat >"$TMP/agent.toml" <<CONF
period = "2s"
frequency = 99
events = ["cpu", "offcpu"]

[server]
url = "http://127.0.0.1:$RECV_PORT"
api = "otlp"

[spool]
dir = "$TMP/spool"

[java]
attach = false

[[relabel]]
action = "keep"
label = "service_name"
regex = "spinner|ember"
CONF
background "$WORKLOADS/spinner" 600
# The first period is answered 503 (tried again), then the receiver takes them.
echo 503 >"$TMP/status"
"$EMBER" agent --config "$TMP/agent.toml" 2>"$TMP/agent.log" &
AGENT=$!
BACKGROUND+=($AGENT)
for _ in $(seq 600); do
	grep -q 'answered 503' "$TMP/receiver.log" && break
	sleep 0.1
done
grep -q 'answered 503' "$TMP/receiver.log" || fail "no push in 60 s: $(cat "$TMP/agent.log")"
rm "$TMP/status"

spinner_periods() { grep -F '"service_name": "spinner"' "$RECV/log.jsonl" 2>/dev/null | grep -cF '"__name__": "process_cpu"'; }
for _ in $(seq 1200); do
	(($(spinner_periods) >= 3)) && break
	kill -0 $AGENT 2>/dev/null || fail "the agent exited: $(cat "$TMP/agent.log")"
	sleep 0.1
done
(($(spinner_periods) >= 3)) || fail "no three CPU periods of the spinner in 120 s: $(cat "$TMP/agent.log")"
kill -TERM $AGENT
wait $AGENT
rc=$?
[ $rc = 0 ] || fail "the agent exited $rc after SIGTERM: $(tail -5 "$TMP/agent.log")"
assert_contains "$TMP/agent.log" 'push failed \(HTTP 503' "the 503 was not said: $(cat "$TMP/agent.log")"
grep -q '"error"' "$RECV/log.jsonl" && fail "the receiver refused a request: $(grep '"error"' "$RECV/log.jsonl")"

# Every profile received, by the real pprof; its total against the OTLP
# profile's (protoc's reading) and the spool's pprof of the same period,
# service and series (the agent keeps each period as Pyroscope's push
# request: a gzipped pprof per series).
python3 - "$RECV" "$PPROF" "$TMP/spool" "$ROOT" >"$TMP/profiles.txt" <<'PY' || fail "$(cat "$TMP/profiles.txt")"
import glob, gzip, json, re, subprocess, sys
recv, pprof, spool, root = sys.argv[1:5]
sys.path.insert(0, root + "/tests/tools")
from pyroscope_receiver import decode_push_request, fields

def pprof_totals(path):
    """Each sample type's sum over a pprof's samples (pprof -raw), in order."""
    out = subprocess.run([pprof, "-raw", path], capture_output=True, text=True)
    if out.returncode:
        sys.exit(path + ": " + out.stderr.strip())
    lines = out.stdout.split("\nSamples:\n", 1)[1].split("\nLocations", 1)[0].splitlines()
    sums = [0] * len(lines[0].split())
    for line in lines[1:]:
        m = re.match(r"^\s*((?:-?\d+\s+)*-?\d+): ", line)
        if m:
            for i, v in enumerate(m.group(1).split()):
                sums[i] += int(v)
    return sums

# The spool's series: (service, __name__, the profile's time) -> its pprof's file.
spooled = {}
for n, path in enumerate(sorted(glob.glob(spool + "/**/*", recursive=True))):
    try:
        body = open(path, "rb").read()
        series = decode_push_request(body)
    except Exception:
        continue
    for labels, samples in series:
        for profile, _ in samples:
            raw = gzip.decompress(profile)
            top = {number: value for number, wire, value in fields(raw) if wire == 0}
            name = "%s/spooled-%d-%d.pb.gz" % (recv, n, len(spooled))
            open(name, "wb").write(profile)
            spooled[(labels.get("service_name"), labels.get("__name__"), top.get(9, 0))] = name
bad = 0
for line in open(recv + "/log.jsonl"):
    e = json.loads(line)
    l = e["labels"]
    received = pprof_totals(recv + "/" + e["file"])[0]
    key = (l.get("service_name"), l.get("__name__"), e["time_ns"])
    spooled_totals = pprof_totals(spooled[key]) if key in spooled else None
    # The spool's pprof of a CPU series holds samples and CPU time (samples
    # x period): the OTLP profile counts the samples, and the pprof the
    # receiver makes of it holds the CPU time, as Pyroscope's does.
    ok = spooled_totals is not None and e["total"] == spooled_totals[0] and received == spooled_totals[-1]
    print(e["file"], l.get("service_name"), l.get("__name__"), l.get("host.name"), e["total"], received,
          spooled_totals, "ok" if ok else "DIFFERENT")
    bad += not ok
sys.exit(1 if bad else 0)
PY
cat "$TMP/profiles.txt"
assert_contains "$TMP/profiles.txt" "^[0-9]+\\.pprof spinner process_cpu $(hostname) [1-9]" "no spinner CPU series with samples, labelled with this host"
assert_contains "$TMP/profiles.txt" " off_cpu " "no off-CPU series"
file=$(awk '$2 == "spinner" && $3 == "process_cpu" { f = $1 } END { print f }' "$TMP/profiles.txt")
"$PPROF" -traces "$RECV/$file" >"$TMP/traces.txt" 2>&1
grep -A4 'spinner_loop$' "$TMP/traces.txt" | grep -q '__libc_start_main\|__libc_start_call_main' ||
	fail "the spinner's stacks do not reach the C library's start: $(head -40 "$TMP/traces.txt")"

# A request the server refuses (400) is not tried again (OTLP's rule).
rm -rf "$TMP/spool2"
echo 400 >"$TMP/status"
sed -i "s|$TMP/spool|$TMP/spool2|" "$TMP/agent.toml"
"$EMBER" agent --config "$TMP/agent.toml" 2>"$TMP/agent2.log" &
AGENT=$!
BACKGROUND+=($AGENT)
for _ in $(seq 600); do
	grep -q 'refused the period' "$TMP/agent2.log" && break
	sleep 0.1
done
kill -TERM $AGENT
wait $AGENT
assert_contains "$TMP/agent2.log" 'refused the period .*HTTP 400' "a 400 was not given up on: $(cat "$TMP/agent2.log")"
[ "$(grep -c 'answered 400' "$TMP/receiver.log")" = "$(grep -c 'refused the period' "$TMP/agent2.log")" ] ||
	fail "a refused period was sent again: $(grep -c 'answered 400' "$TMP/receiver.log") answers, $(cat "$TMP/agent2.log")"
true
