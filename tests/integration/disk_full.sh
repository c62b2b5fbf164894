#!/usr/bin/env bash
# A full disk (a tmpfs of 160 KiB):
#   - ember record says it cannot write, why, and exits non-zero; the file
#     an earlier run wrote there is as it was, and nothing is left beside it;
#   - ember agent, its spool there and its server away, keeps sampling: the
#     oldest periods make room for each new one (counted, logged), none is
#     lost for want of room, and the newest are kept.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v curl >/dev/null || skip "no curl (scripts/deps.sh test installs it)"
SMALL=$TMP/small
mkdir "$SMALL"
mount -t tmpfs -o size=160k tmpfs "$SMALL" || skip "cannot mount a tmpfs"
at_exit 'umount "$SMALL"'

# --- record
background "$WORKLOADS/spinner" 60
spinner=${BACKGROUND[-1]}
"$EMBER" record -p $spinner -d 0.5 -o "$SMALL/a.folded" 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
cp "$SMALL/a.folded" "$TMP/a.folded.first"
# Fills the disk: dd stops at ENOSPC.
dd if=/dev/zero of="$SMALL/filler" bs=4k 2>/dev/null
"$EMBER" record -p $spinner -d 0.5 -o "$SMALL/a.folded" 2>"$TMP/err" && fail "ember wrote to a full disk"
assert_contains "$TMP/err" "cannot write $SMALL/a.folded: No space left on device" "no clear error: $(cat "$TMP/err")"
assert_absent "$TMP/err" "terminate|Segmentation|Aborted" "ember crashed: $(cat "$TMP/err")"
cmp -s "$SMALL/a.folded" "$TMP/a.folded.first" || fail "the earlier output changed"
[ "$(ls -A "$SMALL" | sort | tr '\n' ' ')" = "a.folded filler " ] || fail "files left: $(ls -A "$SMALL")"
rm "$SMALL/filler" "$SMALL/a.folded"
# The agent's part: 32 KiB left, room for a few periods.
avail=$(df --output=avail -k "$SMALL" | tail -1)
dd if=/dev/zero of="$SMALL/filler" bs=1k count=$((avail - 32)) 2>/dev/null

# --- agent: every process, 49 Hz, a period a second; no server listening.
PORT=$(free_port)
METRICS=$(free_port)
"$EMBER" agent --period 1s --frequency 49 --server.url "http://127.0.0.1:$PORT" --server.max_backoff 1s --server.timeout 1s \
	--spool.dir "$SMALL/spool" --spool.max_size 1GiB --metrics.listen "127.0.0.1:$METRICS" 2>"$TMP/agent.log" &
agent=$!
BACKGROUND+=($agent)
metric() { curl -fsS "http://127.0.0.1:$METRICS/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
for _ in $(seq 600); do
	[[ $(metric ember_agent_spool_full_disk_removals_total 2>/dev/null) =~ ^[1-9] ]] && break
	sleep 0.1
done
[[ $(metric ember_agent_spool_full_disk_removals_total) =~ ^[1-9] ]] ||
	fail "the spool's disk never filled in 60 s: $(df -k "$SMALL" | tail -1); $(ls -l "$SMALL/spool" | tail -3); $(tail -3 "$TMP/agent.log")"
removed_at=$(metric ember_agent_spool_full_disk_removals_total)
periods_at=$(ls "$SMALL/spool" | wc -l)
sleep 4  # four more periods on the full disk
kill -0 $agent 2>/dev/null || fail "the agent died: $(tail -5 "$TMP/agent.log")"
removed=$(metric ember_agent_spool_full_disk_removals_total)
failures=$(metric ember_agent_spool_write_failures_total)
((removed > removed_at)) || fail "no room made for the periods after the disk filled ($removed_at, then $removed)"
[ "$failures" = 0 ] || fail "$failures periods not written: $(grep 'period is lost' "$TMP/agent.log" | head -3)"
assert_contains "$TMP/agent.log" "the spool's disk is full: [0-9]+ oldest periods removed from $SMALL/spool to make room"
# The newest period is at most two periods old.
newest=$(ls "$SMALL/spool" | grep '\.pending$' | sort | tail -1)
age_ms=$(( ($(date +%s%N) - 10#${newest%%.*}) / 1000000 ))
((age_ms < 3000)) || fail "the newest period kept started $age_ms ms ago: $(ls "$SMALL/spool" | tail -3)"
kill -TERM $agent
wait $agent || fail "the agent exited $? after SIGTERM: $(tail -5 "$TMP/agent.log")"
echo "record: a clear error on a full disk, the earlier file intact; agent: $removed periods removed to make room ($periods_at in the spool when it filled), none lost for want of room, the newest $age_ms ms old"
