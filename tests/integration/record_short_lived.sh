#!/usr/bin/env bash
# A build-like burst of 10 ms processes (10 ms of CPU each) inside a
# system-wide recording: each is symbolized, from the mappings the kernel
# sends as it exits when the collector did not get to read /proc/PID/maps
# in time.
. "$(dirname "$0")/../lib.sh"
need_bpf
# The burst starts once ember samples and ends it (SIGINT): on a busy
# machine, a 5 s window opened after a 1 s sleep could miss processes at
# either end.
"$EMBER" record -a --no-java -F 999 --pid-frames -o "$TMP/out.folded" 2>"$TMP/err" --progress-fd 3 3>"$TMP/progress" &
ember=$!
wait_sampling $ember "$TMP/progress"
for i in $(seq 80); do "$WORKLOADS/cpu_split" 0.01; done
kill -INT $ember
wait $ember || fail "ember exited $?: $(cat "$TMP/err")"
grep -q "^  exits " "$TMP/err" || fail "no exits line in the summary: $(cat "$TMP/err")"
exits=$(awk '/^  exits /{print $2}' "$TMP/err")
(( exits >= 80 )) || skip "the kernel sent the mappings of only $exits exiting processes (needs Linux 6.16+, where sched_process_exit fires before the memory map is torn down)"

# Samples taken during the exec itself still carry the parent's (shell's)
# user stack: they name no cpu_split code and are left out.
grep -E '^cpu_split \(' "$TMP/out.folded" | grep -v 'execve' >"$TMP/split.folded"
all=$(total "$TMP/split.folded")
named=$(weight "$TMP/split.folded" ';main;run_split;hot_[ab];work_unit [0-9]+$')
in_work=$(weight "$TMP/split.folded" ';work_unit [0-9]+$')
user=$(weight "$TMP/split.folded" ';main;')
# A frame named module+offset is a file the symbolizer could not read.
# Stacks holding [unknown] frames are a frame-pointer walk straying into
# garbage (below libc's start-up code, or out of ld.so's relocation code,
# built without frame pointers): an unwinding limit, not a naming one, and
# their stray addresses may land anywhere, such as [vdso]+0x388.
grep -v '\[unknown\]' "$TMP/split.folded" >"$TMP/walked.folded"
unknown=$(weight "$TMP/walked.folded" '\+0x[0-9a-f]+;|\+0x[0-9a-f]+ [0-9]+$')
procs=$(grep -oE '^cpu_split \([0-9]+\)' "$TMP/split.folded" | sort -u | wc -l)
echo "80 processes of 10 ms: $procs sampled, $all samples, $user in main, $in_work in work_unit ($named from main), $unknown unnamed; $exits exit-time mappings"
(( procs >= 60 )) || fail "only $procs of 80 processes sampled"
(( all >= 400 )) || fail "only $all samples of cpu_split at 999 Hz"
(( unknown == 0 )) || fail "$unknown of $all samples have frames in files not read: $(grep -E '\+0x[0-9a-f]+' "$TMP/walked.folded" | head -3)"
# Each process spends 10 ms in work_unit and the rest starting: 1-2 ms on
# an idle Intel host, 3 ms where ld.so's cpuid calls trap (AMD under PVM).
(( in_work * 2 >= all )) || fail "only $in_work of $all samples in work_unit"
(( named * 100 >= in_work * 85 )) || fail "only $named of $in_work samples in work_unit reach it from main"
