#!/usr/bin/env bash
# The fuzz corpus (tests/fuzz/corpus/TARGET, grown by `make fuzz` with
# AFL++) as a regression test: every input through its harness under
# AddressSanitizer and UBSan, without a crash. The targets are every reader
# of outside data: profiles (folded, pprof, otlp), binaries (elf), maps and perf
# maps (perfmap), JVM agents' streams (jitmap), a JVM's attach replies and
# hsperfdata (attach, hsperf), the agent's configuration and its backend's
# answers (agent_config, backend), what clients send ember serve (serve),
# an HTML flamegraph's tables (page), a heap dump (heap), a CPython
# process's code objects (python), a node process's functions (v8).
. "$(dirname "$0")/../lib.sh"
for dir in "$ROOT"/tests/fuzz/corpus/*/; do
	target=$(basename "$dir")
	"$ROOT/build/fuzz/replay" "$target" "$dir" >"$TMP/out" 2>&1 || fail "$target: $(tail -20 "$TMP/out")"
	echo "$target: $(cat "$TMP/out")"
done
