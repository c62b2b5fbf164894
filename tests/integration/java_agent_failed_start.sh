#!/usr/bin/env bash
# An agent that cannot start publishing (its out= file cannot be made: the
# directory went away, as when ember gave up on a JVM too slow to answer its
# attach and the JVM ran the load later) leaves the JVM as it was. It says
# why on the JVM's stderr and answers the attach with success: a failed
# Agent_OnAttach makes the JVM unload the library while the callbacks it
# registered stay, and at exit the JVM called into unmapped code, faulted
# and retried forever: it never exited, one core busy. At startup
# (-agentpath), the JVM must run, not refuse to start.
. "$(dirname "$0")/../lib.sh"
command -v jcmd >/dev/null || skip "no jcmd (openjdk-17-jdk-headless)"
AGENT=$ROOT/build/libember-agent.so
[ -e "$AGENT" ] || fail "no $AGENT: make build/libember-agent.so"
java_classes "$TMP/classes"
missing=$TMP/gone/x.jitmap

# Attached while running.
java -cp "$TMP/classes" Workload 60 >"$TMP/jvm.out" 2>"$TMP/jvm.err" &
jvm=$!
# A JVM that hangs at exit ignores SIGTERM: the end of the test kills it.
at_exit 'kill -9 "$jvm" 2>/dev/null'
for _ in $(seq 100); do jcmd "$jvm" VM.version >/dev/null 2>&1 && break; sleep 0.1; done
jcmd "$jvm" JVMTI.agent_load "$AGENT" "\"out=$missing\"" >"$TMP/jcmd.out" 2>&1 || fail "jcmd failed: $(cat "$TMP/jcmd.out")"
assert_contains "$TMP/jcmd.out" "return code: 0" "the attach did not answer success: $(cat "$TMP/jcmd.out")"
for _ in $(seq 50); do grep -q "ember-agent: cannot create $missing" "$TMP/jvm.err" && break; sleep 0.1; done
assert_contains "$TMP/jvm.err" "ember-agent: cannot create $missing: No such file or directory" \
	"the agent did not say why on the JVM's stderr: $(cat "$TMP/jvm.err")"
kill -TERM "$jvm"
for _ in $(seq 100); do kill -0 "$jvm" 2>/dev/null || break; sleep 0.1; done
kill -0 "$jvm" 2>/dev/null && fail "the JVM did not exit within 10 s of SIGTERM ($(ps -o pcpu= -p "$jvm")% CPU)"
wait "$jvm"
echo "attached: the attach answered 0, the JVM said why and exited on SIGTERM"

# Given at startup: the JVM runs its course.
java -agentpath:"$AGENT"=out="$missing" -cp "$TMP/classes" Workload 1 >"$TMP/start.out" 2>"$TMP/start.err" ||
	fail "the JVM given the agent at startup exited $?: $(cat "$TMP/start.err")"
assert_contains "$TMP/start.err" "ember-agent: cannot create $missing"
echo "at startup: the JVM ran and exited 0"
