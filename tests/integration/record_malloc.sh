#!/usr/bin/env bash
# kind: structural
# Native allocations (-e malloc): two call sites allocating the same volume
# are reported 1:1; with --live only the one that keeps its blocks remains.
# mmap counts as an allocation too, malloc's own mmap calls once; blocks are
# followed per process (a forked child's free of its copy). A process
# or a command without a shared libc gets a clear message.
. "$(dirname "$0")/../lib.sh"
need_bpf
# A sample every 16 KiB, below the 64 KiB blocks: nearly every block is
# sampled. At the default 512 KiB (~1400 samples), 1:1 +-10% was 1.8 sigma:
# 1 run in 20 failed (327:366 MiB).
"$EMBER" record -e malloc --alloc-interval 16384 --no-java -o "$TMP/all.folded" -- "$WORKLOADS/leak_sites" 1 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
leak=$(weight "$TMP/all.folded" ';main;leak_here [0-9]+$')
churn=$(weight "$TMP/all.folded" ';main;churn_here [0-9]+$')
echo "malloc: leak_here $((leak >> 20)) MiB, churn_here $((churn >> 20)) MiB (equal by construction)"
(( leak > 0 && churn > 0 )) || fail "a call site is missing: $(cat "$TMP/all.folded")"
(( leak * 100 / churn >= 90 && leak * 100 / churn <= 110 )) || fail "leak_here:churn_here = $leak:$churn, not 1:1 ±10%"

"$EMBER" record -e malloc --live --alloc-interval 16384 --no-java -o "$TMP/live.folded" -- "$WORKLOADS/leak_sites" 1 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
live_leak=$(weight "$TMP/live.folded" ';main;leak_here [0-9]+$')
live_churn=$(weight "$TMP/live.folded" ';main;churn_here [0-9]+$')
echo "malloc --live: leak_here $((live_leak >> 20)) MiB, churn_here $((live_churn >> 20)) MiB"
(( live_leak > 0 )) || fail "--live lost the leaking site: $(cat "$TMP/live.folded")"
(( live_churn == 0 )) || fail "--live shows $live_churn bytes at churn_here, which frees every block"
assert_contains "$TMP/err" "still allocated at the end"

# mmap: what a program maps itself counts (tests/workloads/map_sites: 4 x
# 64 MiB from each of map_keep_here and map_drop_here); glibc's own mmap
# calls for large malloc blocks (64 x 1 MiB from each of big_keep_here and
# big_drop_here) count once, as the malloc; PROT_NONE reservations and
# shared memory do not count. Every call is above the sampling interval:
# each is a sample of its size (plus the few bytes of small allocations
# since the one before).
mib=1048576
# within 1% of N MiB
mib_near() { (( $1 >= $2 * mib && $1 <= $2 * mib + $2 * mib / 100 )); }
"$EMBER" record -e malloc --no-java -o "$TMP/map.folded" -- "$WORKLOADS/map_sites" 4 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
site() { weight "$1" ";main;$2 [0-9]+$"; }
for s in map_keep_here map_drop_here big_keep_here big_drop_here; do
	eval "$s=$(site "$TMP/map.folded" $s)"
done
all=$(total "$TMP/map.folded")
echo "mmap: map_keep_here $((map_keep_here / mib)) MiB, map_drop_here $((map_drop_here / mib)) MiB," 	"big_keep_here $((big_keep_here / mib)) MiB, big_drop_here $((big_drop_here / mib)) MiB; all stacks $((all / mib)) MiB"
# Before Linux 5.15 (no BPF cookies) mmap is not probed, as ember warns:
# its sites then hold nothing.
map_mib=256
if grep -q "mmap calls are not recorded: this kernel has no BPF cookies" "$TMP/err"; then
	echo "no BPF cookies: mmap calls are not recorded, as ember warns"
	map_mib=0
fi
mib_near "$map_keep_here" $map_mib && mib_near "$map_drop_here" $map_mib ||
	fail "mmap sites: not $map_mib MiB each: $(cat "$TMP/map.folded")"
mib_near "$big_keep_here" 64 && mib_near "$big_drop_here" 64 || fail "large malloc sites: not 64 MiB each: $(cat "$TMP/map.folded")"
# The rest: what the C library allocates as the program starts, a few KiB.
sites=$((map_keep_here + map_drop_here + big_keep_here + big_drop_here))
(( all - sites < mib )) || fail "$(((all - sites) / mib)) MiB outside the four sites (malloc's own mmap counted twice?): $(cat "$TMP/map.folded")"
assert_absent "$TMP/map.folded" 'reserve_here|shared_here' "a PROT_NONE reservation or shared memory counted as allocated"

"$EMBER" record -e malloc --live --no-java -o "$TMP/maplive.folded" -- "$WORKLOADS/map_sites" 4 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
map_keep=$(site "$TMP/maplive.folded" map_keep_here)
big_keep=$(site "$TMP/maplive.folded" big_keep_here)
echo "mmap --live: map_keep_here $((map_keep / mib)) MiB, big_keep_here $((big_keep / mib)) MiB"
mib_near "$map_keep" $map_mib && mib_near "$big_keep" 64 || fail "--live lost what is kept: $(cat "$TMP/maplive.folded")"
assert_absent "$TMP/maplive.folded" 'map_drop_here|big_drop_here' "--live shows an unmapped or freed site"

# Blocks are followed per process: a forked child freeing its copies (the
# same addresses) leaves the parent's 16 MiB live.
"$EMBER" record -e malloc --live --alloc-interval 16384 --no-java -o "$TMP/fork.folded" -- "$WORKLOADS/fork_free" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
kept=$(weight "$TMP/fork.folded" ';main;kept_here [0-9]+$')
echo "malloc --live beside a child freeing its copies: kept_here $((kept / mib)) MiB of 16"
mib_near "$kept" 16 || fail "--live lost the parent's blocks that its child freed: $(cat "$TMP/fork.folded")"

# A static binary has no libc.so.6 to probe.
printf '#include <unistd.h>\nint main(void) { sleep(30); return 0; }\n' >"$TMP/static.c"
if cc -static -O1 "$TMP/static.c" -o "$TMP/static" 2>/dev/null; then
	background "$TMP/static"
	"$EMBER" record -e malloc -p "${BACKGROUND[-1]}" -d 1 -o "$TMP/s.folded" 2>"$TMP/err" && fail "a static binary was accepted"
	assert_contains "$TMP/err" "maps no libc.so.6 \\(a static binary"
	assert_contains "$TMP/err" "none of the targets maps a shared libc.so.6"
	# ... and a static command is named as such (its dynamic children are still seen).
	printf 'int main(void) { return 0; }\n' >"$TMP/static_now.c"
	cc -static -O1 "$TMP/static_now.c" -o "$TMP/static_now" || fail "cc -static failed the second time"
	"$EMBER" record -e malloc -o "$TMP/sc.folded" -- "$TMP/static_now" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
	assert_contains "$TMP/err" "static_now is statically linked \\(no libc.so.6\\): -e malloc cannot see its allocations" \
		"-- STATIC_BINARY: no warning: $(cat "$TMP/err")"
else
	echo "no static libc (libc6-dev): the static-binary case is not checked"
fi
"$EMBER" record --live -o "$TMP/x.folded" -- true 2>"$TMP/err" && fail "--live without -e malloc was accepted"
assert_contains "$TMP/err" "add -e malloc"
true
