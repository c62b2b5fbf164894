#!/usr/bin/env bash
# ember agent's start and stop, with two CPU hogs beside it (a busy host is
# where its races showed): a configuration mistake, event names and their
# combinations included, stops it before anything starts, with the key,
# the file's line and exit 2, in the agent's own words; SIGTERM at any
# moment of start-up ends it with exit 0 and frees its /metrics port; its
# warnings name its keys, not ember record's options.
. "$(dirname "$0")/../lib.sh"
background "$WORKLOADS/spinner" 600
background "$WORKLOADS/spinner" 600
SPOOL=$TMP/spool

# expect_refusal CONFIG_TEXT PATTERN [FLAGS...]: 10 runs, each exit 2 within
# 10 s with PATTERN on stderr and nothing started (no "sampling" line).
expect_refusal() {
	local text=$1 pattern=$2 i rc
	shift 2
	printf '%s' "$text" >"$TMP/agent.toml"
	for i in $(seq 10); do
		timeout -s KILL 10 "$EMBER" agent --config "$TMP/agent.toml" --spool.dir "$SPOOL" \
			--metrics.listen "127.0.0.1:$(free_port)" "$@" >/dev/null 2>"$TMP/err"
		rc=$?
		((rc == 137)) && fail "run $i of '$text' $*: still running after 10 s: $(cat "$TMP/err")"
		((rc == 2)) || fail "run $i of '$text' $*: exit $rc, not 2: $(cat "$TMP/err")"
		assert_contains "$TMP/err" "$pattern" "run $i of '$text' $*: not the message wanted"
		assert_absent "$TMP/err" "ember record|^ember agent: sampling" "run $i of '$text' $*: record's words, or it started"
	done
	echo "refused as wanted: $(cat "$TMP/err")"
}
expect_refusal $'events = ["cpu", "gpu"]\n' "agent\\.toml:1: events: unknown event 'gpu': give one of cpu-clock \\(or cpu\\),"
expect_refusal $'period = "5s"\nevents = ["offcpu", "offcpu"]\n' "agent\\.toml:2: events: 'offcpu' is given twice"
expect_refusal $'events = ["cpu", "cycles"]\n' "agent\\.toml:1: events: 'cpu' and 'cycles': one CPU-sampling event at most"
expect_refusal '' "^ember agent: --events: unknown event 'gpu'" --events gpu
expect_refusal $'events = ["alloc"]\n[java]\nattach = false\n' "'alloc' needs ember's Java agent: set java.attach = true"

need_bpf
# cycles needs a hardware PMU; where there is none the agent says so in its
# own words (record's -e is no option of the agent's).
timeout -s TERM 10 "$EMBER" agent --events cycles --spool.dir "$SPOOL" --metrics.listen '' >/dev/null 2>"$TMP/err"
if grep -q "no hardware PMU" "$TMP/err"; then
	assert_contains "$TMP/err" "use 'cpu-clock'" "events = cycles without a PMU: $(cat "$TMP/err")"
	assert_absent "$TMP/err" "-e cpu-clock" "events = cycles: record's spelling"
fi

# SIGTERM from the first instant of start-up (its exec) to sampling: exit 0
# within the spool-only grace (no server), the port free again.
exe=$(readlink -f "$EMBER")
for delay in 0 0 0.01 0.05 0.1 0.3 0.6 1 2 4; do
	port=$(free_port)
	"$EMBER" agent --spool.dir "$SPOOL" --metrics.listen "127.0.0.1:$port" --period 1s 2>"$TMP/log" &
	agent=$!
	# From its exec on: before it, the signal would end the shell forked
	# for it, not ember.
	for _ in $(seq 1000); do [[ $(readlink /proc/$agent/exe) == "$exe" ]] && break; sleep 0.01; done
	[[ $(readlink /proc/$agent/exe) == "$exe" ]] || fail "the agent was not started 10 s later: $(cat "$TMP/log")"
	sleep "$delay"
	kill -TERM $agent
	for _ in $(seq 200); do kill -0 $agent 2>/dev/null || break; sleep 0.1; done
	if kill -0 $agent 2>/dev/null; then
		kill -9 $agent
		fail "SIGTERM $delay s after start: the agent still runs 20 s later: $(tail -3 "$TMP/log")"
	fi
	wait $agent
	rc=$?
	# Within the first tenth of a second the signal may come before the
	# agent has set its handler (before main, even): the default action
	# ends it, as it should, and there is no period to lose yet.
	((rc == 0)) || { ((rc == 143)) && [[ $delay == 0 || $delay == 0.0* || $delay == 0.1 ]]; } ||
		fail "SIGTERM $delay s after start: exit $rc: $(tail -3 "$TMP/log")"
	python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', $port))" ||
		fail "SIGTERM $delay s after start: port $port still held"
done
echo "SIGTERM at 0 to 4 s after start: it ended each time, the port freed"

# The DWARF bound's warning, past symbol_memory's half: libc's debug file
# (libc6-dbg) holds 9.5 MiB of DWARF, over the 8 MiB that 16 leaves.
libc=$(ldd /bin/dd | awk '/libc.so.6/ { print $3 }')
build_id=$(readelf -n "$libc" | awk '/Build ID/ { print $3 }')
[ -e "/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug" ] || skip "no debug file of $libc (libc6-dbg)"
background dd if=/dev/zero of=/dev/null bs=1
"$EMBER" agent --spool.dir "$SPOOL" --metrics.listen "" --period 2s --symbol_memory 16 2>"$TMP/dwarf.log" &
agent=$!
BACKGROUND+=($agent)
# libc's warning, not another binary's (ember's own came first once), in a
# log of its own (not one an agent of the loop above may still write).
for _ in $(seq 300); do grep -q 'libc.so.6: its DWARF' "$TMP/dwarf.log" && break; sleep 0.1; done
kill -TERM $agent
wait $agent
[ -e "$TMP/dwarf.log" ] || fail "the agent's log is gone; $TMP holds: $(ls -A "$TMP" 2>&1)"
cat "$TMP/dwarf.log"
assert_contains "$TMP/dwarf.log" "libc.so.6: its DWARF \\([0-9]+ MiB\\) does not fit in what is left of the symbolizer's 8 MiB for DWARF \\(half of symbol_memory\\)" \
	"no warning naming symbol_memory"
assert_absent "$TMP/dwarf.log" "--[a-z]+-[a-z]+" "an option of ember record named"
