#!/usr/bin/env bash
# The fuzz corpus (tests/fuzz/corpus, grown by `make fuzz` with AFL++) as a
# regression test: every input through the folded and pprof readers under
# AddressSanitizer and UBSan, without a crash.
. "$(dirname "$0")/../lib.sh"
for target in folded pprof; do
	"$ROOT/build/fuzz/replay-$target" "$ROOT/tests/fuzz/corpus/$target" >"$TMP/out" 2>&1 ||
		fail "$target: $(tail -20 "$TMP/out")"
	cat "$TMP/out"
done
