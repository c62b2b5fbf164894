#!/usr/bin/env bash
# Java allocation and lock profiling, the agent's side: JVMs run with
# libember-agent.so loaded directly (alloc, live, lock options), their
# streams turned into folded stacks by build/tools/java_events_dump through
# user/java_profiles (what `ember record` uses). Checks: AllocRatio's 3:1
# bytes (at 1:1 counts) within ±10% with the class as the top frame; with
# live, only LiveLeak's kept class (stream ended by a stop, and at JVM exit
# with G1; no hang at exit with ZGC); Contention's waiting stack and the
# monitor's class; attach, re-attach with other options, stop, and 10
# attach/stop cycles on a running JVM (jcmd JVMTI.agent_load).
. "$(dirname "$0")/../lib.sh"
DUMP=$ROOT/build/tools/java_events_dump
AGENT=$ROOT/build/libember-agent.so
[ -x "$DUMP" ] || fail "no $DUMP: make build/tools/java_events_dump"
[ -f "$AGENT" ] || fail "no $AGENT: make build/libember-agent.so"
java_classes "$TMP/classes"
JAVA=(java -Xms512m -Xmx512m -cp "$TMP/classes")

# weight_of FILE REGEX: summed weights of the folded lines matching, as an
# integer (lib.sh's weight prints large sums in awk's %g).
weight_of() { grep -E -- "$2" "$1" | awk '{ s += $NF } END { printf "%.0f\n", s }'; }
# ratio A B -> A/B with 3 decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? a / b : 0 }'; }
within() { awk -v x="$1" -v want="$2" -v tol="$3" 'BEGIN { exit !(x >= want * (1 - tol) && x <= want * (1 + tol)) }'; }
# size_of STREAM CLASS: the object size the JVM reported for the class
size_of() {
	awk -v c="$2" '$1 == "K" && $3 == c { id = $2 } $1 == "A" && $5 == id { print $4; exit }' "$1"
}

# --- alloc: 3:1 bytes, 1:1 objects, the class on top. 40M rounds at least
# (5 GB: 10,000 samples of 512 KiB), however starved the JVM.
"${JAVA[@]}" -agentpath:"$AGENT"=out="$TMP/ratio-{pid}",alloc=524288 AllocRatio 4 0 40000000 >"$TMP/ratio.out" ||
	fail "AllocRatio with the agent exited $?"
stream=$(ls "$TMP"/ratio-*)
big_size=$(size_of "$stream" 'AllocRatio$Big') small_size=$(size_of "$stream" 'AllocRatio$Small')
[ "$big_size" = 96 ] && [ "$small_size" = 32 ] ||
	fail "AllocRatio's objects are $big_size and $small_size bytes, not 96 and 32: the workload is not 3:1 here"
"$DUMP" alloc "$stream" >"$TMP/ratio.folded" 2>"$TMP/ratio.info" || fail "java_events_dump: $(cat "$TMP/ratio.info")"
"$DUMP" alloc-objects "$stream" >"$TMP/ratio-objects.folded" 2>/dev/null || fail "java_events_dump alloc-objects failed"
assert_contains "$TMP/ratio.folded" '^java;.*AllocRatio\.main_\[j\];AllocRatio\.allocBig_\[j\];AllocRatio\$Big [0-9]+$' \
	"no main;allocBig;AllocRatio\$Big stack (class as the top frame)"
assert_contains "$TMP/ratio.folded" '^java;.*AllocRatio\.allocSmall_\[j\];AllocRatio\$Small [0-9]+$' \
	"no allocSmall;AllocRatio\$Small stack"
big=$(weight_of "$TMP/ratio.folded" 'AllocRatio\$Big [0-9]+$')
small=$(weight_of "$TMP/ratio.folded" 'AllocRatio\$Small [0-9]+$')
bytes_ratio=$(ratio "$big" "$small")
big_n=$(weight_of "$TMP/ratio-objects.folded" 'AllocRatio\$Big [0-9]+$')
small_n=$(weight_of "$TMP/ratio-objects.folded" 'AllocRatio\$Small [0-9]+$')
rounds=$(awk '/^rounds/ { print $2 }' "$TMP/ratio.out")
echo "alloc: Big $big bytes, Small $small bytes: ratio $bytes_ratio (want 3); objects $big_n : $small_n," \
	"$rounds allocated each; $(grep 'alloc samples' "$TMP/ratio.info")"
within "$bytes_ratio" 3 0.10 || fail "byte ratio $bytes_ratio is not 3 ±10%"
within "$(ratio "$big_n" "$rounds")" 1 0.10 || fail "estimated Big objects $big_n, allocated $rounds: not ±10%"
within "$(ratio "$small_n" "$rounds")" 1 0.10 || fail "estimated Small objects $small_n, allocated $rounds: not ±10%"
within "$(ratio "$big" "$((rounds * 96))")" 1 0.10 || fail "estimated Big bytes $big, allocated $((rounds * 96)): not ±10%"

# --- live: only what is still reachable at the end. The stream ends with a
# `stop` (a full GC first, as at the end of `ember record -p PID --live`).
command -v jcmd >/dev/null || skip "jcmd missing (openjdk-17-jdk-headless): needed to stop the agent"
# jcmd parses key=value itself unless the agent's options are quoted inside.
load() {  # load PID OPTIONS
	jcmd "$1" JVMTI.agent_load "$AGENT" "\"$2\"" >"$TMP/jcmd.out" 2>&1 && grep -q 'return code: 0' "$TMP/jcmd.out" ||
		fail "jcmd JVMTI.agent_load $2: $(cat "$TMP/jcmd.out")"
}
# 40M rounds at least (the kept list full, 20 times its bytes dropped),
# however starved the JVM.
"${JAVA[@]}" -agentpath:"$AGENT"=out="$TMP/leak.map",alloc=524288,live LiveLeak 4 30 40000000 >"$TMP/leak.out" &
leaker=$!
BACKGROUND+=($leaker)
for _ in $(seq 1200); do grep -q '^rounds' "$TMP/leak.out" && break; sleep 0.1; done
grep -q '^rounds' "$TMP/leak.out" || fail "LiveLeak did not finish its churn in 120 s"
load "$leaker" stop
kill "$leaker"
stream=$TMP/leak.map
grep -q '^O live-end gc' "$stream" || fail "live: the stop did not end the stream with a GC"
"$DUMP" alloc --live "$stream" >"$TMP/live.folded" 2>"$TMP/live.info" || fail "java_events_dump --live: $(cat "$TMP/live.info")"
"$DUMP" alloc "$stream" >"$TMP/all.folded" 2>/dev/null || fail "java_events_dump failed"
kept=$(weight_of "$TMP/live.folded" 'LiveLeak\$Kept [0-9]+$')
dropped_live=$(weight_of "$TMP/live.folded" 'LiveLeak\$Dropped [0-9]+$')
dropped_all=$(weight_of "$TMP/all.folded" 'LiveLeak\$Dropped [0-9]+$')
kept_count=$(awk '/^rounds/ { print $4 }' "$TMP/leak.out")
echo "live: Kept $kept bytes live (kept $((kept_count * 48))), Dropped $dropped_live live of $dropped_all allocated;" \
	"$(tr '\n' ';' <"$TMP/live.info")"
assert_contains "$TMP/live.folded" '^java;.*LiveLeak\.keep_\[j\];LiveLeak\$Kept [0-9]+$' "live: no keep;LiveLeak\$Kept stack"
(( dropped_all > 10 * kept )) || fail "LiveLeak did not drop much more than it kept: $dropped_all vs $kept"
(( dropped_live == 0 )) || fail "live graph shows $dropped_live bytes of Dropped, which were all unreachable"
within "$(ratio "$kept" "$((kept_count * 48))")" 1 0.30 || fail "live Kept $kept bytes, kept $((kept_count * 48)): not ±30%"
grep -q '^samples not followed' "$TMP/live.info" && fail "live table overflowed: $(cat "$TMP/live.info")"
# At JVM exit: a final GC with G1 (the default), exact again; none with ZGC,
# whose forced GC would hang the exit (its threads are stopped by VMDeath):
# the stream says so, and the JVM exits promptly.
for gc in G1GC ZGC; do
	rm -f "$TMP/exit.map"
	timeout 60 "${JAVA[@]}" -XX:+Use$gc -agentpath:"$AGENT"=out="$TMP/exit.map",alloc=524288,live LiveLeak 2 >/dev/null ||
		fail "LiveLeak with live and $gc exited $? (124: hung at exit)"
	"$DUMP" alloc --live "$TMP/exit.map" >"$TMP/exit.folded" 2>"$TMP/exit.info" || fail "java_events_dump --live (exit)"
	assert_contains "$TMP/exit.folded" 'LiveLeak\$Kept [0-9]+$' "live at exit ($gc): no Kept"
	dropped=$(weight_of "$TMP/exit.folded" 'Dropped [0-9]+$')
	echo "live at exit ($gc): Kept $(weight_of "$TMP/exit.folded" 'Kept [0-9]+$'), Dropped $dropped bytes;" \
		"$(grep '^live:' "$TMP/exit.info")"
	case $gc in
	G1GC)
		grep -q '^O live-end gc' "$TMP/exit.map" || fail "live at exit (G1): no final GC (no live-end gc line)"
		(( dropped == 0 )) || fail "live at exit (G1): $dropped bytes of Dropped after the final GC" ;;
	ZGC) grep -q '^O live-end none' "$TMP/exit.map" || fail "live at exit (ZGC): no live-end none line" ;;
	esac
done

# --- lock: the waiter's stack and the monitor's class
# Each holder sleeps 5 ms in the monitor: the other waits however busy the
# machine is, as long as the workload's own clock says.
"${JAVA[@]}" -agentpath:"$AGENT"=out="$TMP/lock-{pid}",lock Contention 3 20000 2000 2 5 >"$TMP/lock.out" ||
	fail "Contention with the agent exited $?"
stream=$(ls "$TMP"/lock-*)
"$DUMP" lock --threads "$stream" >"$TMP/lock.folded" 2>"$TMP/lock.info" || fail "java_events_dump lock: $(cat "$TMP/lock.info")"
for t in 1 2; do
	assert_contains "$TMP/lock.folded" "^java;\\[contender-$t tid=[0-9]+\\];.*Contention\\.worker_\\[j\\];Contention\\.critical_\\[j\\];Contention\\\$SharedLock [0-9]+\$" \
		"lock: no contender-$t;...;worker;critical;SharedLock stack"
done
waited=$(weight_of "$TMP/lock.folded" '.')
measured=$(awk '$1 == "waited_ns" { print $2 }' "$TMP/lock.out")
echo "lock: $((waited / 1000000)) ms waited in 3 s by 2 threads (they measured $((measured / 1000000)) ms); $(grep 'lock samples' "$TMP/lock.info")"
(( measured > 1000000000 )) || fail "lock: the workload barely contended ($measured ns)"
# The agent's waits start as a thread blocks, after HotSpot's short spin.
(( waited * 100 >= measured * 90 && waited * 100 <= measured * 101 )) ||
	fail "lock: $waited ns waited, not the $measured ns the workload measured -10%"

# --- attach to a running JVM, re-attach with other options, stop; cycles
# (it runs until the test ends: sixteen jcmd runs take a minute on a loaded host)
"${JAVA[@]}" AllocRatio 3600 >/dev/null &
jvm=$!
BACKGROUND+=($jvm)
sleep 1
count() { grep -c "^$1 " "$2"; }
load "$jvm" "out=$TMP/att1,alloc=65536"
sleep 1
(( $(count A "$TMP/att1") > 100 )) || fail "attach with alloc: no allocation samples"
load "$jvm" "out=$TMP/att2,lock"
sleep 1
a1=$(count A "$TMP/att1")
sleep 0.5
(( $(count A "$TMP/att1") == a1 )) || fail "re-attach: the first stream still grows"
(( $(count A "$TMP/att2") == 0 )) || fail "re-attach without alloc: allocation samples still come"
grep -q '^O lock-interval' "$TMP/att2" || fail "re-attach with lock: no lock-interval line"
grep -q '^L ' "$TMP/att2" || fail "re-attach: the JIT code was not replayed"
load "$jvm" "out=$TMP/att3,alloc=65536,live"
sleep 1
load "$jvm" stop
followed=$(awk '$1 == "A" && $6 > 0' "$TMP/att3" | wc -l)
freed=$(count F "$TMP/att3")
echo "attach: $followed samples followed, $freed seen freed by the stop"
(( followed > 100 && freed > followed / 2 )) || fail "live after attach: $followed followed, $freed freed (the stop's GC frees all but 8192 ring entries)"
size=$(stat -c %s "$TMP/att3")
sleep 0.5
[ "$(stat -c %s "$TMP/att3")" = "$size" ] || fail "stop: the stream still grows"
for i in $(seq 10); do
	load "$jvm" "out=$TMP/cycle$i,alloc=65536,live,lock"
	sleep 0.2
	load "$jvm" stop
done
kill -0 "$jvm" 2>/dev/null || fail "JVM died during attach/stop cycles"
"$DUMP" alloc "$TMP/cycle10" >"$TMP/cycle.folded" 2>"$TMP/cycle.info" || fail "cycle stream unreadable"
assert_contains "$TMP/cycle.folded" 'AllocRatio\$(Big|Small) [0-9]+$' "no allocation samples in the last cycle"
grep -q 'bad event lines' "$TMP/cycle.info" && fail "bad lines in the cycle stream: $(cat "$TMP/cycle.info")"
exit 0
