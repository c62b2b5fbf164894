#!/usr/bin/env bash
# Bad input and bad environments: a message naming the cause and the fix,
# a non-zero exit, and no half-written output.
. "$(dirname "$0")/../lib.sh"
need_bpf

# expect_error MESSAGE_REGEX ARGS...: ember fails and says MESSAGE.
expect_error() {
	local want=$1
	shift
	"$EMBER" "$@" >"$TMP/out" 2>"$TMP/err" && fail "ember $* succeeded"
	grep -qiE -- "$want" "$TMP/err" || fail "ember $*: message '$(cat "$TMP/err")' lacks /$want/"
	grep -qiE 'terminate|Segmentation|Aborted|AddressSanitizer' "$TMP/err" && fail "ember $* crashed"
	return 0
}

expect_error 'no process with pid 999999999' record -p 999999999 -d 1 -o "$TMP/x.folded"
expect_error 'no process with pid 4294967295' record -p 4294967295 -d 1 -o "$TMP/x.folded"
expect_error 'no process with pid 0' record -p 0 -d 1 -o "$TMP/x.folded"
mkdir "$TMP/adir.html"
expect_error 'cannot write .*adir.html: it is a directory' record -d 1 -o "$TMP/adir.html"
rmdir "$TMP/adir.html"
expect_error "unknown event 'bogus'.*cpu-clock" record -e bogus -d 1 -o "$TMP/x.folded"
expect_error 'frequency 0 Hz is out of range' record -F 0 -d 1 -o "$TMP/x.folded"
expect_error 'frequency 9999999 Hz is out of range.*perf_event_max_sample_rate' record -F 9999999 -d 1 -o "$TMP/x.folded"
expect_error "cannot tell the output format.*\\.html" record -d 1 -o "$TMP/x.svg"
expect_error 'cannot write .*No such file or directory' record -d 1 -o "$TMP/missing/x.html"
expect_error '-a profiles every process' record -a -p 1 -d 1 -o "$TMP/x.folded"
expect_error 'not a valid regular expression' record --comm '(' -d 1 -o "$TMP/x.folded"
expect_error "cannot run 'no-such-command-xyz'" record -o "$TMP/x.folded" -- no-such-command-xyz
[ -z "$(ls "$TMP" | grep -v -e '^out$' -e '^err$')" ] || fail "output left behind: $(ls "$TMP")"

# Without privileges.
if command -v setpriv >/dev/null; then
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$EMBER" record -d 1 -o "$TMP/x.folded" >"$TMP/out" 2>"$TMP/err" &&
		fail "ember succeeded as nobody"
	grep -q 'needs root, or the capabilities CAP_BPF and CAP_PERFMON.*sudo' "$TMP/err" ||
		fail "non-root message: $(cat "$TMP/err")"
fi

# cycles needs a hardware PMU; where there is none the message says so.
if ! "$EMBER" record -e cycles -d 0.5 -o "$TMP/cycles.folded" >"$TMP/out" 2>"$TMP/err"; then
	grep -q "cycles.*no hardware PMU.*-e cpu-clock" "$TMP/err" || fail "-e cycles: $(cat "$TMP/err")"
fi

# kernel.kptr_restrict=2 hides kernel addresses even from root: record
# anyway, warn, name the sysctl.
old=$(cat /proc/sys/kernel/kptr_restrict)
at_exit 'echo "$old" >/proc/sys/kernel/kptr_restrict'
if echo 2 >/proc/sys/kernel/kptr_restrict 2>/dev/null; then
	"$EMBER" record -o "$TMP/k.folded" -- "$WORKLOADS/syscall_loop" 1 >"$TMP/out" 2>"$TMP/err"
	rc=$?
	echo "$old" >/proc/sys/kernel/kptr_restrict
	(( rc == 0 )) || fail "kptr_restrict=2: ember exited $rc: $(cat "$TMP/err")"
	grep -q 'kernel frames are unnamed.*kptr_restrict=2.*sysctl kernel.kptr_restrict=0' "$TMP/err" ||
		fail "kptr_restrict=2: no warning: $(cat "$TMP/err")"
	assert_contains "$TMP/k.folded" 'read_zero_loop;' "kptr_restrict=2: user frames missing"
fi
echo "all error paths give their message"

# ember without its agent beside it: records anyway and says how to fix it.
mkdir "$TMP/bin" && cp "$EMBER" "$TMP/bin/ember"
# 999 Hz: a 0.5 s spinner given a tenth of a CPU has ~5 samples at 99 Hz,
# and none in one run of 150.
"$TMP/bin/ember" record -F 999 -o "$TMP/noagent.folded" -- "$WORKLOADS/spinner" 0.5 >"$TMP/out" 2>"$TMP/err" ||
	fail "without the agent: ember exited $?: $(cat "$TMP/err")"
grep -q "no Java agent at $TMP/bin/libember-agent.so.*build it with .make." "$TMP/err" || fail "without the agent: $(cat "$TMP/err")"
assert_contains "$TMP/noagent.folded" '^spinner;' "without the agent: nothing recorded"
