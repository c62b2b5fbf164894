#!/usr/bin/env bash
# A binary without a build-id finds its debug file by .gnu_debuglink, and
# only if the file's CRC32 is the one the link records: a stale debug file
# (here: one byte changed) names nothing, rather than the wrong functions.
. "$(dirname "$0")/../lib.sh"
for tool in g++ objcopy strip nm; do command -v "$tool" >/dev/null || skip "no $tool"; done
mkdir -p "$TMP/bin"
g++ -O2 -g -Wl,--build-id=none "$ROOT/tests/fuzz/seeds/elf_seed.cpp" -o "$TMP/bin/prog" || fail "g++ failed"
helper=$(nm "$TMP/bin/prog" | awk '$3 == "_ZL12local_helperi" { print "0x" $1; exit }')
[ -n "$helper" ] || fail "nm lacks local_helper"
objcopy --only-keep-debug "$TMP/bin/prog" "$TMP/bin/prog.debug" || fail "objcopy failed"
strip --strip-all "$TMP/bin/prog" || fail "strip failed"
(cd "$TMP/bin" && objcopy --add-gnu-debuglink=prog.debug prog) || fail "objcopy --add-gnu-debuglink failed"
readelf -n "$TMP/bin/prog" | grep -q 'Build ID' && fail "the binary has a build-id: the CRC path is not taken"

"$EMBER" symbolize --elf "$TMP/bin/prog" "$helper" >"$TMP/out" 2>"$TMP/err" || fail "ember exited $?"
assert_contains "$TMP/out" $'\tlocal_helper\\(int\\)$' "not named through the debuglink: $(cat "$TMP/out" "$TMP/err")"

printf '\x01' | dd of="$TMP/bin/prog.debug" bs=1 seek=100 conv=notrunc status=none
"$EMBER" symbolize --elf "$TMP/bin/prog" "$helper" >"$TMP/out" 2>"$TMP/err" || fail "ember exited $?"
assert_contains "$TMP/out" $'\t\\?\\? prog\\+' "a debug file whose CRC differs was used: $(cat "$TMP/out")"
