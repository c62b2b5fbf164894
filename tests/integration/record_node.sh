#!/usr/bin/env bash
# kind: structural
# JavaScript frames (bpf/v8.bpf.c, user/runtimes/v8_frames): js_chains.js
# under each node of lib.sh's nodes (the one in PATH, and Debian 12's
# nodejs 18 where that is another), recorded with -p once its threads spin. Every sample of the main thread
# carries outer and inner, named with their script, in place of V8's
# interpreter and JIT code (Shapes.middle may be inlined into outer by
# V8's optimizing compiler: its frame is then outer's, as V8's own stack
# traces of inlined code are not read yet); the worker thread (an isolate
# of its own) carries workerOuter.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v node >/dev/null || skip "no node: scripts/deps.sh installs nodejs"
WORKLOAD=$ROOT/tests/workloads/js_chains.js
# Under the emulator (the kernel matrix) a thread gets a fifth of the
# samples or less (a tenth when the host is busy), and V8 tiers its code
# up as slowly: counts and shares are asked of a longer, slower run.
least=300 share=95 left=1 seconds=3
[[ ${EMBER_EMULATED:-} ]] && least=100 share=90 left=10 seconds=8

# A JavaScript frame: FUNCTION (js_chains.js).
js() { printf '%s \\(js_chains\\.js\\)' "$1"; }

# check NODE: the workload under NODE, recorded and checked.
check() {
	local node=$1 version pid main whole engine worker_tid worker worker_whole
	version=$("$node" --version)
	start_ready "$TMP/out" "$node" "$WORKLOAD" 600 || fail "node $version: the workload did not start: $(cat "$TMP/out")"
	pid=$ready_pid
	"$EMBER" record -F 499 -d $seconds -p $pid --threads -o "$TMP/out.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
	grep -E '^  js ' "$TMP/err"
	main=$(weight "$TMP/out.folded" "^node[^;]*;\\[[^]]* tid=$pid\\];")
	whole=$(weight "$TMP/out.folded" "tid=$pid\\];(.*;)?$(js outer);((Shapes\\.)?middle \\(js_chains\\.js\\);)?$(js inner)(;| [0-9]+$)")
	engine=$(weight "$TMP/out.folded" "tid=$pid\\];(.*;)?(Builtins_InterpreterEntryTrampoline|\\[anon\\])(;| )")
	worker_tid=$(grep -E "$(js workerOuter)" "$TMP/out.folded" | grep -oE ' tid=[0-9]+\]' | sort | uniq -c | sort -rn | head -1 | grep -oE '[0-9]+\]' | tr -d ']')
	[ -n "$worker_tid" ] || fail "node $version: no sample of the worker thread names workerOuter: $(grep -m3 -v "tid=$pid\\]" "$TMP/out.folded" | cut -c1-600)"
	worker=$(weight "$TMP/out.folded" "tid=$worker_tid\\];")
	worker_whole=$(weight "$TMP/out.folded" "tid=$worker_tid\\];(.*;)?$(js workerOuter)(;| )")
	echo "node $version: main thread $whole/$main samples whole, $engine with V8's interpreter or JIT code left; worker thread $worker_whole/$worker"
	((main >= least)) || fail "node $version: only $main samples of the main thread in $seconds s"
	((whole * 100 >= main * share)) ||
		fail "node $version: $whole of $main main-thread samples carry outer and inner: $(grep "tid=$pid\\]" "$TMP/out.folded" | grep -vE "$(js inner)" | head -3 | cut -c1-900)"
	((engine * 100 <= main * left)) || fail "node $version: $engine samples keep V8's code: $(grep -m2 -E 'InterpreterEntryTrampoline|\[anon\]' "$TMP/out.folded" | cut -c1-900)"
	((worker >= least && worker_whole * 100 >= worker * share)) ||
		fail "node $version: $worker_whole of $worker worker-thread samples carry workerOuter"
	kill "$pid"
}

for node in $(nodes); do check "$node"; done
