#!/usr/bin/env bash
# CPU samples and native allocations in one recording, both at a high rate,
# on a workload whose threads allocate all the time (alloc_service: worker
# -> handle_request -> malloc). A CPU sample's program can run in the middle
# of a malloc probe's on the same CPU (an interrupt; uprobe programs are
# preemptible too): when both built their records in one per-CPU buffer,
# about one malloc stack in 10^5 came out mixed with the CPU sample's frames
# (worker;handle_request;__libc_malloc, worker;__libc_malloc, a lost
# start_thread). Every record must be what its own program built: each
# worker allocation stack is exactly start_thread;worker;handle_request.
. "$(dirname "$0")/../lib.sh"
need_bpf
# A malloc sample for every call (--alloc-interval 1): ~600k records in 3 s
# beside ~12k CPU samples; the old shared buffer mixed 2-5 stacks per run.
# 60,000 requests at least (240,000 allocations, ~140 MiB), however
# starved the workload (a busy CI host's did 28,000 in 3 s).
"$EMBER" record -e cpu-clock,malloc -F 1999 --alloc-interval 1 --no-java -o "$TMP/both.pb.gz" \
	-- "$WORKLOADS/alloc_service" 3 20000 0 60000 >/dev/null 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
"$EMBER" convert -e malloc "$TMP/both.pb.gz" -o "$TMP/malloc.folded" 2>/dev/null || fail "cannot read the malloc profile"
"$EMBER" convert -e cpu-clock "$TMP/both.pb.gz" -o "$TMP/cpu.folded" 2>/dev/null || fail "cannot read the CPU profile"

expected=';start_thread;worker;handle_request [0-9]+$'
good=$(weight "$TMP/malloc.folded" "$expected")
all=$(weight "$TMP/malloc.folded" ';worker;')
echo "malloc: $((good >> 20)) MiB from worker;handle_request, $((all - good)) bytes in other worker stacks"
(( good > 100 << 20 )) || fail "only $good bytes allocated in worker;handle_request: $(head -5 "$TMP/malloc.folded")"
(( all == good )) || fail "malloc stacks mixed with another record's frames:
$(grep ';worker;' "$TMP/malloc.folded" | grep -vE "$expected")"

# CPU samples in the workers reach the thread's entry too.
cpu_all=$(weight "$TMP/cpu.folded" ';worker;')
cpu_good=$(weight "$TMP/cpu.folded" ';start_thread;worker;')
echo "cpu-clock: $cpu_good of $cpu_all worker samples under start_thread"
(( cpu_all > 1000 )) || fail "only $cpu_all CPU samples in the workers"
(( cpu_all == cpu_good )) || fail "CPU stacks of the workers without start_thread:
$(grep ';worker;' "$TMP/cpu.folded" | grep -v ';start_thread;worker;' | head -5)"
