#!/usr/bin/env bash
# A JIT in a container writes its perf map to its own /tmp under the pid it
# sees: ember finds it through /proc/PID/root and the namespace pid.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root for unshare"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
# The stub is copied through an open file: the checkout may be under /tmp.
unshare --pid --fork --kill-child --mount --propagation private \
	sh -c 'exec 3<"$0" && mount -t tmpfs ember-test /tmp && cat <&3 >/tmp/jit_stub && chmod +x /tmp/jit_stub &&
	       /tmp/jit_stub & wait' "$WORKLOADS/jit_stub" >"$TMP/addr" 2>"$TMP/err" &
BACKGROUND+=($!)
for _ in $(seq 100); do [ -s "$TMP/addr" ] && break; sleep 0.05; done
[ -s "$TMP/addr" ] || fail "jit_stub did not start in its namespaces: $(cat "$TMP/err")"
pid=$(pgrep -n -f "^/tmp/jit_stub$") || fail "no jit_stub process"
BACKGROUND+=("$pid")  # unshare ignores SIGTERM while it waits: end its grandchild
nspid=$(awk '/^NSpid:/{print $NF}' "/proc/$pid/status")
[ "$nspid" != "$pid" ] || fail "jit_stub is not in its own pid namespace"
[ ! -e "/tmp/perf-$nspid.map" ] || [ ! -e "/tmp/perf-$pid.map" ] || fail "the perf map leaked to the host's /tmp"
base=$(cat "$TMP/addr")
"$EMBER" symbolize --pid "$pid" "$(printf '%x' $((0x$base + 0x10)))" "$(printf '%x' $((0x$base + 0x110)))" \
	"$(printf '%x' $((0x$base + 0x1100)))" >"$TMP/out" 2>"$TMP/err" || fail "ember symbolize exited $?: $(cat "$TMP/err")"
cat "$TMP/out"
assert_contains "$TMP/out" $'\tjitted_alpha$' "host pid $pid (namespace pid $nspid): perf map in the container's /tmp not used"
assert_contains "$TMP/out" $'\tjitted_beta$'
assert_contains "$TMP/out" $'\t\\?\\? \\[anon\\]: ' "an unnamed JIT address is not labelled [anon]"
