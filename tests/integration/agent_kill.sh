#!/usr/bin/env bash
# kill -9 of ember agent mid-period, its server away: no BPF object of its
# left, its spool whole (each period a complete file, nothing half-written);
# restarted with the server back, it sends the periods the killed one kept,
# oldest first, then its own, each once and in order of their time.
. "$(dirname "$0")/../lib.sh"
need_bpf
PORT=$(free_port)
SPOOL=$TMP/spool
bpf_mark_before
background "$WORKLOADS/spinner" 60
# A push the server has taken but not yet answered when the timeout
# ends is sent again (nothing says it arrived): on a loaded host the
# receiver, just started, can take seconds to answer its first, so the
# timeout is long enough not to count that as a period sent twice.
agent() {
	"$EMBER" agent --period 1s --frequency 49 --server.url "http://127.0.0.1:$PORT" --server.max_backoff 1s \
		--server.timeout 20s --metrics.listen "" --spool.dir "$SPOOL" --relabel 'keep service_name spinner' "$@" &
}
pending() { ls "$SPOOL" 2>/dev/null | grep -c '\.pending$'; }

agent 2>"$TMP/first.log"
first=$!
for _ in $(seq 150); do (($(pending) >= 3)) && break; sleep 0.1; done
(($(pending) >= 3)) || fail "no 3 periods spooled in 15 s: $(tail -3 "$TMP/first.log")"
bpf_learn_ember_maps
sleep 0.5  # mid-period
kill -9 $first
wait $first 2>/dev/null
assert_no_bpf_left "kill -9 of the agent"
ls "$SPOOL" | grep -v '^[0-9]\{20\}\.[0-9]*\.[0-9]*\.pending$' && fail "files in the spool other than whole periods"
ls "$SPOOL" >"$TMP/kept"

python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$PORT" --out "$TMP/received" >"$TMP/receiver.log" 2>&1 &
BACKGROUND+=($!)
agent 2>"$TMP/second.log"
second=$!
BACKGROUND+=($second)
want=$(($(wc -l <"$TMP/kept") + 3))
received() { cat "$TMP/received/log.jsonl" 2>/dev/null | grep -c '"api"'; }
for _ in $(seq 150); do (($(received) >= want)) && break; sleep 0.1; done
(($(received) >= want)) || fail "$(received) of $want profiles arrived in 15 s: $(tail -3 "$TMP/second.log")"
kill -TERM $second
wait $second || fail "the restarted agent exited $?: $(tail -3 "$TMP/second.log")"

python3 - "$TMP/received" "$TMP/kept" <<'EOF'
import json, sys
recv, kept = sys.argv[1:3]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7F) << s; i += 1; s += 7
        if not b[i - 1] & 0x80: return v, i
def time_nanos(path):  # pprof's Profile.time_nanos, field 9
    b = open(path, "rb").read(); i = 0
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 0:
            v, i = varint(b, i)
            if key >> 3 == 9: return v
        elif key & 7 == 2:
            n, i = varint(b, i); i += n
        elif key & 7 == 1: i += 8
        elif key & 7 == 5: i += 4
        else: fail("%s: wire type %d" % (path, key & 7))
    fail("%s has no time_nanos" % path)
times = [time_nanos(recv + "/" + json.loads(l)["file"]) for l in open(recv + "/log.jsonl")]
spooled = sorted(int(name.split(".")[0]) for name in open(kept).read().split())
if times != sorted(times): fail("periods out of order: %s" % times)
if len(set(times)) != len(times): fail("a period sent twice: %s" % times)
if times[:len(spooled)] != spooled: fail("the killed agent's periods %s are not the first sent: %s" % (spooled, times))
print("%d periods the killed agent kept sent first, in order, then %d of the new one's" % (len(spooled), len(times) - len(spooled)))
EOF
[ $? = 0 ] || fail "see above"
