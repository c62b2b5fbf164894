#!/usr/bin/env bash
# A JVM in a container-like sandbox (its own pid namespace, where it is pid
# 1, and its own mount namespace with a private /tmp): ember attaches with
# the JVM's namespace pid, places the agent and reads the code map through
# /proc/PID/root, and names its Java frames.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v unshare >/dev/null || skip "no unshare(1)"
# Outside /tmp: the sandbox mounts its own /tmp over it. Compile thresholds
# at a tenth: main's loop is compiled in well under a second of CPU.
classes=$(mktemp -d /var/tmp/ember-ct.XXXXXX)
at_exit 'pkill -f "$classes" 2>/dev/null; rm -rf "$classes"'
java_classes "$classes"
unshare --pid --mount --fork --mount-proc sh -c \
	"mount -t tmpfs tmpfs /tmp && exec java -XX:+PreserveFramePointer -XX:+PrintCompilation -XX:CompileThresholdScaling=0.1 -cp $classes Workload 900" \
	>"$TMP/jit.log" 2>&1 &
for _ in $(seq 100); do
	jvm=$(pgrep -f "$classes Workload" | tail -1) # unshare's, then the JVM's
	[ "$(cat /proc/"$jvm"/comm 2>/dev/null)" = java ] && break
	jvm=""
	sleep 0.1
done
[ -n "$jvm" ] || fail "the sandboxed JVM did not start"
wait_compiled "$TMP/jit.log" Workload::hotA Workload::hotB Workload::main@
grep -q $'NSpid:\t'"$jvm"$'\t1$' /proc/"$jvm"/status || fail "the JVM is not pid 1 of its namespace: $(grep NSpid /proc/"$jvm"/status)"
"$EMBER" record -p "$jvm" -d 3 -o "$TMP/ct.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/ct.folded" 'Workload\.main_\[(j|i)\];(.*;)?Workload\.hotA_\[(j|i)\]' "no Java frames from the sandboxed JVM: $(cat "$TMP/err")"
ls /proc/"$jvm"/root/tmp/ | grep -q jitmap && fail "code map left in the sandbox's /tmp"
echo "sandboxed JVM $jvm (pid 1 inside): Java frames named"
