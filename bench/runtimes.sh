#!/usr/bin/env bash
# Python and JavaScript frames beside their peers (issue 37), on workloads
# with a known split (tests/workloads/py_split.py, js_split.js: alpha, beta
# and gamma take 50%, 30% and 20% of the work):
#   1. Agreement: ember and perf sample the same process at the same time
#      at 999 Hz, perf with the runtime's own help (CPython 3.13+ under
#      `-X perf_jit`, node under `--perf-basic-prof`: they name their JIT
#      code and trampolines to perf). Each tool's share of the
#      samples whose innermost function is alpha, beta or gamma, and the
#      difference in percentage points. A CPython built without frame
#      pointers (pyenv's, Debian's) needs 3.13's `-X perf_jit` and perf's
#      DWARF unwinding (`--call-graph dwarf`, `perf inject --jit`), as
#      CPython's documentation says; node keeps frame pointers.
#   2. BPF time per sample (kernel.bpf_stats_enabled: run_time_ns / run_cnt)
#      of ember (-a, its CFI unwinder and the runtimes' walkers) and of the
#      bpftrace reference `profile:hz:999 { @[kstack, ustack] = count(); }`,
#      attached together system-wide at 999 Hz to one workload per CPU;
#      the ratio per run, then the median of REPS runs [min-max]. A native
#      workload's row gives what the runtimes' walkers add to the unwinder.
#
#      Each CPython and node the tests run (tests/runtimes.sh: Debian's
#      python3 and pyenv's 3.8+ builds, the node in PATH and Debian 12's
#      nodejs 18).
#
# Environment: BENCH_SECONDS (10) per run, REPS (3), PYTHON (a CPython
# 3.13+ for -X perf_jit; default: pyenv's newest, else python3 if it is),
# NODE (the node of the agreement; default: node).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
. bench/lib.sh
ROOT=$PWD
. tests/runtimes.sh
EMBER=build/ember
REFERENCE='profile:hz:999 { @[kstack, ustack] = count(); }'
CPUS=$(nproc)
bpf_stats_bench
command -v bpftrace >/dev/null || { echo "bench: no bpftrace (the reference): install it with scripts/deps.sh bench" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: no perf: install it with scripts/deps.sh bench" >&2; exit 1; }
NODE=${NODE:-node}
command -v "$NODE" >/dev/null || { echo "bench: no $NODE" >&2; exit 1; }

# A CPython with -X perf_jit (3.13+).
python_with_perf() {
	local p
	for p in ${PYTHON:-} $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]*/bin/python3 2>/dev/null | sort -V -r) python3; do
		"$p" -c 'import sys; sys.exit(sys.version_info < (3, 13))' 2>/dev/null && { echo "$p"; return; }
	done
	return 1
}
PY=$(python_with_perf) || PY=""

# shares TOOL FILE: "alpha beta gamma samples" in percent of the samples
# whose innermost alpha, beta or gamma frame names one (ember: folded
# stacks, leaf last; perf: perf script's stacks, leaf first).
shares() {
	python3 - "$1" "$2" <<'EOF'
import re, sys
tool, path = sys.argv[1:3]
names = ("alpha", "beta", "gamma")
count = dict.fromkeys(names, 0)
def innermost(frames):
    for f in frames:
        m = re.match(r"(?:py::|JS:[*~^+]?|LazyCompile:[*~]?|Function:[*~]?)?(alpha|beta|gamma)\b", f)
        if m: return m.group(1)
if tool == "ember":
    for line in open(path):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        hit = innermost(reversed(stack.split(";")))
        if hit: count[hit] += int(n)
else:
    for block in open(path, errors="replace").read().split("\n\n"):
        frames = [l.split(None, 1)[1].rsplit(" (", 1)[0] for l in block.splitlines()[1:] if len(l.split(None, 1)) == 2]
        hit = innermost(frames)
        if hit: count[hit] += 1
total = sum(count.values()) or 1
print(" ".join("%.1f" % (100 * count[n] / total) for n in names), sum(count.values()))
EOF
}

# agree NAME fp|jitdump CMD...: ember and perf on one process of CMD at
# once; perf walks frame pointers, or DWARF with the process's jitdump.
agree() {
	local runtime=$1 how=$2 pid e p data=$T/perf.data
	shift 2
	local -a walk=(-g)
	[ "$how" = jitdump ] && walk=(-k 1 --call-graph dwarf)
	# It ends by itself: CPython writes its jitdump through a buffer that
	# a signal would lose.
	"$@" $((SECS + 3)) >/dev/null &
	pid=$!
	sleep 2 # past start-up: the split is the steady state's
	"$EMBER" record -p "$pid" -F 999 -d "$SECS" -o "$T/ember.folded" 2>"$T/ember.err" &
	e=$!
	perf record -q "${walk[@]}" -e cpu-clock -F 999 -p "$pid" -o "$data" -- sleep "$SECS" 2>"$T/perf.err" &
	p=$!
	wait $e $p $pid
	if [ "$how" = jitdump ]; then
		perf inject -i "$data" --jit -o "$T/perf.jit.data"
		data=$T/perf.jit.data
	fi
	perf script -i "$data" >"$T/perf.txt" 2>/dev/null
	# What the runtimes left for perf.
	rm -f /tmp/perf-"$pid".map /tmp/jit-"$pid".dump /tmp/jitted-"$pid"-*.so
	read -r ea eb eg en < <(shares ember "$T/ember.folded")
	read -r pa pb pg pn < <(shares perf "$T/perf.txt")
	printf '  %-34s %-8s %6s %6s %6s %9s\n' "$runtime" ember "$ea" "$eb" "$eg" "$en"
	printf '  %-34s %-8s %6s %6s %6s %9s\n' "" perf "$pa" "$pb" "$pg" "$pn"
	if [ "$pn" = 0 ] || [ "$en" = 0 ]; then
		echo "  (a tool named none of alpha, beta and gamma: no agreement to measure)"
		return
	fi
	printf '  %-34s %-8s %6s %6s %6s\n' "" "diff, pp" \
		"$(awk -v a="$ea" -v b="$pa" 'BEGIN { printf "%+.1f", a - b }')" \
		"$(awk -v a="$eb" -v b="$pb" 'BEGIN { printf "%+.1f", a - b }')" \
		"$(awk -v a="$eg" -v b="$pg" 'BEGIN { printf "%+.1f", a - b }')"
}

# per_sample CMD...: "ember_ns bpftrace_ns" over SECS s, CPUS copies of CMD running.
per_sample() {
	local i e b ens0 ecnt0 bns0 bcnt0 ens ecnt bns bcnt
	for ((i = 0; i < CPUS; i++)); do "$@" $((SECS + 30)) >/dev/null & done
	sleep 2
	"$EMBER" record -a --no-java -F 999 -o "$T/all.folded" 2>"$T/all.err" &
	e=$!
	bpftrace -e "$REFERENCE" >/dev/null 2>"$T/bpftrace.err" &
	b=$!
	until_sampling $e
	until_sampling $b
	read -r ens0 ecnt0 < <(bpf_time $e)
	read -r bns0 bcnt0 < <(bpf_time $b)
	sleep "$SECS"
	read -r ens ecnt < <(bpf_time $e)
	read -r bns bcnt < <(bpf_time $b)
	kill -KILL $b
	kill -INT $e
	wait $e 2>/dev/null || true
	jobs -p | xargs -r kill 2>/dev/null || true
	wait 2>/dev/null || true
	echo "$(((ens - ens0) / (ecnt - ecnt0))) $(((bns - bns0) / (bcnt - bcnt0)))"
}

echo "bench: $CPUS CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $SECS s runs, $REPS runs per setting"
echo
echo "Innermost function's share, ember and perf at once on one process, 999 Hz (by design 50 / 30 / 20):"
printf '  %-34s %-8s %6s %6s %6s %9s\n' workload tool alpha beta gamma samples
if [ -n "$PY" ]; then
	agree "$($PY -c 'import platform; print("CPython " + platform.python_version())') -X perf_jit" jitdump \
		"$PY" -X perf_jit tests/workloads/py_split.py
else
	echo "  CPython: no 3.13 or later here for -X perf_jit (set PYTHON): skipped"
fi
# --perf-basic-prof also turns on V8's log: kept out of the working directory.
agree "node $("$NODE" --version) --perf-basic-prof" fp \
	"$NODE" --perf-basic-prof --no-logfile-per-isolate --logfile="$T/v8.log" tests/workloads/js_split.js

echo
echo "BPF time per sample, system-wide at 999 Hz, one workload per CPU, ember and bpftrace attached together:"
printf '  %-28s %22s %22s %24s\n' workload "ember, ns" "bpftrace, ns" "ratio to bpftrace"
# cost NAME CMD...: one row, REPS runs of per_sample.
cost() {
	local name=$1 r em elo ehi bm blo bhi rm rlo rhi
	shift
	for ((r = 0; r < REPS; r++)); do per_sample "$@"; done >"$T/cost"
	read -r em elo ehi < <(awk '{ print $1 }' "$T/cost" | spread)
	read -r bm blo bhi < <(awk '{ print $2 }' "$T/cost" | spread)
	read -r rm rlo rhi < <(awk '{ print $1 / $2 }' "$T/cost" | spread)
	printf '  %-28s %22s %22s %24s\n' "$name" "$em [$elo-$ehi]" "$bm [$blo-$bhi]" \
		"$(printf '%.2f [%.2f-%.2f]' "$rm" "$rlo" "$rhi")"
}
cost "native (throughput, C)" build/workloads/throughput
while read -r py; do
	v=$("$py" -c 'import platform, sys; print(platform.python_version() if sys.version_info >= (3, 8) else "")')
	[ -n "$v" ] || continue  # ember names 3.8 and later
	cost "python $v ($([ "$py" = /usr/bin/python3 ] && echo Debian || echo pyenv))" "$py" tests/workloads/py_split.py
done < <(cpythons)
while read -r node; do
	cost "node $("$node" --version)$([[ $node == */debian-nodejs/* ]] && echo " (Debian)")" "$node" tests/workloads/js_split.js
done < <(nodes)
