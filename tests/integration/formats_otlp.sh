#!/usr/bin/env bash
# OpenTelemetry's profiles (OTLP, opentelemetry-proto v1.10.0) as a user
# gets them: `ember record -o x.otlp`, read by the classes protoc generates
# from opentelemetry-proto's own files (tests/tools/otlp_read.py, which
# also checks the specification's rules), never by ember's reader. Every
# event is a profile of its own; each process a resource with its pid,
# executable name and host; frames carry their runtime (native, kernel,
# cpython); per event the totals equal those the real pprof reads from
# the pprof of the same recording; and ember convert goes both ways.
. "$(dirname "$0")/../lib.sh"
need_bpf
need_otlp_reader
need_pprof

# One recording (CPU and off-CPU) as pprof, then as OTLP by ember convert.
"$EMBER" record -e cpu-clock,offcpu -F 999 --no-java -o "$TMP/rec.pb.gz" -- "$WORKLOADS/offcpu_waits" 2 300 \
	>/dev/null 2>"$TMP/err" || fail "record: $(cat "$TMP/err")"
"$EMBER" convert "$TMP/rec.pb.gz" -o "$TMP/rec.otlp" 2>"$TMP/err" || fail "convert pprof -> otlp: $(cat "$TMP/err")"
assert_contains "$TMP/err" '^ember: wrote .*rec.otlp \(2 events, [0-9]+ stacks\)$' "convert: $(cat "$TMP/err")"
"${OTLP_READ[@]}" "$TMP/rec.otlp" --pprof-dir "$TMP/otlp-pprof" >"$TMP/rec.jsonl" 2>"$TMP/err" ||
	fail "the OTLP file breaks the specification or protoc's classes cannot read it: $(cat "$TMP/err")"

# Per event: the OTLP total (protoc's reading) against pprof's total of the
# same event in the pprof file, and against the real pprof's reading of the
# pprof made from the OTLP profile as Pyroscope's receiver makes it.
python3 - "$TMP/rec.jsonl" "$PPROF" "$TMP/rec.pb.gz" >"$TMP/totals" <<'PY' || fail "totals: $(cat "$TMP/totals")"
import json, re, subprocess, sys
lines, pprof, recording = sys.argv[1:4]

def pprof_totals(path):
    """Each sample type's sum over a pprof's samples (pprof -raw)."""
    raw = subprocess.run([pprof, "-raw", path], capture_output=True, text=True, check=True).stdout
    lines = raw.split("\nSamples:\n", 1)[1].split("\nLocations", 1)[0].splitlines()
    types = [re.sub(r"\[dflt\]$", "", t) for t in lines[0].split()]
    sums = [0] * len(types)
    for line in lines[1:]:
        m = re.match(r"^\s*((?:-?\d+\s+)*-?\d+): ", line)
        if m:
            for i, v in enumerate(m.group(1).split()):
                sums[i] += int(v)
    return dict(zip(types, sums))

recorded = pprof_totals(recording)
by_event = {}
for line in open(lines):
    p = json.loads(line)
    event = p["sample_type"][0]
    by_event.setdefault(event, []).append(p)
bad = False
for event, ps in sorted(by_event.items()):
    otlp_total = sum(p["total"] for p in ps)
    pprof_key = {"samples": "cpu-clock/count"}.get(event, event + "/" + ps[0]["sample_type"][1])
    # The pprof made of each OTLP profile has one sample type: CPU samples
    # become CPU time (count x period), as in Pyroscope.
    via_pprof = sum(next(iter(pprof_totals(p["pprof"]).values())) for p in ps)
    cpu = ps[0]["period_type"] == ["cpu", "nanoseconds"]
    expect_via = otlp_total * ps[0]["period"] if cpu else otlp_total
    print(event, "otlp", otlp_total, "pprof-file", recorded.get(pprof_key), "otlp->pprof", via_pprof, "resources", len(ps))
    bad = bad or recorded.get(pprof_key) != otlp_total or via_pprof != expect_via
sys.exit(1 if bad else 0)
PY
cat "$TMP/totals"
assert_contains "$TMP/totals" '^samples otlp [1-9]' "no CPU profile in the OTLP file"
assert_contains "$TMP/totals" '^offcpu otlp [1-9]' "no off-CPU profile in the OTLP file"

# Straight from record: the workload's process is a resource of its own
# (with its pid: --pid-frames); its off-CPU stacks name waitA under main.
"$EMBER" record -e cpu-clock,offcpu -F 999 --no-java --pid-frames -o "$TMP/direct.otlp" -- "$WORKLOADS/offcpu_waits" 1 200 \
	>"$TMP/out" 2>"$TMP/err" || fail "record -o x.otlp: $(cat "$TMP/err")"
"${OTLP_READ[@]}" "$TMP/direct.otlp" >"$TMP/direct.jsonl" 2>"$TMP/err" || fail "$(cat "$TMP/err")"
python3 - "$TMP/direct.jsonl" "$(hostname)" >"$TMP/direct.txt" <<'PY' || fail "record -o x.otlp: $(cat "$TMP/direct.txt")"
import json, sys
lines, host = sys.argv[1:3]
ps = [json.loads(l) for l in open(lines)]
mine = [p for p in ps if p["resource"].get("process.executable.name") == "offcpu_waits"]
assert mine, "no resource of offcpu_waits: %s" % [p["resource"] for p in ps]
for p in mine:
    r = p["resource"]
    assert r.get("host.name") == host, r
    assert isinstance(r.get("process.pid"), int) and r["process.pid"] > 1, r
    assert p["scope"] == "ember", p["scope"]
    assert p["time_ns"] > 1.6e18 and p["duration_ns"] > 0, p
events = {p["sample_type"][0] for p in mine}
assert events == {"samples", "offcpu"}, events
off = next(p for p in mine if p["sample_type"][0] == "offcpu")
assert off["sample_type"][1] == "nanoseconds", off["sample_type"]
waits = sum(w for s, w in off["stacks"].items() if ";main;waitA;" in ";" + s + ";")
assert 0.25e9 < waits < 1e9, "waitA off CPU: %d ns" % waits
assert {"native", "kernel"} <= set(off["frame_types"]), off["frame_types"]
cpu = next(p for p in mine if p["sample_type"][0] == "samples")
assert cpu["period_type"] == ["cpu", "nanoseconds"] and cpu["period"] > 0, (cpu["period_type"], cpu["period"])
print("ok", len(ps), "profiles; offcpu_waits waitA", waits)
PY
cat "$TMP/direct.txt"

# Back: OTLP -> folded equals pprof -> folded, event by event.
for e in cpu-clock offcpu; do
	"$EMBER" convert -e $e "$TMP/rec.otlp" -o "$TMP/back.$e.folded" 2>"$TMP/err" || fail "convert otlp -> folded: $(cat "$TMP/err")"
	"$EMBER" convert -e $e "$TMP/rec.pb.gz" -o "$TMP/want.$e.folded" 2>"$TMP/err" || fail "convert pprof -> folded: $(cat "$TMP/err")"
	diff <(sort "$TMP/want.$e.folded") <(sort "$TMP/back.$e.folded") >"$TMP/diff" || fail "$e: pprof and OTLP differ: $(head "$TMP/diff")"
done
"$EMBER" convert "$TMP/rec.otlp" -o "$TMP/back.pb.gz" 2>"$TMP/err" || fail "convert otlp -> pprof: $(cat "$TMP/err")"
"$PPROF" -sample_index=offcpu -top "$TMP/back.pb.gz" >"$TMP/top" 2>&1 || fail "pprof cannot read the converted file: $(cat "$TMP/top")"
assert_contains "$TMP/top" 'waitA' "pprof of OTLP converted back lacks waitA"
"$EMBER" convert "$TMP/rec.otlp" -o "$TMP/rec.html" 2>"$TMP/err" || fail "convert otlp -> html: $(cat "$TMP/err")"
assert_contains "$TMP/err" 'holds the sample types cpu-clock, offcpu: reading cpu-clock' "convert to one graph: $(cat "$TMP/err")"

# A Python program: its frames are cpython's.
"$EMBER" record -F 999 -o "$TMP/py.otlp" -- python3 "$ROOT/tests/workloads/py_split.py" 2 >/dev/null 2>"$TMP/err" ||
	fail "record python: $(cat "$TMP/err")"
"${OTLP_READ[@]}" "$TMP/py.otlp" >"$TMP/py.jsonl" 2>"$TMP/err" || fail "$(cat "$TMP/err")"
grep -q '"cpython"' "$TMP/py.jsonl" || fail "no frame of type cpython in a Python program's OTLP profile"

# Damaged files are refused with a reason.
head -c 200 "$TMP/rec.otlp" >"$TMP/cut.otlp"
"$EMBER" report "$TMP/cut.otlp" >/dev/null 2>"$TMP/err" && fail "a truncated OTLP file was accepted"
assert_contains "$TMP/err" 'corrupt|truncated|not a profile' "truncated OTLP: $(cat "$TMP/err")"
true
