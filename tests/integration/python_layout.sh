#!/usr/bin/env bash
# CPython's layouts (user/runtimes): in every CPython on the machine
# (Debian's python3; pyenv's 3.x builds when present), each thread's Python
# call chain read from outside by ember's layout of that version alone
# (build/tools/python_stacks, as the BPF walker will) is the one the
# workload runs: a method under a function in the main thread, a sleeper
# in a second thread, a coroutine chain under asyncio in a third, each
# with the thread's tid (3.11+). A version ember does not know is refused
# by name.
. "$(dirname "$0")/../lib.sh"
STACKS=$ROOT/build/tools/python_stacks
[ -x "$STACKS" ] || fail "no $STACKS: make test-build"
mapfile -t pythons < <(cpythons)
[ -x /usr/bin/python3 ] || fail "no /usr/bin/python3: scripts/deps.sh installs python3"

checked=0
for py in "${pythons[@]}"; do
	version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || fail "$py does not run"
	known=$(version_at_least "$version" 3.8 && echo yes)
	if [ -n "$known" ]; then
		start_ready "$TMP/out" "$py" "$ROOT/tests/workloads/py_chains.py" 120
	else
		start_ready "$TMP/out" "$py" -c 'import time; print("ready", flush=True); time.sleep(120)'
	fi || fail "$py: the workload did not start"
	pid=$ready_pid
	if [ -z "$known" ]; then
		"$STACKS" $pid >"$TMP/stacks" 2>"$TMP/err" && fail "CPython $version ($py) was read: $(cat "$TMP/stacks")"
		assert_contains "$TMP/err" "CPython $version is not one ember knows \\(3\\.8 to 3\\.14\\)" "CPython $version: $(cat "$TMP/err")"
		echo "CPython $version ($py): refused, as it should be"
		kill $pid
		continue
	fi
	"$STACKS" $pid >"$TMP/stacks" 2>"$TMP/err" || fail "CPython $version ($py): $(cat "$TMP/err")"
	head -1 "$TMP/stacks"
	assert_contains "$TMP/stacks" "^# CPython $version in " "CPython $version: another version read: $(head -1 "$TMP/stacks")"
	# Qualified names (Shapes.middle) from 3.11; names alone before.
	assert_contains "$TMP/stacks" ' <module>;outer;(Shapes\.)?middle;inner$' "CPython $version: main thread: $(cat "$TMP/stacks")"
	assert_contains "$TMP/stacks" ';(Thread\.)?run;waiter;nap$' "CPython $version: the sleeper: $(cat "$TMP/stacks")"
	assert_contains "$TMP/stacks" ';(Thread\.)?run;loop_thread;.*;main_task;step;leaf_spin$' "CPython $version: the coroutines: $(cat "$TMP/stacks")"
	[ "$(grep -vc '^#' "$TMP/stacks")" = 3 ] || fail "CPython $version: not 3 threads: $(cat "$TMP/stacks")"
	if version_at_least "$version" 3.11; then
		assert_contains "$TMP/stacks" "^$pid <module>;" "CPython $version: the main thread's tid is not $pid: $(cat "$TMP/stacks")"
		for tid in $(grep -v '^#' "$TMP/stacks" | cut -d' ' -f1); do
			[ -d "/proc/$pid/task/$tid" ] || fail "CPython $version: tid $tid is not a thread of $pid"
		done
	fi
	kill $pid
	checked=$((checked + 1))
done
echo "$checked CPython versions read whole"
(( checked >= 1 )) || fail "no CPython read"
