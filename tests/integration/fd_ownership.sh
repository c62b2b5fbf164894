#!/usr/bin/env bash
# ember closes each file descriptor once. A second close of a number that
# another thread has opened since closes that thread's file under it: the
# agent's pusher then read its spool through a closed descriptor ("Bad
# file descriptor", a period lost) when the sampler's stop closed the perf
# events' descriptors that their libbpf links had closed already. Under
# strace, a close() answered EBADF is such a second close (the number was
# still free); `ember record` (cpu, off-CPU) and `ember agent` stopped by
# SIGTERM make none.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v strace >/dev/null || fail "strace missing: scripts/deps.sh test installs it"

ebadf() { grep -E 'close\([0-9]+\) += -1 EBADF' "$1" | head -5; }

strace -f -qq -e trace=close -o "$TMP/record.strace" \
	"$EMBER" record -e cpu,offcpu -F 199 -d 2 -o "$TMP/out.folded" -- "$WORKLOADS/spinner" 1 2>"$TMP/record.err" ||
	fail "ember record exited $?: $(cat "$TMP/record.err")"
[ -z "$(ebadf "$TMP/record.strace")" ] || fail "ember record closed a descriptor twice: $(ebadf "$TMP/record.strace")"

background "$WORKLOADS/spinner" 30
strace -f -qq -e trace=close -o "$TMP/agent.strace" \
	"$EMBER" agent --period 1s --frequency 49 --server.url "http://127.0.0.1:$(free_port)" --server.max_backoff 1s \
	--metrics.listen "" --spool.dir "$TMP/spool" --relabel 'keep service_name spinner' 2>"$TMP/agent.err" &
strace_pid=$!
for _ in $(seq 300); do ls "$TMP/spool" 2>/dev/null | grep -q pending && break; sleep 0.1; done
ls "$TMP/spool" 2>/dev/null | grep -q pending || fail "the agent spooled no period in 30 s: $(cat "$TMP/agent.err")"
pkill -TERM -P $strace_pid -x ember || fail "no agent under strace"
wait $strace_pid || fail "the agent exited $? after SIGTERM: $(cat "$TMP/agent.err")"
[ -z "$(ebadf "$TMP/agent.strace")" ] || fail "ember agent closed a descriptor twice: $(ebadf "$TMP/agent.strace")"
echo "record: $(grep -c 'close(' "$TMP/record.strace") closes, agent: $(grep -c 'close(' "$TMP/agent.strace"), none twice"
