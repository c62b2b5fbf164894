#!/usr/bin/env bash
# kill -9 of `ember record` at each phase leaves nothing behind: no BPF
# program, link or map of ember's (bpftool), no output nor temporary file
# (the output an earlier run wrote stays as it was), and a JVM it was
# attaching to keeps running and takes the agent again from the next ember.
# Phases: recording, loading (its first BPF program open), writing (held
# inside the output's fsync by strace), attaching (the JVM's attach trigger
# file made, the agent not loaded yet).
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v strace >/dev/null || skip "no strace (scripts/deps.sh test installs it)"
# Real-time, so that it sees a phase of milliseconds while the JVM's
# threads keep both CPUs busy.
kill_when() { chrt -f 10 python3 "$ROOT/tests/tools/kill_when.py" "$@"; }
OUT=$TMP/out
mkdir "$OUT"

bpf_mark_before
# assert_nothing_left PHASE: no BPF object, the earlier output as it was.
assert_nothing_left() {
	assert_no_bpf_left "$1: after kill -9"
	cmp -s "$OUT/a.html" "$TMP/a.html.first" || fail "$1: the earlier output changed"
	[ "$(ls -A "$OUT")" = a.html ] || fail "$1: files left beside the output: $(ls -A "$OUT")"
}

# The output a killed run would have replaced.
"$EMBER" record -d 0.5 -o "$OUT/a.html" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
cp "$OUT/a.html" "$TMP/a.html.first"

# Recording: every program attached; its maps' names are learnt.
"$EMBER" record -a -e cpu offcpu -o "$OUT/a.html" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress" &
ember=$!
wait_sampling $ember "$TMP/progress"
bpf_learn_ember_maps
sleep 0.3
kill -9 $ember
wait $ember 2>/dev/null
assert_nothing_left recording

# Loading: the first program loaded, none attached.
"$EMBER" record -a -o "$OUT/a.html" 2>"$TMP/err" &
ember=$!
kill_when $ember fd '^anon_inode:bpf-prog' >"$TMP/kill" || fail "loading: $(cat "$TMP/kill" "$TMP/err")"
wait $ember 2>/dev/null
assert_nothing_left loading

# Writing: strace holds the output's fsync for 30 s, the file written but
# not named; the kill comes while ember holds it open.
strace -f -qq -o /dev/null -e trace=fsync -e inject=fsync:delay_enter=30000000 \
	"$EMBER" record -a -d 1 -o "$OUT/a.html" 2>"$TMP/err" &
tracer=$!
for _ in $(seq 100); do
	ember=$(pgrep -P $tracer -x ember) && break
	sleep 0.1
done
[ -n "$ember" ] || fail "no ember under strace: $(cat "$TMP/err")"
kill_when $ember fd "^$OUT/" >"$TMP/kill" || fail "writing: $(cat "$TMP/kill" "$TMP/err")"
kill -9 $tracer  # strace would keep the killed ember until its delay ends
wait $tracer 2>/dev/null
assert_nothing_left writing
echo "$(cat "$TMP/kill") (writing)"

# Attaching: a JVM of default flags; the kill comes once ember has made the
# trigger file that asks HotSpot for its attach socket.
java_classes "$TMP/classes"
mkdir "$TMP/jvm"
(cd "$TMP/jvm" && exec java -cp "$TMP/classes" Workload 60) >"$TMP/jvm.log" 2>&1 &
jvm=$!
BACKGROUND+=($jvm)
sleep 1  # past the JVM's start: a trigger made before HotSpot reads it is the same as any other
"$EMBER" record -p $jvm -o "$OUT/j.folded" 2>"$TMP/err" &
ember=$!
kill_when $ember path "$TMP/jvm/.attach_pid$jvm" >"$TMP/kill" || fail "attaching: $(cat "$TMP/kill" "$TMP/err")"
wait $ember 2>/dev/null
assert_nothing_left attaching
sleep 1
kill -0 $jvm 2>/dev/null || fail "the JVM died after ember was killed attaching: $(tail -5 "$TMP/jvm.log")"
"$EMBER" record -p $jvm -d 2 -o "$TMP/again.folded" 2>"$TMP/err" || fail "ember after the kill exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/again.folded" "^java;.*Workload\\.hot(A|B)_\\[(j|i)\\]" "no Java frames from the next ember: $(cat "$TMP/err")"
[ -e "$TMP/jvm/.attach_pid$jvm" ] && fail "the attach trigger file is left after the next ember"
ls -d /tmp/ember-$ember-* 2>/dev/null && fail "the killed ember's agent directory is left after the next ember"
kill -0 $jvm 2>/dev/null || fail "the JVM died"
echo "kill -9 while recording, loading, writing, attaching: nothing left"
