#!/usr/bin/env bash
# A sampling storm: the highest rate the kernel allows (its
# perf_event_max_sample_rate, capped at 20 kHz), both CPUs busy, 2,000
# short-lived processes a second, for 8 s, system-wide with kernel stacks.
# ember keeps up or counts what it lost and says so; its RSS stays bounded
# (under 768 MB, read every 0.2 s: 343 to 406 MB in 7 quiet runs here, 533
# once in a fresh clone's CI run, not explained yet); it writes the profile, which still names
# the spinners' frames, and exits 0. (Before the unwinder cached the rows
# it reads for copied stacks, it kept 32,768 samples of about 300,000: two
# batches, one at the start and one at the stop.)
. "$(dirname "$0")/../lib.sh"
need_bpf
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
# The kernel lowers this limit when sampling interrupts run long: put it
# back, whatever this storm made of it.
at_exit 'echo "$max" >/proc/sys/kernel/perf_event_max_sample_rate'
rate=$((max < 20000 ? max : 20000))
background "$WORKLOADS/spinner" 30
background "$WORKLOADS/spinner" 30
background "$WORKLOADS/process_churn" 16000 8
"$EMBER" record -a -F $rate -d 8 --no-java -o "$TMP/out.folded" 2>"$TMP/err" &
ember=$!
peak=0
while kill -0 $ember 2>/dev/null; do
	rss=$(awk '/^VmRSS/ { print $2 }' /proc/$ember/status 2>/dev/null)
	((${rss:-0} > peak)) && peak=$rss
	sleep 0.2
done
wait $ember || fail "ember exited $? in the storm: $(tail -5 "$TMP/err")"
assert_absent "$TMP/err" "terminate|Segmentation|Aborted|AddressSanitizer" "ember crashed: $(cat "$TMP/err")"
samples=$(awk '$1 == "samples" { print $2 }' "$TMP/err")
lost=$(awk '$1 == "lost" { print $2 }' "$TMP/err")
[[ $samples =~ ^[0-9]+$ && $lost =~ ^[0-9]+$ ]] || fail "no samples and lost lines in the summary: $(cat "$TMP/err")"
spinners=$(weight "$TMP/out.folded" '^spinner;.*spinner_loop')
echo "$rate Hz on $(nproc) CPUs with 2,000 processes a second: $samples samples, $lost lost (counted), spinners $spinners; RSS peak $((peak / 1024)) MB"
((peak < 768 * 1024)) || fail "RSS peaked at $((peak / 1024)) MB"
# The kernel throttles sampling past what the CPUs can take: at least a
# quarter of the rate asked for is either kept or counted lost.
((samples + lost >= rate * $(nproc) * 8 / 4)) || fail "$samples samples and $lost lost of $((rate * $(nproc) * 8)) asked for"
((samples * 2 >= samples + lost)) || fail "only $samples samples kept of $((samples + lost)): the collector does not keep up"
((spinners >= 1000)) || fail "only $spinners samples of the spinners named spinner_loop"
