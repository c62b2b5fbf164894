#!/usr/bin/env bash
# Java: combined kernel + native + Java stacks, at start-up (-- java) and by
# attaching to a running JVM; the same top methods both ways; the
# -XX:+PreserveFramePointer diagnosis (--unwind fp); 10 attach/detach cycles under load;
# JVMs that refuse, are not JVMs, or do not answer in time.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
# Compile thresholds at a tenth: main's loop is compiled (OSR) after ~0.3 s
# of CPU, not 3 s, so stacks hold a compiled main even on a busy machine.
JAVA=(java -XX:CompileThresholdScaling=0.1 -cp "$TMP/classes")

# share_of FILE A B: A's share (per mille) of the samples in A or B
share_of() {
	local a b
	a=$(weight "$1" "$2_\\[(j|i)\\]( |;)")
	b=$(weight "$1" "$3_\\[(j|i)\\]( |;)")
	(( a + b > 0 )) || { echo 0; return; }
	echo $(( 1000 * a / (a + b) ))
}

# --- start-up: the agent comes in through JAVA_TOOL_OPTIONS. 999 Hz: on a
# busy machine main gets a fraction of a CPU, and the shares compared below
# need hundreds of samples (at 199 Hz and load 12 it had 154: 15 points
# apart was then 2.7 sigma).
"$EMBER" record -F 999 --threads -o "$TMP/start.folded" -- "${JAVA[@]}" Workload 6 2>"$TMP/start.err" ||
	fail "start-up: ember exited $?: $(cat "$TMP/start.err")"
out=$TMP/start.folded
assert_contains "$out" '^java;\[java tid=[0-9]+\];.*JavaMain;.*;Workload\.main_\[(j|i)\];(.*;)?Workload\.hotA_\[(j|i)\]' \
	"no java;...;JavaMain;...;Workload.main_[j];...;Workload.hotA chain: $(grep 'JavaMain' "$out" | sort -t' ' -k2 -nr | head -3 | cut -c1-600) $(grep '^  java' "$TMP/start.err")"
assert_contains "$out" ';start_thread;|thread_native_entry' "no JVM native frames at the thread root"
assert_contains "$out" 'Workload\.writeChunk_\[(j|i)\];.*;[a-z_0-9]+_\[k\]' "no kernel frames under a Java method"
assert_contains "$out" '^java;\[C[12] CompilerThre tid=[0-9]+\];' "JIT compiler thread not under its name"
start_share=$(share_of "$out" Workload.hotA Workload.hotB)
echo "start-up: hotA share of hotA+hotB $start_share/1000"
# Complete stacks: Java samples whose stack reaches the thread's entry.
java_samples=$(weight "$out" 'Workload\.(hotA|hotB)_')
complete=$(weight "$out" '(JavaMain|thread_native_entry).*Workload\.(hotA|hotB)_')
echo "complete Java stacks: $complete of $java_samples"
(( java_samples >= 100 )) || fail "only $java_samples samples in hotA/hotB"
(( 100 * complete >= 90 * java_samples )) || fail "only $complete of $java_samples Java stacks reach the thread root"

# --- attach to a running JVM: the same top methods
"${JAVA[@]}" -XX:+PreserveFramePointer -XX:+PrintCompilation Workload 300 >"$TMP/attach.jit" &
jvm=$!
BACKGROUND+=($jvm)
wait_compiled "$TMP/attach.jit" Workload::hotA Workload::hotB Workload::main@
"$EMBER" record -p "$jvm" -F 999 -d 4 -o "$TMP/attach.folded" 2>"$TMP/attach.err" ||
	fail "attach: ember exited $?: $(cat "$TMP/attach.err")"
grep -q "PreserveFramePointer" "$TMP/attach.err" && fail "attach: false PreserveFramePointer warning: $(cat "$TMP/attach.err")"
assert_contains "$TMP/attach.folded" 'Workload\.main_\[(j|i)\];(.*;)?Workload\.hotA_\[(j|i)\]' "attach: no main;...;hotA chain"
attach_share=$(share_of "$TMP/attach.folded" Workload.hotA Workload.hotB)
echo "attached: hotA share $attach_share/1000"
diff=$(( attach_share - start_share ))
(( diff < 0 )) && diff=$(( -diff ))
(( diff <= 150 )) || fail "top methods differ: hotA share $start_share at start-up, $attach_share attached"

# --- 10 attach/detach cycles under load leave the JVM healthy
embers=()
for i in $(seq 10); do
	"$EMBER" record -p "$jvm" -d 0.2 -o "$TMP/cycle.folded" 2>"$TMP/cycle.err" &
	embers+=($!)
	wait $! || fail "cycle $i: ember exited $?: $(cat "$TMP/cycle.err")"
done
kill -0 "$jvm" || fail "JVM died during attach/detach cycles"
"$EMBER" record -p "$jvm" -d 1 -o "$TMP/after.folded" 2>/dev/null &
embers+=($!)
wait $! || fail "attach after the cycles failed"
assert_contains "$TMP/after.folded" 'Workload\.hotA_\[(j|i)\]' "no Java frames after 10 cycles"
# The agent directories of these recordings only (/tmp/ember-EMBER-*): a
# system-wide ember elsewhere on the machine attaches to this JVM too.
for e in "${embers[@]}"; do
	left=$(ls -d /tmp/ember-"$e"-* 2>/dev/null)
	[ -z "$left" ] || fail "left behind after the cycles: $left"
done

# --- inlined frames: an address takes those of the first debug-info pc at
# or after it, so pcs of the compiled method alone count too. C1 code
# (debug info at calls and safepoints only) once put main's loop, inlined
# hotA and hotB, under the Thread.join inlined after it (up to 20% of main).
"${JAVA[@]}" -XX:TieredStopAtLevel=1 -XX:+PrintCompilation Workload 60 >"$TMP/c1.jit" &
c1=$!
BACKGROUND+=($c1)
wait_compiled "$TMP/c1.jit" Workload::main@
# Recordings of 2 s until main's compiled code has 500 samples: on a busy
# machine main gets a fraction of a CPU.
: >"$TMP/c1.folded"
for _ in $(seq 10); do
	"$EMBER" record -p "$c1" -F 999 -d 2 -o "$TMP/c1.part.folded" 2>"$TMP/c1.err" ||
		fail "C1: ember exited $?: $(cat "$TMP/c1.err")"
	cat "$TMP/c1.part.folded" >>"$TMP/c1.folded"
	main=$(weight "$TMP/c1.folded" 'Workload\.main_\[j\]')
	(( main >= 500 )) && break
done
joined=$(weight "$TMP/c1.folded" 'Workload\.main_\[j\];java\.lang\.Thread\.join')
echo "C1: $joined of $main samples in main's compiled loop put under Thread.join"
(( main >= 500 )) || fail "C1: only $main samples in main's compiled code"
(( joined == 0 )) || fail "C1: $joined of $main samples of main's loop under Thread.join, which runs after it"
kill "$c1"

# --- frame pointers only (--unwind fp) and no -XX:+PreserveFramePointer:
# said once with the fix, no garbage frames (ember's own unwinding needs
# no flag: java_unwind.sh)
"${JAVA[@]}" -XX:+PrintCompilation Workload 30 >"$TMP/nofp.jit" &
nofp=$!
BACKGROUND+=($nofp)
wait_compiled "$TMP/nofp.jit" Workload::hotA Workload::hotB
"$EMBER" record --unwind fp -p "$nofp" -d 2 -o "$TMP/nofp.folded" 2>"$TMP/nofp.err" || fail "no-fp: ember exited $?"
[ "$(grep -c 'runs without -XX:+PreserveFramePointer' "$TMP/nofp.err")" = 1 ] || fail "no-fp: message not said once: $(cat "$TMP/nofp.err")"
assert_contains "$TMP/nofp.folded" 'Workload\.hot[AB]_\[(j|i)\]' "no-fp: leaf Java frames missing"
# JIT stacks hold a compiled frame (_[j]); _[i] alone is native code inlined (DWARF).
bad=$(grep -E '_\[j\]' "$TMP/nofp.folded" | grep -v '^java;\[JIT frames without frame pointers' | head -1)
[ -z "$bad" ] || fail "no-fp: a JIT stack without the break marker: $bad"

# --- bad targets: not a JVM; a JVM that refuses attach. Others keep being profiled.
"$EMBER" record --java-attach $$ -d 0.5 -o "$TMP/notjvm.folded" 2>"$TMP/notjvm.err" || fail "not-a-JVM: ember exited $?"
grep -q "is not a HotSpot JVM" "$TMP/notjvm.err" || fail "not-a-JVM: no message: $(cat "$TMP/notjvm.err")"
"${JAVA[@]}" -XX:+DisableAttachMechanism Workload 30 >/dev/null &
BACKGROUND+=($!)
refusing=$!
background "$WORKLOADS/spinner" 30
sleep 1.5
"$EMBER" record -p "$refusing,${BACKGROUND[-1]}" -d 2 -o "$TMP/refuse.folded" 2>"$TMP/refuse.err" ||
	fail "refusing JVM: ember exited $?: $(cat "$TMP/refuse.err")"
grep -q "DisableAttachMechanism" "$TMP/refuse.err" || fail "refusing JVM: no message: $(cat "$TMP/refuse.err")"
assert_contains "$TMP/refuse.folded" '^spinner;.*spinner_loop' "refusing JVM stopped the other target's profile"
assert_contains "$TMP/refuse.folded" '^java;' "refusing JVM's native samples missing"

# --- a JVM that does not answer in time (stopped here; a large one on a
# busy host is only slow): ember waits --attach-timeout, names the option,
# and records the rest.
kill -STOP "$jvm"
began=$(date +%s%N)
"$EMBER" record --java-attach "$jvm" --attach-timeout 1 -d 0.5 -o "$TMP/stopped.folded" 2>"$TMP/stopped.err"
status=$?
took_ms=$(( ($(date +%s%N) - began) / 1000000 ))
kill -CONT "$jvm"
(( status == 0 )) || fail "stopped JVM: ember exited $status: $(cat "$TMP/stopped.err")"
grep -q "within 1 s.*wait longer with --attach-timeout" "$TMP/stopped.err" ||
	fail "stopped JVM: no timeout message naming --attach-timeout: $(cat "$TMP/stopped.err")"
echo "stopped JVM: ember gave up and finished in $took_ms ms"
