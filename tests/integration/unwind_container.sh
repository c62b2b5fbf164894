#!/usr/bin/env bash
# Unwinding a process in a container: unwind_mix (no frame pointers) runs
# chrooted in a root of its own, with its own copies of its libraries, in
# its own pid and mount namespaces. Its files are seen from the host only
# through /proc/PID/root (or map_files), and its copies of libc and
# libstdc++ are other inodes with the host's build-ids: their tables are
# the host's. Its stacks reach the thread's entry as on the host.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/unwind_lib.sh"
need_bpf
command -v unshare >/dev/null || skip "no unshare(1)"
root=$(mktemp -d /var/tmp/ember-root.XXXXXX)
at_exit 'pkill -f "^unwind_mix-nofp" 2>/dev/null; rm -rf "$root"'
# The binary, its library, and every library ldd names, at their paths.
cp "$WORKLOADS/unwind_mix-nofp" "$WORKLOADS/libunwind_mixlib-nofp.so" "$root/"
for lib in $(ldd "$WORKLOADS/unwind_mix-nofp" | grep -oE '/[^ ]+\.so[^ ]*'); do
	mkdir -p "$root$(dirname "$lib")"
	cp "$lib" "$root$lib"
done
LD_LIBRARY_PATH=/ unshare --pid --mount --fork --mount-proc chroot "$root" /unwind_mix-nofp 0.6 >"$TMP/out" 2>&1 &
for _ in $(seq 100); do
	pid=$(pgrep -x unwind_mix-nofp | head -1)
	[ -n "$pid" ] && break
	sleep 0.05
done
[ -n "$pid" ] || fail "the chrooted workload did not start: $(cat "$TMP/out")"
[ "$(readlink /proc/"$pid"/root)" = "$root" ] || fail "the workload's root is $(readlink /proc/"$pid"/root), not $root"
"$EMBER" record -F 999 --no-java -p "$pid" -o "$TMP/ct.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
cat "$TMP/err"
canonical "$TMP/ct.folded" >"$TMP/ct.canon"
read -r reached total < <(root_reach "$TMP/ct.canon")
echo "container: $total user stacks, $(pct "$reached" "$total")% from the thread's entry"
(( total >= 1000 )) || fail "only $total samples"
(( reached * 100 >= total * 98 )) || fail "$(pct "$reached" "$total")% of stacks reach the thread's entry, not >= 98%: $(sort -t' ' -k2 -nr "$TMP/ct.canon" | head -5)"
assert_contains "$TMP/ct.canon" '^clone3;start_thread;qsort_thread;qsort_sort_records;[^;]*qsort[^;]*;([^;]+;)*qsort_compare_slow ' \
	"no qsort chain through the container's libc"
