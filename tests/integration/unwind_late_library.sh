#!/usr/bin/env bash
# A library loaded after the process's first samples (issue 13): the
# process's tables were made without it, so the kernel's walk meets a return
# address into it outside every mapping it knows. Such a stack is copied for
# the collector, which reads the mappings again and unwinds it; before, the
# walk went on by frame pointers through code that keeps none, and the
# blocks of the first tens of milliseconds after the dlopen lost their
# frames. tests/workloads/unwind/late_library.c: 200 ms of sleeps in main,
# then dlopen, then 400 sleeps of 1 ms in the library, each of which must be
# whole: main;late_blocks;late_sleep;nanosleep.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/unwind_lib.sh"
need_bpf
for f in late_library liblate_plugin.so; do
	[ -e "$WORKLOADS/$f" ] || fail "no $WORKLOADS/$f: make $WORKLOADS/$f"
done
"$EMBER" record "${UNWIND_OPTS[@]}" -e offcpu --no-java -o "$TMP/out.folded" -- \
	"$WORKLOADS/late_library" "$WORKLOADS/liblate_plugin.so" 400 >"$TMP/out" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
assert_contains "$TMP/out" '^late_sleeps 400$' "the workload did not sleep 400 times: $(cat "$TMP/out")"
canonical "$TMP/out.folded" >"$TMP/canon"
ms() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e6 }'; }
stacks() { sort -t' ' -k2nr "$TMP/canon" | head -8 | cut -c1-300; }
all=$(weight "$TMP/canon" ';late_sleep;')
whole=$(weight "$TMP/canon" '^start;libc_start_main;libc_start_call_main;main;late_blocks;late_sleep;nanosleep;')
echo "off CPU in late_sleep: $(ms "$all") ms, $(ms "$whole") ms of it under main;late_blocks"
(( all >= 400 * 1000000 )) || fail "only $(ms "$all") ms of 400 sleeps of 1 ms in late_sleep: $(stacks)"
(( whole * 1000 >= all * 995 )) || fail "$(ms "$whole") of $(ms "$all") ms in late_sleep is under main;late_blocks; heaviest stacks:
$(stacks)
the summary:
$(cat "$TMP/err")"
true
