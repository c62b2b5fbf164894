#!/usr/bin/env bash
# Unwinding binaries deleted or replaced while they run (a package upgrade
# under a running service): unwind_mix (no frame pointers) and its library
# run from copies; once running, the library is deleted and the binary's
# path gets another file (as an upgrade's rename does). ember reads both
# through the process's own mappings (/proc/PID/map_files), not the paths:
# the stacks reach the thread's entry as before, through the library too.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/unwind_lib.sh"
need_bpf
dir=$TMP/app
mkdir -p "$dir"
cp "$WORKLOADS/unwind_mix-nofp" "$WORKLOADS/libunwind_mixlib-nofp.so" "$dir/"
LD_LIBRARY_PATH=$dir "$dir/unwind_mix-nofp" 0.6 >"$TMP/out" 2>&1 &
pid=$!
BACKGROUND+=($pid)
for _ in $(seq 100); do
	grep -q libunwind_mixlib "/proc/$pid/maps" 2>/dev/null && break
	sleep 0.05
done
grep -q libunwind_mixlib "/proc/$pid/maps" || fail "the workload did not start: $(cat "$TMP/out")"
rm "$dir/libunwind_mixlib-nofp.so"
cp /bin/true "$dir/unwind_mix-nofp.new"
mv "$dir/unwind_mix-nofp.new" "$dir/unwind_mix-nofp"
grep -q "libunwind_mixlib-nofp.so (deleted)" "/proc/$pid/maps" || fail "the library is not mapped as deleted"
grep -q "unwind_mix-nofp (deleted)" "/proc/$pid/maps" || fail "the binary is not mapped as replaced"
"$EMBER" record -F 999 --no-java -p "$pid" "${UNWIND_OPTS[@]}" -o "$TMP/del.folded" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
grep -E "^  (stacks|unwinding)|^    unwind_mix" "$TMP/err"
canonical "$TMP/del.folded" >"$TMP/del.canon"
read -r reached total < <(root_reach "$TMP/del.canon")
echo "deleted and replaced: $total user stacks, $(pct "$reached" "$total")% from the thread's entry"
(( total >= 1000 )) || fail "only $total samples"
(( reached * 100 >= total * 98 )) ||
	fail "$(pct "$reached" "$total")% of stacks reach the thread's entry, not >= 98%: $(sort -t' ' -k2 -nr "$TMP/del.canon" | head -5)"
assert_contains "$TMP/del.canon" '^start;libc_start_main[^;]*;libc_start_call_main;main;library_loop;library_caller;mixlib_entry;mixlib_middle;mixlib_leaf_burn ' \
	"no chain through the deleted library"
