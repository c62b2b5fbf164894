#!/usr/bin/env bash
# ember agent's other ways to the server, against the Pyroscope stand-in:
# the older /ingest endpoint (a multipart request per series, its name,
# times and sample_type_config), over HTTPS with a private CA and basic
# auth; then the server's answers: a 503 to a period's second series is
# retried from that series on, none sent twice; 429 is retried, 400 is
# logged with the server's message and the period kept as rejected, never
# sent again, and the periods after it go through; a wrong password is
# refused likewise.
# A warning (a binary whose DWARF does not fit) is told once, not each period.
# `ember convert` merges the spool's periods of one service.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_pprof

PORT=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
	-keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null || fail "openssl could not make a certificate"
echo "pa55" >"$TMP/password"
echo "wrong" >"$TMP/wrong"
STATUS=$TMP/status
python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$PORT" --out "$TMP/received" --basic ops:pa55 \
	--tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --status-file "$STATUS" --fail-series 3 \
	>"$TMP/receiver.log" 2>&1 &
BACKGROUND+=($!)
for _ in $(seq 50); do grep -q listening "$TMP/receiver.log" && break; sleep 0.1; done
background "$WORKLOADS/spinner" 60
background "$WORKLOADS/offcpu_waits" 100  # an off-CPU series each period

agent() {
	"$EMBER" agent --period 1s --frequency 49 --server.url "https://127.0.0.1:$PORT" --server.ca_file "$TMP/cert.pem" \
		--server.user ops --server.max_backoff 1s --metrics.listen "" --events cpu offcpu \
		--relabel 'keep service_name spinner|offcpu_waits' --labels env=test "$@" &
}
received() { cat "$TMP/received/log.jsonl" 2>/dev/null | grep -c '"api"'; }

agent --server.api ingest --server.password_file "$TMP/password" --spool.dir "$TMP/spool" 2>"$TMP/agent.log"
AGENT=$!
BACKGROUND+=($AGENT)
# However slow the start: the sanitized build's symbolizer, on a busy
# host, took over 10 s to cut its first periods.
for _ in $(seq 600); do (($(received) >= 5)) && break; sleep 0.1; done
(($(received) >= 5)) || fail "nothing arrived by /ingest in 60 s: $(cat "$TMP/agent.log" "$TMP/receiver.log")"
# Each answer is held until the agent has met it twice: a period a second,
# but a busy host's agent may push none for seconds.
answered() { grep -c "^answered $1\$" "$TMP/receiver.log"; }
for status in 429 400; do
	echo $status >"$STATUS"
	for _ in $(seq 600); do (($(answered $status) >= 2)) && break; sleep 0.1; done
	(($(answered $status) >= 2)) || fail "the agent pushed nothing in 60 s of $status answers: $(cat "$TMP/agent.log")"
done
rm "$STATUS"
before=$(received)
for _ in $(seq 600); do (($(received) > before + 1)) && break; sleep 0.1; done
kill -TERM $AGENT
wait $AGENT || fail "the agent exited $? after SIGTERM: $(cat "$TMP/agent.log")"

python3 - "$TMP/received" "$PPROF" "$TMP/agent.log" "$TMP/spool" "$before" <<'EOF'
import hashlib, json, os, re, subprocess, sys
recv, pprof, agent_log, spool, before = sys.argv[1:6]
log = open(agent_log).read()
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
entries = [json.loads(l) for l in open(recv + "/log.jsonl")]
# The longest period, by the spool's names (START_NS.DURATION_MS.PROFILES.STATE).
longest = max((int(n.split(".")[1]) for n in os.listdir(spool) if re.match(r"\d+\.\d+\.", n)), default=1000) / 1000
if any("error" in e for e in entries): fail("the receiver refused: %s" % [e for e in entries if "error" in e][:2])
for e in entries:
    if e["api"] != "ingest": fail("not /ingest: %s" % e)
    m = re.fullmatch(r"(spinner|offcpu_waits)\.(process_cpu|off_cpu)\{env=test,host=[^,}]+\}", e["name"])
    if not m: fail("ingest name %r" % e["name"])
    # Periods of 1 s in whole seconds; one is cut late when the one before
    # was slow to name (the sanitized ember's first: a span of 3 s, seen
    # once; 8 s on a machine at load 8): as long as a period of the spool.
    if not 0 < e["until"] - e["from"] <= longest + 2:
        fail("from %d until %d, though the longest period lasted %.1f s" % (e["from"], e["until"], longest))
    config = e["sample_type_config"]
    if m.group(2) == "process_cpu" and (set(config) != {"samples", "cpu"} or config["cpu"]["units"] != "nanoseconds"):
        fail("sample_type_config %r" % config)
# Each series of a period taken once, those before the one a 503 failed too.
# The profile's bytes tell periods apart (its time_nanos): from and until are
# whole seconds, the same for two periods cut in one second.
def sha(e): return hashlib.sha256(open(os.path.join(recv, e["file"]), "rb").read()).hexdigest()
sent = [(e["name"], e["from"], e["until"], sha(e)) for e in entries]
twice = sorted(s for s in set(sent) if sent.count(s) > 1)
if twice: fail("series sent twice: %s" % twice)
warnings = re.findall(r"^ember agent: warning: .*$", log, re.M)
if len(warnings) != len(set(warnings)): fail("a warning told more than once:\n" + "\n".join(sorted(warnings)))
if "push failed (HTTP 503: the test fails a period's later series)" not in log: fail("no 503 in the log:\n" + log)
if not any(e["name"].startswith("offcpu_waits.off_cpu") for e in entries): fail("no off-CPU series")
spinner = next(e for e in entries if e["name"].startswith("spinner.process_cpu"))
top = subprocess.run([pprof, "-top", recv + "/" + spinner["file"]], capture_output=True, text=True)
if "spinner_loop" not in top.stdout: fail("pprof: no spinner_loop in %s: %s%s" % (spinner["file"], top.stdout, top.stderr))
if "push failed (HTTP 429: the test says 429)" not in log: fail("no retried 429 in the log:\n" + log)
if not re.search(r"the server refused the period of \S+ \(HTTP 400: the test says 400\); it stays in", log):
    fail("no refusal with the server's message in the log:\n" + log)
rejected = [f for f in os.listdir(spool) if f.endswith(".rejected")]
pending = [f for f in os.listdir(spool) if f.endswith(".pending")]
if not rejected: fail("no period kept as rejected: %s" % os.listdir(spool))
if pending: fail("periods left unsent: %s" % pending)
if len(entries) <= int(before): fail("nothing arrived after the server took requests again")
m = re.search(r"pushed (\d+), refused (\d+), dropped (\d+)", log)
if not m or int(m.group(2)) != sum(int(f.split(".")[2]) for f in rejected):
    fail("the last line does not count the %d rejected periods:\n%s" % (len(rejected), log))
print("%d profiles by /ingest over TLS, none twice after a 503 mid-period; %d periods rejected after a 400, the 429s retried" % (len(entries), len(rejected)))
EOF
[ $? = 0 ] || fail "see above"

# The spool read back: the spinner's periods merged into one graph.
"$EMBER" convert "$TMP/spool" --service spinner -o "$TMP/spinner.folded" 2>"$TMP/convert.err" ||
	fail "convert of the spool: $(cat "$TMP/convert.err")"
assert_contains "$TMP/spinner.folded" "^spinner;.*spinner_loop [0-9]+$" "the merged spool has no spinner_loop"
# As a page: the periods on its heatmap, each at its start, as precise as
# a period: the longest, which on a busy machine may be seconds (the
# spool's file names hold each period's start, length in ms, ...).
"$EMBER" convert "$TMP/spool" --service spinner -o "$TMP/spinner.html" 2>"$TMP/convert.err" ||
	fail "convert of the spool to a page: $(cat "$TMP/convert.err")"
longest=$(ls "$TMP/spool" | awk -F. '/^[0-9]+\.[0-9]+\./ && $2 + 0 > max { max = $2 + 0 } END { print max + 0 }')
node --input-type=module -e "
import { readEmbeddedData } from '$ROOT/tests/browser/lib.mjs';
const d = readEmbeddedData('$TMP/spinner.html'), times = new Set();
for (let i = 0, t = 0; i < d.timeline.length; i += 3) times.add(t += d.timeline[i]);
const starts = [...times].sort((a, b) => a - b), steps = starts.slice(1).map((t, i) => t - starts[i]);
if (d.time_step_ms < 900 || d.time_step_ms > $longest) throw new Error('time step ' + d.time_step_ms + ' ms, not a period (of 1 s, the longest $longest ms)');
if (starts.length < 3 || steps.some((s) => s < 300)) throw new Error('period starts ' + starts);
" >"$TMP/timeline.err" 2>&1 || fail "the spool's page has no timeline of its periods: $(cat "$TMP/timeline.err")"
"$EMBER" convert "$TMP/spool" -o "$TMP/x.folded" 2>"$TMP/convert.err" && fail "convert of a spool without --service"
assert_contains "$TMP/convert.err" "give --service: the spool holds (.*, )?spinner"

# A wrong password: refused (401), logged, not retried.
agent --server.password_file "$TMP/wrong" --spool.dir "$TMP/spool2" 2>"$TMP/wrong.log"
AGENT=$!
for _ in $(seq 50); do grep -q "HTTP 401" "$TMP/wrong.log" && break; sleep 0.1; done
kill -TERM $AGENT
wait $AGENT
assert_contains "$TMP/wrong.log" "refused the period of .* \(HTTP 401: no or wrong basic auth\)" \
	"no 401 with the server's message: $(cat "$TMP/wrong.log")"
assert_absent "$TMP/wrong.log" "push failed" "a 401 was retried: $(cat "$TMP/wrong.log")"
