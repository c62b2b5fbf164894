#!/usr/bin/env bash
# `ember jvm PID --heap` on a JVM started with default flags, holding a
# static cache (tests/java/HeapLeak.java: 10,000 byte[4000] in ArrayLists
# in a HashMap in HeapLeak$Cache.ENTRIES) beside unrelated live data,
# garbage made all the time, and an int[] held by a thread's stack:
#   - the cache is where memory accumulates, its retained bytes within 5%
#     of the bytes the workload holds, its path from the static field
#     through the collections named in order; the int[]'s path names the
#     method and thread whose local holds it;
#   - instances per class equal `jcmd GC.class_histogram` taken right after
#     for the workload's classes, and all objects within 2% of its count
#     (the dump leaves out the objects CDS archived for classes not loaded
#     yet, and some only the JVM's internals hold); shallow bytes equal the
#     histogram's for classes whose fields the dump lists in full;
#   - the JVM keeps running, nothing of the dump is left in its /tmp; a
#     second dump, to folded stacks and a page, finds the same;
#   - a snapshot saved (--save) and a smaller JVM diffed against it (--diff);
#   - a JVM in its own pid and mount namespace (a container); the same leak
#     on JDK 21 or later, where one is installed;
#   - the classes' allocation sites from `ember record -e alloc --live` of a
#     JVM that fills its cache while recorded (--alloc);
#   - errors: not a JVM, a heap of unknown size without --force (then with
#     it), attach disabled, a JVM killed during the dump.
. "$(dirname "$0")/../lib.sh"
[ -x "$EMBER" ] || fail "no $EMBER: make build/ember"
command -v jcmd >/dev/null || skip "no jcmd: scripts/deps.sh installs openjdk-17-jdk-headless"
java_classes "$TMP/classes"

java -cp "$TMP/classes" HeapLeak 500 20 4000 120 >"$TMP/leak.out" &
jvm=$!
BACKGROUND+=($jvm)
for _ in $(seq 300); do grep -q '^held ' "$TMP/leak.out" && break; sleep 0.1; done
grep -q '^held ' "$TMP/leak.out" || fail "HeapLeak did not start: $(cat "$TMP/leak.out")"
read -r _ entries payloads held_bytes <<<"$(grep '^cache ' "$TMP/leak.out")"

"$EMBER" jvm "$jvm" --heap -n 100000 --save "$TMP/first.snap" >"$TMP/report" 2>"$TMP/err" || fail "--heap: exit $?: $(cat "$TMP/err")"
jcmd "$jvm" GC.class_histogram >"$TMP/histo" || fail "jcmd GC.class_histogram failed"
sed -n '1,/^Classes by retained/p' "$TMP/report" | sed 's/^/  /'
assert_contains "$TMP/err" "^ember: dumping the heap of JVM $jvm \([0-9]+ MiB in use\): the JVM is paused for a full GC and the dump$"
assert_contains "$TMP/report" "^JVM $jvm \(HeapLeak\): [0-9,]+ objects, .* reachable, [0-9,]+ references; the dump paused the JVM for [0-9.]+ s$"

# The first retainer: the cache's table, held by the static field.
first=$(grep -m1 -A2 '^Where memory accumulates' "$TMP/report" | tail -2)
path=$(grep -m1 '^        path:' "$TMP/report")
[[ $path == '        path:  static HeapLeak$Cache.ENTRIES → java.util.HashMap.table → java.util.HashMap$Node[]' ]] ||
	fail "the first retainer's path: '$path'"
read -r size unit _ <<<"$(head -1 <<<"$first")"
retained=$(awk -v s="$size" -v u="$unit" 'BEGIN { m = u == "GiB" ? 2^30 : u == "MiB" ? 2^20 : u == "KiB" ? 2^10 : 1; printf "%.0f", s * m }')
awk -v r="$retained" -v h="$held_bytes" 'BEGIN { exit !(r >= 0.95 * h && r <= 1.05 * h) }' ||
	fail "the cache retains $retained bytes, the workload holds $held_bytes"
echo "cache: retains $size $unit ($retained bytes), the workload holds $held_bytes bytes in $payloads byte[]"
grouped=$(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$payloads")
grep -m1 '^        holds:' "$TMP/report" | grep -qF "$grouped HeapLeak\$Payload" ||
	fail "the cache does not hold $grouped payloads: $(grep -m1 '^        holds:' "$TMP/report")"
assert_contains "$TMP/report" '^        path:  local in HeapLeak.hold \(thread "holder"\) → int\[\]$'

# Instances and bytes per class against HotSpot's own count, after its full GC.
java_name() { # HotSpot's "[B", "[Ljava.lang.Object;" -> "byte[]", "java.lang.Object[]"
	sed -E ':a; s/^\[(.*)$/\1[]/; ta' <<<"$1" | sed -E 's/^Z/boolean/; s/^B\[/byte[/; s/^C\[/char[/; s/^S\[/short[/;
		s/^I\[/int[/; s/^J\[/long[/; s/^F\[/float[/; s/^D\[/double[/; s/^L([^;]*);/\1/'
}
awk '!/^#/ { print $4, $1, $2 }' "$TMP/first.snap" | sort >"$TMP/ours"
while read -r rank count bytes name _; do
	[[ $rank =~ ^[0-9]+:$ ]] && echo "$(java_name "$name") $count $bytes"
done <"$TMP/histo" | sort >"$TMP/theirs"
for class in 'HeapLeak$Payload' 'java.util.HashMap' 'java.util.ArrayList' 'java.util.HashMap$Node[]'; do
	ours=$(awk -v c="$class" '$1 == c { print $2, $3 }' "$TMP/ours")
	theirs=$(awk -v c="$class" '$1 == c { print $2, $3 }' "$TMP/theirs")
	[ -n "$ours" ] && [ "$ours" = "$theirs" ] || fail "$class: $ours (instances, bytes) in the dump, $theirs in the histogram"
done
[ "$(awk '$1 == "HeapLeak$Payload" { print $2 }' "$TMP/ours")" = "$payloads" ] || fail "not $payloads payloads"
ours=$(awk '{ s += $2 } END { print s }' "$TMP/ours")
theirs=$(awk '{ s += $2 } END { print s }' "$TMP/theirs")
awk -v a="$ours" -v b="$theirs" 'BEGIN { exit !(a <= b && a >= 0.98 * b) }' ||
	fail "$ours objects reached, $theirs in the histogram"
echo "instances and bytes: HeapLeak\$Payload, HashMap, ArrayList... as in jcmd GC.class_histogram; $ours objects of its $theirs"

# The JVM runs on, and nothing of the dump is left in its /tmp; a second
# dump finds the same.
kill -0 "$jvm" || fail "the JVM is gone after the dump"
! compgen -G "/tmp/ember-*/heap.hprof" >/dev/null || fail "a dump is left in /tmp: $(compgen -G "/tmp/ember-*/heap.hprof")"
sleep 1
grep -q '^held ' "$TMP/leak.out" && kill -0 "$jvm" || fail "the JVM stopped"
"$EMBER" jvm "$jvm" --heap -n 5 -o "$TMP/heap.folded" --save "$TMP/heap.snap" >"$TMP/report2" 2>"$TMP/err" ||
	fail "second dump: $(cat "$TMP/err")"
assert_contains "$TMP/heap.snap" '^# ember heap snapshot: JVM [0-9]+ \(HeapLeak\), '
assert_contains "$TMP/heap.snap" "^$payloads [0-9]+ [0-9]+ HeapLeak\\\$Payload$"
[ "$(grep -m1 '^        path:' "$TMP/report2")" = "$path" ] || fail "the second dump found another first retainer"
# The dominator tree: the payloads' bytes under the cache's class, map and table.
stack='class HeapLeak$Cache;java.util.HashMap;java.util.HashMap$Node[];java.util.HashMap$Node;java.util.ArrayList;java.lang.Object[];HeapLeak$Payload;byte[]'
awk -v s="$stack" -v want=$((payloads * 4016)) '{ w = $NF; $NF = ""; sub(/ $/, "") } $0 == s { got = w } END { exit !(got == want) }' \
	"$TMP/heap.folded" || fail "no stack '$stack' of $((payloads * 4016)) bytes in $(head -5 "$TMP/heap.folded")"
"$EMBER" jvm "$jvm" --heap -n 1 -o "$TMP/heap.html" >/dev/null 2>"$TMP/err" || fail "to html: $(cat "$TMP/err")"
assert_contains "$TMP/heap.html" 'ember-data'
echo "second dump: the same first retainer; the dominator tree's folded stacks hold the payloads under the cache"

# Allocation sites: a second JVM fills its cache after 3 s (20,000
# payloads: ~30 samples of HeapLeak$Payload, 500 of byte[]), while
# `ember record -e alloc --live` follows its allocations (BPF: root).
if [ "$(id -u)" = 0 ] && [ -e /sys/kernel/btf/vmlinux ]; then
	java -cp "$TMP/classes" HeapLeak 1000 20 400 60 3 >"$TMP/late.out" &
	late=$!
	BACKGROUND+=($late)
	sleep 0.5
	# The recording by the plain build: under ASan, ember record -e alloc
	# --live ends with this JVM exiting 0, silently (seen on 2026-11-28,
	# the landed build of then too; not yet understood, see the session's
	# note). This script tests `ember jvm`; records are record_java_*'s.
	"$ROOT/build/ember" record -p "$late" -e alloc --live --alloc-interval 16384 -d 5 -o "$TMP/alloc.pb.gz" 2>"$TMP/err" ||
		fail "record -e alloc --live: $(tail -5 "$TMP/err")"
	grep -q '^held ' "$TMP/late.out" || fail "the late cache was not filled during the recording"
	"$EMBER" jvm "$late" --heap -n 12 --alloc "$TMP/alloc.pb.gz" >"$TMP/sites" 2>"$TMP/err" || fail "--alloc: $(cat "$TMP/err")"
	sed -n '/^Where the classes were allocated/,$p' "$TMP/sites" | sed 's/^/  /'
	assert_contains "$TMP/sites" '^  HeapLeak\$Payload: 100% HeapLeak.main$'
	assert_contains "$TMP/sites" '^  byte\[\]: (8[5-9]|9[0-9]|100)% HeapLeak\$Payload.<init> ← HeapLeak.main'
	echo "allocation sites: the payloads from HeapLeak.main, their bytes from Payload.<init>"
	# A recording is of one JVM, as it ran then: another's, or one whose
	# pid a later JVM took (its start time edited in the page), is refused.
	"$EMBER" jvm "$jvm" --heap --alloc "$TMP/alloc.pb.gz" >/dev/null 2>"$TMP/err" && fail "another JVM's recording was accepted"
	assert_contains "$TMP/err" "alloc.pb.gz is a recording of JVM $late \\(started [0-9.]+\\), not of JVM $jvm: record this one"
	"$EMBER" convert "$TMP/alloc.pb.gz" -o "$TMP/alloc.html" 2>/dev/null || fail "convert to html"
	sed -E 's/"jvms":"([0-9]+) \(started [0-9.]+\)"/"jvms":"\1 (started 1000000000.00)"/' "$TMP/alloc.html" >"$TMP/restarted.html"
	"$EMBER" jvm "$late" --heap --alloc "$TMP/restarted.html" >/dev/null 2>"$TMP/err" && fail "a restarted JVM's recording was accepted"
	assert_contains "$TMP/err" "JVM $late restarted since .*restarted.html was recorded \\(the JVM recorded started at 2001-09-09 01:46:40 UTC, this one at 20[0-9-]+ [0-9:]+ UTC\\)"
	"$EMBER" convert "$TMP/alloc.pb.gz" -o "$TMP/alloc.folded" 2>/dev/null || fail "convert to folded"
	"$EMBER" jvm "$late" --heap -n 1 --alloc "$TMP/alloc.folded" >/dev/null 2>"$TMP/err" || fail "--alloc folded: $(cat "$TMP/err")"
	assert_contains "$TMP/err" "alloc.folded does not say which JVM it recorded"
	echo "another JVM's recording and a restarted one's refused; folded stacks taken with a word"
else
	echo "allocation sites skipped: ember record needs root and BTF"
fi

# A JVM in a sandbox like a container: pid 1 of its pid namespace, its own
# /tmp (the dump written and read there).
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	ct=$(mktemp -d /var/tmp/ember-heap.XXXXXX)
	cp "$TMP"/classes/HeapLeak*.class "$ct"/
	unshare --pid --mount --fork --kill-child --mount-proc sh -c \
		"mount -t tmpfs tmpfs /tmp && exec java -cp $ct HeapLeak 200 20 4000 60" >"$TMP/ct.out" 2>&1 &
	sandbox=$!
	at_exit 'kill -KILL "$sandbox" 2>/dev/null; rm -rf "$ct"'
	for _ in $(seq 300); do grep -q '^held ' "$TMP/ct.out" && break; sleep 0.1; done
	inside=$(pgrep -f "$ct HeapLeak" | tail -1)
	[ -n "$inside" ] && grep -q $'NSpid:\t'"$inside"$'\t1$' /proc/"$inside"/status || fail "the sandboxed JVM is not pid 1 inside"
	"$EMBER" jvm "$inside" --heap -n 1 >"$TMP/ct.report" 2>"$TMP/err" || fail "sandbox: $(cat "$TMP/err")"
	assert_contains "$TMP/ct.report" '^        path:  static HeapLeak\$Cache.ENTRIES → java.util.HashMap.table → java.util.HashMap\$Node\[\]$'
	! ls /proc/"$inside"/root/tmp/ | grep -q ember || fail "sandbox: left in its /tmp: $(ls /proc/"$inside"/root/tmp/)"
	echo "sandboxed JVM $inside (pid 1 inside): the same first retainer, nothing left in its /tmp"
	# One whose /tmp (4 MiB) cannot hold its dump: HotSpot's reason, and
	# nothing of the dump left.
	unshare --pid --mount --fork --kill-child --mount-proc sh -c \
		"mount -t tmpfs -o size=4m tmpfs /tmp && exec java -cp $ct HeapLeak 200 20 4000 60" >"$TMP/small.out" 2>&1 &
	small=$!
	at_exit 'kill -KILL "$small" 2>/dev/null'
	for _ in $(seq 300); do grep -q '^held ' "$TMP/small.out" && break; sleep 0.1; done
	cramped=$(pgrep -f "$ct HeapLeak" | grep -vx "$inside" | tail -1)
	[ -n "$cramped" ] || fail "the second sandboxed JVM did not start: $(cat "$TMP/small.out")"
	"$EMBER" jvm "$cramped" --heap -n 1 >/dev/null 2>"$TMP/err" && fail "a dump into a full /tmp succeeded"
	assert_contains "$TMP/err" "^ember: JVM $cramped did not dump its heap: Dump file is incomplete: No space left on device$"
	! ls /proc/"$cramped"/root/tmp/ | grep -q ember || fail "full /tmp: left in it: $(ls /proc/"$cramped"/root/tmp/)"
	echo "sandboxed JVM $cramped with a 4 MiB /tmp: $(tail -1 "$TMP/err")"
else
	echo "sandbox part skipped: needs root and unshare"
fi

# The same leak on JDK 21 or later (Temurin 25 on these machines), if one is
# installed: its dumper and Thread class differ.
newer=$(ls -d /usr/lib/jvm/*-2[1-9]-* /usr/lib/jvm/*-2[1-9] 2>/dev/null | head -1)
if [ -n "$newer" ] && [ -x "$newer/bin/java" ]; then
	"$newer/bin/java" -cp "$TMP/classes" HeapLeak 500 20 4000 60 >"$TMP/newer.out" 2>&1 &
	newjvm=$!
	BACKGROUND+=($newjvm)
	for _ in $(seq 300); do grep -q '^held ' "$TMP/newer.out" && break; sleep 0.1; done
	"$EMBER" jvm "$newjvm" --heap -n 3 >"$TMP/newer" 2>"$TMP/err" || fail "--heap on $newer: $(cat "$TMP/err")"
	assert_contains "$TMP/newer" "; the dump paused the JVM for [0-9.]+ s$"
	assert_contains "$TMP/newer" '^        path:  static HeapLeak\$Cache.ENTRIES → java.util.HashMap.table → java.util.HashMap\$Node\[\]$'
	assert_contains "$TMP/newer" '^        path:  local in HeapLeak.hold \(thread "holder"\) → int\[\]$'
	echo "$(basename "$newer"): $(head -1 "$TMP/newer")"
else
	echo "JDK 21+ part skipped: none under /usr/lib/jvm"
fi

# Errors: each names the cause and the fix, exit status 1.
"$EMBER" jvm $$ --heap 2>"$TMP/err" && fail "a shell taken for a JVM"
assert_contains "$TMP/err" "is not a HotSpot JVM"
java -XX:-UsePerfData -cp "$TMP/classes" HeapLeak 10 10 100 60 >"$TMP/noperf.out" &
noperf=$!
BACKGROUND+=($noperf)
java -XX:+DisableAttachMechanism -cp "$TMP/classes" HeapLeak 10 10 100 60 >"$TMP/noattach.out" &
noattach=$!
BACKGROUND+=($noattach)
for _ in $(seq 300); do grep -q '^held ' "$TMP/noperf.out" && grep -q '^held ' "$TMP/noattach.out" && break; sleep 0.1; done
"$EMBER" jvm "$noperf" --heap 2>"$TMP/err" && fail "a heap of unknown size dumped without --force"
assert_contains "$TMP/err" "the heap size of JVM $noperf is unknown .*: add --force to dump it all the same"
# Dumped with --force, and diffed against the big cache's snapshot: 100
# payloads now, so 9,900 fewer.
"$EMBER" jvm "$noperf" --heap --force -n 1000 --diff "$TMP/heap.snap" >"$TMP/forced" 2>"$TMP/err" ||
	fail "--force: $(cat "$TMP/err")"
# Without counters, the pause is bounded by the dump's whole time.
assert_contains "$TMP/forced" "^JVM $noperf: [0-9,]+ objects, .* references; the dump paused the JVM for up to [0-9.]+ s$"
assert_contains "$TMP/forced" "^Change since $TMP/heap.snap \\(JVM $jvm \\(HeapLeak\\), [-0-9: ]+UTC\\):$"
assert_contains "$TMP/forced" "^ +-[0-9.]+ MiB +-$((payloads - 100)) .* HeapLeak\\\$Payload$"
"$EMBER" jvm "$noattach" --heap 2>"$TMP/err" && fail "a JVM without attach dumped"
assert_contains "$TMP/err" "^ember: JVM $noattach runs with -XX:\\+DisableAttachMechanism: --heap needs to attach to it; restart it without that flag$"
# A JVM killed during a dump of 4 million objects (about 0.3 s, its file
# written as it goes): said, and nothing left in its /tmp.
# -Xmx1g: its garbage must not take the heap in use past --heap's limit
# (2048 MiB, garbage included), which would refuse it before any dump.
java -Xmx1g -cp "$TMP/classes" HeapLeak 2000 1000 16 60 >"$TMP/big.out" &
big=$!
BACKGROUND+=($big)
for _ in $(seq 600); do grep -q '^held ' "$TMP/big.out" && break; sleep 0.1; done
"$EMBER" jvm "$big" --heap 2>"$TMP/err" >/dev/null &
dumper=$!
for _ in $(seq 400); do ls /tmp/ember-"$dumper"-*/heap.hprof >/dev/null 2>&1 && break; sleep 0.01; done
ls /tmp/ember-"$dumper"-*/heap.hprof >/dev/null || fail "no dump being written: $(cat "$TMP/err")"
kill -KILL "$big"
wait "$dumper" && fail "a dump of a JVM killed meanwhile succeeded"
assert_contains "$TMP/err" "^ember: JVM $big exited during the dump; nothing of it is left in its /tmp$" \
	"a JVM killed during the dump: $(cat "$TMP/err")"
! ls -d /tmp/ember-"$dumper"-* 2>/dev/null || fail "the dump of the killed JVM is left"
echo "errors: not a JVM, unknown size (dumped with --force), attach disabled, a JVM killed during the dump"
