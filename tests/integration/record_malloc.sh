#!/usr/bin/env bash
# Native allocations (-e malloc): two call sites allocating the same volume
# are reported 1:1; with --live only the one that keeps its blocks remains.
# A process without a shared libc gets a clear message.
. "$(dirname "$0")/../lib.sh"
need_bpf
"$EMBER" record -e malloc --no-java -o "$TMP/all.folded" -- "$WORKLOADS/leak_sites" 1 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
leak=$(weight "$TMP/all.folded" ';main;leak_here [0-9]+$')
churn=$(weight "$TMP/all.folded" ';main;churn_here [0-9]+$')
echo "malloc: leak_here $((leak >> 20)) MiB, churn_here $((churn >> 20)) MiB (equal by construction)"
(( leak > 0 && churn > 0 )) || fail "a call site is missing: $(cat "$TMP/all.folded")"
(( leak * 100 / churn >= 90 && leak * 100 / churn <= 110 )) || fail "leak_here:churn_here = $leak:$churn, not 1:1 ±10%"

"$EMBER" record -e malloc --live --no-java -o "$TMP/live.folded" -- "$WORKLOADS/leak_sites" 1 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
live_leak=$(weight "$TMP/live.folded" ';main;leak_here [0-9]+$')
live_churn=$(weight "$TMP/live.folded" ';main;churn_here [0-9]+$')
echo "malloc --live: leak_here $((live_leak >> 20)) MiB, churn_here $((live_churn >> 20)) MiB"
(( live_leak > 0 )) || fail "--live lost the leaking site: $(cat "$TMP/live.folded")"
(( live_churn == 0 )) || fail "--live shows $live_churn bytes at churn_here, which frees every block"
assert_contains "$TMP/err" "still allocated at the end"

# A static binary has no libc.so.6 to probe.
printf '#include <unistd.h>\nint main(void) { sleep(30); return 0; }\n' >"$TMP/static.c"
if cc -static -O1 "$TMP/static.c" -o "$TMP/static" 2>/dev/null; then
	background "$TMP/static"
	"$EMBER" record -e malloc -p "${BACKGROUND[-1]}" -d 1 -o "$TMP/s.folded" 2>"$TMP/err" && fail "a static binary was accepted"
	assert_contains "$TMP/err" "maps no libc.so.6 \\(a static binary"
	assert_contains "$TMP/err" "none of the targets maps a shared libc.so.6"
else
	echo "no static libc (libc6-dev): the static-binary case is not checked"
fi
"$EMBER" record --live -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "--live without -e malloc was accepted"
assert_contains "$TMP/err" "add -e malloc"
true
