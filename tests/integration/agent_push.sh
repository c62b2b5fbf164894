#!/usr/bin/env bash
# kind: structural
# ember agent pushes a period, as it would on any host of a fleet: the
# agent, with CPU and off-CPU events and no Java attach, sends its first
# periods to the Pyroscope stand-in (tests/tools/pyroscope_receiver.py);
# the real pprof reads each profile; the spinner's CPU series is labelled
# with its host and names spinner_loop in a whole stack; SIGTERM ends it
# with exit 0.
# What is checked does not depend on timing: the kernel matrix runs it.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_pprof

RECV_PORT=$(free_port)
METRICS_PORT=$(free_port)
RECV=$TMP/received
background python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$RECV_PORT" --out "$RECV" >"$TMP/receiver.log" 2>&1
cat >"$TMP/agent.toml" <<CONF
period = "2s"
frequency = 99
events = ["cpu", "offcpu"]

[server]
url = "http://127.0.0.1:$RECV_PORT"

[spool]
dir = "$TMP/spool"

[java]
attach = false

[[relabel]]
action = "keep"
label = "service_name"
regex = "spinner|ember"

[metrics]
listen = "127.0.0.1:$METRICS_PORT"
CONF
background "$WORKLOADS/spinner" 600
"$EMBER" agent --config "$TMP/agent.toml" 2>"$TMP/agent.log" &
AGENT=$!
BACKGROUND+=($AGENT)

# Two of the spinner's CPU periods (the first may begin before its tables
# were loaded), however slow the host: an emulated guest's start-up takes
# minutes.
# grep, not jq: under an emulator each jq start takes seconds, and the
# agent cuts a period meanwhile.
spinner_periods() {
	grep -F '"service_name": "spinner"' "$RECV/log.jsonl" 2>/dev/null | grep -cF '"__name__": "process_cpu"'
}
for _ in $(seq 3000); do
	(($(spinner_periods) >= 2)) && break
	kill -0 $AGENT 2>/dev/null || fail "the agent exited: $(cat "$TMP/agent.log")"
	sleep 0.1
done
(($(spinner_periods) >= 2)) || fail "no two CPU periods of the spinner in 300 s: $(cat "$TMP/agent.log")"
kill -TERM $AGENT
wait $AGENT
rc=$?
[ $rc = 0 ] || fail "the agent exited $rc after SIGTERM: $(tail -5 "$TMP/agent.log")"
grep -q '"error"' "$RECV/log.jsonl" && fail "the receiver refused a request: $(grep '"error"' "$RECV/log.jsonl")"

# Each profile as pprof reads it: file, service, series, host, its samples' total.
# Under the emulator (a pprof start takes seconds there) only those checked
# below: the spinner's CPU series and the first off-CPU one; the others
# print as "-".
python3 - "$RECV" "$PPROF" "${EMBER_EMULATED:-}" >"$TMP/profiles.txt" <<'PY' || fail "pprof cannot read a profile: $(cat "$TMP/profiles.txt")"
import json, re, subprocess, sys
recv, pprof, emulated = sys.argv[1:4]
off_cpu_read = False
for line in open(recv + "/log.jsonl"):
    e = json.loads(line)
    l = e["labels"]
    checked = l.get("service_name") == "spinner" and l.get("__name__") == "process_cpu"
    if l.get("__name__") == "off_cpu" and not off_cpu_read:
        checked = off_cpu_read = True
    if emulated and not checked:
        print(e["file"], l.get("service_name"), l.get("__name__"), l.get("host"), "-")
        continue
    out = subprocess.run([pprof, "-raw", recv + "/" + e["file"]], capture_output=True, text=True)
    if out.returncode:
        sys.exit(e["file"] + ": " + out.stderr.strip())
    samples = out.stdout.split("\nSamples:\n", 1)[1].split("\nLocations", 1)[0]
    total = sum(int(m.group(1)) for m in re.finditer(r"^\s*(\d+)(?:\s+\d+)*: ", samples, re.M))
    print(e["file"], l.get("service_name"), l.get("__name__"), l.get("host"), total)
PY
cat "$TMP/profiles.txt"
assert_contains "$TMP/profiles.txt" "^[0-9]+\\.pprof spinner process_cpu $(hostname) [1-9]" "no spinner CPU series with samples, labelled with this host"
assert_contains "$TMP/profiles.txt" " off_cpu " "no off-CPU series"
# The last CPU period, whole: spinner_loop under main, under the C library's start.
file=$(awk '$2 == "spinner" && $3 == "process_cpu" { f = $1 } END { print f }' "$TMP/profiles.txt")
"$PPROF" -traces "$RECV/$file" >"$TMP/traces.txt" 2>&1
grep -A4 'spinner_loop$' "$TMP/traces.txt" | grep -q '__libc_start_main\|__libc_start_call_main' ||
	fail "the spinner's stacks do not reach the C library's start: $(head -40 "$TMP/traces.txt")"
