#!/usr/bin/env bash
# kind: structural
# Every BPF program ember loads passes the verifier well under its limit (a
# million instructions processed per program): prints each program's
# verified instruction count (ember -v), with every feature on (CPU,
# off-CPU with wakers, allocations with --live, CFI unwinding), for a
# command's processes and, where cgroup v2 is mounted, for a cgroup (the
# root one: the whole host), which every program then tests.
. "$(dirname "$0")/../lib.sh"
need_bpf
# record_verbose SUFFIX ARGS...: each program's count, SUFFIX after it, into $TMP/insns.
record_verbose() {
	local suffix=$1
	shift
	"$EMBER" record -v -e cpu-clock,offcpu,malloc --waker --live --no-java -o "$TMP/out.folded" "$@" \
		>/dev/null 2>"$TMP/err" || fail "ember $* exited $?: $(cat "$TMP/err")"
	sed -nE "s/^ember: BPF program ([a-z_]+): ([0-9]+) instructions verified\$/\\1 \\2$suffix/p" "$TMP/err" |
		sort >>"$TMP/insns"
}
record_verbose "" -- "$WORKLOADS/alloc_service" 1
if grep -q ' - cgroup2 ' /proc/self/mountinfo; then
	record_verbose " (--cgroup)" --cgroup . -d 0.5
else
	echo "no cgroup v2 mounted: --cgroup's programs not loaded"
fi
cat "$TMP/insns"
(( $(grep -vc cgroup "$TMP/insns") >= 10 )) || fail "$(wc -l <"$TMP/insns") programs reported, expected at least 10: $(cat "$TMP/err")"
for prog in ember_sample ember_switch ember_waking ember_malloc ember_alloc_return ember_unwind_exit; do
	grep -q "^$prog " "$TMP/insns" || fail "$prog is not reported"
done
awk '$2 == 0 { print "FAIL: " $1 ": no count of verified instructions"; bad = 1 } END { exit bad }' "$TMP/insns" ||
	fail "ember -v counts no instructions (bpf_prog_info from Linux 5.16, the verifier's statistics before)"
# A quarter of the limit: room for a later kernel's verifier to work harder.
awk '$2 > 250000 { print "FAIL: " $1 " took " $2 " verified instructions (limit 1000000)"; bad = 1 } END { exit bad }' \
	"$TMP/insns"
