#!/usr/bin/env bash
# The channel between ember and a JVM's agent is private and leaves nothing
# behind:
# - symlinks planted at every name ember or the agent ever built from pids
#   in /tmp are not followed: their root-owned target stays unchanged;
# - while recording, a JVM's stream sits in a directory of its own, mode
#   0700, owned by the JVM's user, and is itself mode 0600;
# - nothing is left in /tmp after a recording, after `kill -9` of ember (the
#   agent's lease ends: it stops publishing and removes its files), after a
#   JVM that the command started exits, nor from a killed ember whose JVM
#   died too (swept at the next start, but not a directory still held);
# - nothing touches a JVM outside the scope: `--comm` that names none of its
#   threads, or a recording that fails to start (`-e cycles` without a PMU),
#   loads no agent into it.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
# Readable by the JVM run as nobody.
chmod 755 "$TMP"
java_classes "$TMP/classes"
chmod -R a+rX "$TMP/classes"
planted=$TMP/planted
at_exit 'xargs -r rm -f <"$planted" 2>/dev/null; rm -rf /tmp/ember-999999-stale000 /tmp/ember-999998-heldheld'
: >"$planted"

started_jvm() {  # PID: waits until the JVM answers with its main class
	for _ in $(seq 100); do
		grep -q Workload "/proc/$1/cmdline" 2>/dev/null && [ -e "/tmp/hsperfdata_$2/$1" ] && return 0
		sleep 0.1
	done
	fail "JVM $1 did not start"
}
# This ember's agent (another ember on the host has its own path).
has_agent() { grep -qF "$ROOT/build/libember-agent.so" "/proc/$1/maps"; }
# What ember PID left in /tmp, but the links planted here.
left_by() { ls -d /tmp/ember-"$1"-* 2>/dev/null | grep -vxFf "$planted"; }
dirs_of() { find /tmp -maxdepth 1 -type d -name "ember-$1-*"; }

background java -cp "$TMP/classes" Workload 120
root_jvm=${BACKGROUND[-1]}
background setpriv --reuid=nobody --regid=nogroup --clear-groups java -cp "$TMP/classes" Workload 120
nobody_jvm=${BACKGROUND[-1]}
started_jvm "$root_jvm" root
started_jvm "$nobody_jvm" nobody

# --- scope: no agent goes into a JVM outside it
"$EMBER" record --comm '^no-such-thread$' -d 0.5 -o "$TMP/comm.folded" 2>"$TMP/err" ||
	fail "--comm: ember exited $?: $(cat "$TMP/err")"
has_agent "$root_jvm" && fail "--comm matching none of its threads loaded the agent into JVM $root_jvm"
if "$EMBER" record -e cycles -p "$root_jvm" -d 0.5 -o "$TMP/cycles.folded" 2>"$TMP/err"; then
	echo "this machine has a hardware PMU: -e cycles records, so its failure is not tested"
else
	has_agent "$root_jvm" && fail "-e cycles failed ($(cat "$TMP/err")) but loaded the agent into JVM $root_jvm first"
fi

# --- symlinks where the stream used to go: /tmp/ember-<ember pid>-<jvm pid>.jitmap
# for the next pids, and the agent's old default /tmp/ember-<jvm pid>.jitmap.
printf 'not to be written\n' >"$TMP/canary"
chmod 644 "$TMP/canary"
sum=$(sha256sum <"$TMP/canary")
perl -e '
	my ($target, $jvm, $list) = @ARGV;
	open(my $f, "<", "/proc/sys/kernel/ns_last_pid") or die; my $last = <$f>; chomp $last;
	open(my $out, ">>", $list) or die;
	for my $name ("/tmp/ember-$jvm.jitmap", map { "/tmp/ember-$_-$jvm.jitmap" } $last + 1 .. $last + 3000) {
		symlink($target, $name) and print $out "$name\n";
	}' "$TMP/canary" "$root_jvm" "$planted"
"$EMBER" record -p "$root_jvm,$nobody_jvm" -d 3 -o "$TMP/both.folded" 2>"$TMP/err" &
ember=$!
for _ in $(seq 100); do
	(( $(dirs_of $ember | wc -l) == 2 )) && ls "$(dirs_of $ember | head -1)" | grep -q jitmap && break
	sleep 0.1
done
for dir in $(dirs_of $ember); do
	owner=$(stat -c '%U %a' "$dir")
	[[ $owner == "root 700" || $owner == "nobody 700" ]] || fail "agent directory $dir is '$owner', not 700 of the JVM's user"
	for f in "$dir"/*; do
		[ "$(stat -c '%U %a' "$f")" = "${owner% *} 600" ] || fail "stream $f is '$(stat -c '%U %a' "$f")', not 600 of ${owner% *}"
	done
done
dirs=$(dirs_of $ember | xargs -r stat -c %U | sort | tr '\n' ' ')
[ "$dirs" = "nobody root " ] || fail "want one directory for each JVM's user, found: $dirs"
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
[ "$(sha256sum <"$TMP/canary")" = "$sum" ] || fail "a planted symlink was written through: $(cat "$TMP/canary")"
while read -r link; do [ -L "$link" ] || fail "planted $link was replaced"; done <"$planted"
for jvm in $root_jvm $nobody_jvm; do
	assert_contains "$TMP/both.folded" "^java;.*Workload\\.hot(A|B)_\\[(j|i)\\]" "no Java frames named: $(cat "$TMP/err")"
done
[ -z "$(left_by $ember)" ] || fail "left after the recording: $(left_by $ember)"
xargs -r rm -f <"$planted"

# --- kill -9 of ember: the agent's lease ends
"$EMBER" record -p "$nobody_jvm" -o "$TMP/killed.folded" 2>"$TMP/err" &
ember=$!
for _ in $(seq 100); do
	ls /proc/$nobody_jvm/fd -l 2>/dev/null | grep -q "/tmp/ember-$ember-.*jitmap" && break
	sleep 0.1
done
ls -l /proc/$nobody_jvm/fd | grep -q "/tmp/ember-$ember-.*jitmap" || fail "the agent opened no stream: $(cat "$TMP/err")"
kill -9 $ember
wait $ember 2>/dev/null
for _ in $(seq 100); do
	[ -z "$(left_by $ember)" ] && ! ls -l /proc/$nobody_jvm/fd | grep -q jitmap && break
	sleep 0.1
done
[ -z "$(left_by $ember)" ] || fail "left after kill -9 of ember: $(left_by $ember)"
ls -l /proc/$nobody_jvm/fd | grep -q jitmap && fail "the agent still writes its stream after ember was killed"
kill -0 $nobody_jvm || fail "the JVM died with ember"
"$EMBER" record -p "$nobody_jvm" -d 1 -o "$TMP/again.folded" 2>"$TMP/err" || fail "ember after kill -9 exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/again.folded" "^java;.*Workload\\.hot(A|B)_\\[(j|i)\\]" "no Java frames when attaching again after kill -9: $(cat "$TMP/err")"

# --- a JVM that the command started, stopped with SIGTERM
"$EMBER" record -o "$TMP/cmd.folded" -- java -cp "$TMP/classes" Workload 60 2>"$TMP/err" &
ember=$!
for _ in $(seq 100); do
	cmd_jvm=$(pgrep -P $ember java)
	[ -n "$cmd_jvm" ] && ls -d /tmp/ember-$ember-*/"$cmd_jvm".jitmap >/dev/null 2>&1 && break
	sleep 0.1
done
[ -n "$cmd_jvm" ] || fail "the command's JVM did not start: $(cat "$TMP/err")"
kill -TERM "$cmd_jvm"
wait $ember
[ -z "$(left_by $ember)" ] || fail "left after the command's JVM exited: $(left_by $ember)"

# --- a killed ember's directory, its JVM gone too: swept at the next start;
# one still held (flock, as a live ember holds it) is not.
mkdir -m 700 /tmp/ember-999999-stale000 /tmp/ember-999998-heldheld
touch /tmp/ember-999999-stale000/4242.jitmap
# -F: the holder is flock's own pid, so killing it ends the hold (a forked
# sleep outlived the kill, holding the test's output open for its 30 s).
flock -F -s /tmp/ember-999998-heldheld sh -c "touch $TMP/held; exec sleep 30" &
holder=$!
BACKGROUND+=($holder)
for _ in $(seq 50); do [ -e "$TMP/held" ] && break; sleep 0.1; done
[ -e "$TMP/held" ] || fail "flock did not take the lock"
"$EMBER" record -d 0.2 -o "$TMP/sweep.folded" -- true 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
[ -e /tmp/ember-999999-stale000 ] && fail "a stale agent directory was not swept"
[ -e /tmp/ember-999998-heldheld ] || fail "a held agent directory was swept"
kill $holder
echo "agent files: private (0700 dir, 0600 stream), planted links untouched, nothing left after record, kill -9, JVM exit"
