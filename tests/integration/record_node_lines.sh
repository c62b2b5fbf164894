#!/usr/bin/env bash
# kind: structural
# JavaScript lines (--lines): js_lines.js under each node of lib.sh's
# nodes, recorded with -p once warm. Its frames carry the line each
# function runs (a caller's: its call, found by the comment that ends
# it; a leaf's: a line of its body):
# - as V8 optimizes it (on this host, not under the emulator, where V8
#   tiers up too slowly): tick's frame at its call of handle, handle's at
#   its call of mix or of work, mix (inlined into handle by V8's
#   optimizing compiler) above it as a frame of its own;
# - with node --no-opt --always-sparkplug, all in baseline code: the same
#   lines, from the pc's bytecode by the code's bytecode offset table;
# - with node --no-opt --no-sparkplug, everything interpreted: the same
#   lines, from the frames' bytecode offsets, where V8 keeps them (the
#   leaf's lives in a register its bytecode handlers may reuse: then the
#   frame has no line).
# A wrong line is a failure (up to one sample in 200).
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v node >/dev/null || skip "no node: scripts/deps.sh installs nodejs"
WORKLOAD=$ROOT/tests/workloads/js_lines.js
least=300 share=95
[[ ${EMBER_EMULATED:-} ]] && least=100 share=90

# line MARK: the line ending in "// MARK". body NAME: the lines of
# function NAME, as an alternation.
line() { grep -n -- "// $1\$" "$WORKLOAD" | cut -d: -f1; }
body() { awk -v f="^function $1\\(" '$0 ~ f { on = 1 } on { printf "%s%d", s, NR; s = "|" } on && /^}/ { exit }' "$WORKLOAD"; }
tick=$(line tick-handle) to_mix=$(line handle-mix) to_work=$(line handle-work)
mix=$(body mix) work=$(body work) tick_body=$(body tick) handle_body=$(body handle)
[[ $tick && $to_mix && $to_work && $mix =~ \| && $work =~ \| && $tick_body =~ \| && $handle_body =~ \| ]] ||
	fail "js_lines.js's marked lines not found"
# A JavaScript frame: FUNCTION (js_lines.js:LINES).
js() { printf '%s \\(js_lines\\.js:(%s)\\)' "$1" "$2"; }
handle_chain="$(js tick "$tick");$(js handle "$to_mix|$to_work")"

# wrong FUNCTION LINES: samples in which FUNCTION's frame names a line not among LINES.
wrong() {
	echo $(($(weight "$TMP/out.folded" "$(js "$1" '[0-9]+')") - $(weight "$TMP/out.folded" "$(js "$1" "$2")")))
}

# check LABEL NODE LEAF [FLAGS...]: the workload under NODE FLAGS, recorded
# and checked; LEAF% of mix's and work's frames at least carry their line.
check() {
	local label=$1 node=$2 leaf=$3 pid handle whole mixed worked in_mix in_work bad
	shift 3
	start_ready "$TMP/out" "$node" "$@" "$WORKLOAD" 600 || fail "$label: the workload did not start: $(cat "$TMP/out")"
	pid=$ready_pid
	record_for_cpu 3 $pid -F 499 --threads --lines -o "$TMP/out.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
	grep -E '^  js ' "$TMP/err"
	handle=$(weight "$TMP/out.folded" "tid=$pid\\];(.*;)?handle \\(js_lines\\.js")
	whole=$(weight "$TMP/out.folded" "tid=$pid\\];(.*;)?$handle_chain(;mix \\(js_lines\\.js[:)]| [0-9]+$|;work \\(js_lines\\.js[:)])")
	mixed=$(weight "$TMP/out.folded" "tid=$pid\\];(.*;)?$(js tick "$tick");$(js handle "$to_mix");mix \\(js_lines\\.js")
	worked=$(weight "$TMP/out.folded" "tid=$pid\\];(.*;)?$(js tick "$tick");$(js handle "$to_work");work \\(js_lines\\.js")
	in_mix=$(weight "$TMP/out.folded" "$(js mix "$mix")")
	in_work=$(weight "$TMP/out.folded" "$(js work "$work")")
	bad=$(($(wrong tick "$tick_body") + $(wrong handle "$handle_body") + $(wrong mix "$mix") + $(wrong work "$work")))
	echo "$label: $whole of $handle samples in handle with tick's and handle's lines right; mix $in_mix of $mixed with its line, work $in_work of $worked; $bad wrong lines"
	((handle >= least)) || fail "$label: only $handle samples in handle in 3 s of its CPU time"
	((whole * 100 >= handle * share)) ||
		fail "$label: $whole of $handle samples in handle have tick's and handle's lines right: $(grep "handle (js_lines" "$TMP/out.folded" | grep -vE "$handle_chain" | head -3 | sed 's/.*processImmediate/... processImmediate/' | cut -c1-600)"
	((mixed * 50 >= handle && worked * 50 >= handle)) ||
		fail "$label: mix's ($mixed) or work's ($worked) share of handle's $handle samples is below 2%"
	((in_mix * 100 >= mixed * leaf && in_work * 100 >= worked * leaf)) ||
		fail "$label: mix's or work's frames without their line: $(grep -E "mix \\(js_lines\\.js\\)|work \\(js_lines\\.js\\)" "$TMP/out.folded" | head -3 | sed 's/.*processImmediate/... processImmediate/' | cut -c1-600)"
	# A line ember cannot be sure of is left out, never guessed: at most
	# one sample in 200 (a handler's register reused with a plausible value).
	((bad * 200 <= handle)) ||
		fail "$label: $bad samples with a wrong line: $(grep -E "(tick|handle|mix|work) \\(js_lines\\.js:" "$TMP/out.folded" | grep -vE "$(js mix "$mix")|$(js work "$work")" | head -3 | cut -c1-600)"
	kill "$pid"
}

# osr NODE: js_chains.js, whose outer runs one long loop: V8 optimizes it
# on stack replacement (with middle inlined), code outer's JSFunction does
# not hold. Its frame still has its line, from the code its feedback
# vector keeps (V8 11+: node 18's keeps it elsewhere, and its frame goes
# without).
osr() {
	local node=$1 pid outer lined chains=$ROOT/tests/workloads/js_chains.js call
	call=$(grep -n 'shapes.middle()' "$chains" | cut -d: -f1)
	start_ready "$TMP/out" "$node" "$chains" 600 || fail "js_chains.js did not start: $(cat "$TMP/out")"
	pid=$ready_pid
	sleep 2 # long enough to be optimized on stack replacement
	record_for_cpu 3 $pid -F 499 --lines -o "$TMP/out.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
	outer=$(weight "$TMP/out.folded" "outer \\(js_chains\\.js")
	lined=$(weight "$TMP/out.folded" "outer \\(js_chains\\.js:$call\\);((Shapes\\.)?middle \\(js_chains\\.js:[0-9]+\\);)?inner \\(js_chains\\.js:[0-9]+\\)")
	echo "node $("$node" --version), optimized on stack replacement: $lined of $outer samples in outer at line $call, inner below"
	((outer >= least && lined * 100 >= outer * 95)) ||
		fail "outer's frames without their line: $(grep -m3 -E 'outer \(js_chains\.js\)' "$TMP/out.folded" | sed 's/.*emit/... emit/' | cut -c1-400)"
	kill "$pid"
}

for node in $(nodes); do
	if [[ ! ${EMBER_EMULATED:-} ]]; then
		check "node $("$node" --version), optimized" "$node" 95
		[[ $("$node" --version) == v18.* ]] || osr "$node"
	fi
	check "node $("$node" --version), baseline" "$node" 95 --no-opt --always-sparkplug
	check "node $("$node" --version), interpreted" "$node" 50 --no-opt --no-sparkplug
done
