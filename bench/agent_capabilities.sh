#!/usr/bin/env bash
# Which capabilities `ember agent` needs (deploy/'s systemd unit and
# DaemonSet grant these only): runs the agent as root with only the list
# below in its bounding set, then with each one taken away, beside a
# spinning process and fresh JVMs (root's, nobody's, and one in its own pid
# and mount namespaces: an attached JVM keeps its listener up, which would
# hide a missing capability), with kernel.kptr_restrict=1 for the run
# (restored after). Prints one line per run: did it start, are kernel frames
# named, how many Java stacks are, JVMs it could not attach to and why.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
E=$ROOT/build/ember
NEEDED="cap_bpf cap_perfmon cap_sys_ptrace cap_dac_read_search cap_syslog cap_setuid cap_setgid cap_chown cap_kill"
ALL=$(capsh --print | sed -n 's/^Bounding set =//p' | tr ',' ' ')
TMP=$(mktemp -d /var/tmp/ember-caps.XXXXXX)  # not /tmp: the namespaced JVM mounts its own
restrict=$(sysctl -n kernel.kptr_restrict)
trap 'sysctl -qw kernel.kptr_restrict=$restrict; pkill -f "$TMP"; kill $SPIN 2>/dev/null; rm -rf "$TMP"' EXIT
sysctl -qw kernel.kptr_restrict=1
javac -d "$TMP/classes" "$ROOT/tests/java/Workload.java" && chmod -R a+rX "$TMP"
"$ROOT/build/workloads/spinner" 900 &
SPIN=$!
echo "capabilities: $NEEDED"
for without in none $NEEDED; do
	java -cp "$TMP/classes" Workload 60 >/dev/null 2>&1 &
	jvms=($!)
	setpriv --reuid=nobody --regid=nogroup --clear-groups java -cp "$TMP/classes" Workload 60 >/dev/null 2>&1 &
	jvms+=($!)
	unshare --pid --mount --fork --mount-proc sh -c \
		"mount -t tmpfs tmpfs /tmp && exec java -cp $TMP/classes Workload 60" >/dev/null 2>&1 &
	jvms+=($!)
	sleep 1.5
	keep=" $NEEDED "
	keep=${keep/ $without / }
	drop=""
	for c in $ALL; do [[ " $keep " == *" $c "* ]] || drop+="$c,"; done
	rm -rf "$TMP/spool"
	timeout -s TERM 7 capsh --drop="${drop%,}" -- -c \
		"$E agent --period 2s --spool.dir $TMP/spool --metrics.listen '' --frequency 49" >"$TMP/log" 2>&1
	line="without ${without}:"
	if grep -q sampling "$TMP/log"; then
		"$E" convert "$TMP/spool" --service Workload -o "$TMP/java.folded" 2>/dev/null
		line+=" started; kernel frames $(grep -q 'kernel frames are unnamed' "$TMP/log" && echo unnamed || echo named);"
		line+=" Java stacks named $(grep -c 'Workload\.[a-zA-Z]*_\[[ji]\]' "$TMP/java.folded");"
		line+=" JVMs refused $(grep -c 'JVM [0-9]*:' "$TMP/log") $(grep -o 'JVM [0-9]*: [^;]*' "$TMP/log" | head -1)"
	else
		line+=" did not start: $(grep -v '^$' "$TMP/log" | head -1)"
	fi
	echo "$line"
	pkill -f "$TMP/classes"
	wait "${jvms[@]}" 2>/dev/null
done
