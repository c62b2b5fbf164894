#!/usr/bin/env bash
# ember record -e alloc and -e lock on JVMs, through ember's agent:
# allocation bytes by allocated class (top frame) at a 3:1 ratio; --live
# keeps only the class still reachable at the end; monitor contention with
# the waiter's stack and the monitor's class.
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"

# A sample every 16 KiB: ~50000 samples; at the default 512 KiB, ~2500
# made +-10% on 3:1 only 2.3 sigma of the Big share.
"$EMBER" record -e alloc --alloc-interval 16384 -o "$TMP/alloc.folded" -- java -cp "$TMP/classes" AllocRatio 3 >/dev/null 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
big=$(weight "$TMP/alloc.folded" ';AllocRatio.allocBig_\[[ji0]\];AllocRatio\$Big [0-9]+$')
small=$(weight "$TMP/alloc.folded" ';AllocRatio.allocSmall_\[[ji0]\];AllocRatio\$Small [0-9]+$')
echo "alloc: Big $((big >> 20)) MiB, Small $((small >> 20)) MiB (3:1 by construction)"
(( big > 0 && small > 0 )) || fail "a class is missing as top frame: $(head -5 "$TMP/alloc.folded")"
(( big * 100 / small >= 270 && big * 100 / small <= 330 )) || fail "Big:Small = $big:$small, not 3:1 ±10%"
# Each JVM's heap and GCs over the recording, from its hsperfdata.
assert_contains "$TMP/err" '^  jvm [0-9]+ +JVM [0-9]+ \(AllocRatio, [A-Za-z0-9 ]+\): heap .* [1-9][0-9]* young GCs? ' \
	"no jvm summary with young GCs for AllocRatio: $(grep '^  jvm' "$TMP/err")"

# --live: the agent from the start (LiveLeak keeps its leak early on); the
# JVM's exit ends the stream after a last GC.
"$EMBER" record -e alloc --live -o "$TMP/live.folded" -- java -cp "$TMP/classes" LiveLeak 2 >/dev/null 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
kept=$(weight "$TMP/live.folded" 'LiveLeak\$Kept [0-9]+$')
dropped=$(weight "$TMP/live.folded" 'LiveLeak\$Dropped [0-9]+$')
echo "alloc --live: Kept $((kept >> 10)) KiB, Dropped $((dropped >> 10)) KiB"
(( kept > 0 )) || fail "--live lost the kept class: $(cat "$TMP/live.folded" "$TMP/err")"
(( dropped * 20 <= kept )) || fail "--live still shows $dropped bytes of Dropped (kept: $kept)"

"$EMBER" record -e lock -o "$TMP/lock.folded" -- java -cp "$TMP/classes" Contention 2 >/dev/null 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
monitor=$(weight "$TMP/lock.folded" ';Contention.worker_\[[ji0]\];Contention.critical_\[[ji0]\];Contention\$SharedLock [0-9]+$')
echo "lock: $((monitor / 1000000)) ms waiting to enter Contention\$SharedLock"
(( monitor > 0 )) || fail "no contention on SharedLock under Contention.critical: $(head -5 "$TMP/lock.folded")"

# alloc needs a JVM: a clear word for other targets, per target.
background "$WORKLOADS/spinner" 10
"$EMBER" record -e alloc -p "${BACKGROUND[-1]}" -d 0.5 -o "$TMP/x.folded" 2>"$TMP/err" || fail "ember exited $?"
assert_contains "$TMP/err" "is not a HotSpot JVM: -e alloc sees Java allocations only"
"$EMBER" record -e alloc --no-java -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "-e alloc --no-java was accepted"
assert_contains "$TMP/err" "needs ember's Java agent"
true
