#!/usr/bin/env bash
# The fuzz corpus (tests/fuzz/corpus/TARGET, grown by `make fuzz` with
# AFL++) as a regression test: every input through its target (the folded
# and pprof readers; the symbolizer's ELF/DWARF readers, its maps and
# perf-map parsers, and the readers of JVM agents' streams) under AddressSanitizer and UBSan, without a crash.
. "$(dirname "$0")/../lib.sh"
for target in folded pprof elf perfmap jitmap; do
	"$ROOT/build/fuzz/replay-$target" "$ROOT/tests/fuzz/corpus/$target" >"$TMP/out" 2>&1 ||
		fail "$target: $(tail -20 "$TMP/out")"
	echo "$target: $(cat "$TMP/out")"
done
