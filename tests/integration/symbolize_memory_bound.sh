#!/usr/bin/env bash
# Past the DWARF memory bound (--symbol-memory) the largest binaries are
# named from their symbol tables alone, with a warning naming them; the
# small ones keep their inlined frames.
. "$(dirname "$0")/../lib.sh"
target=$ROOT/build/fixtures/symtarget
[ -x "$target" ] || fail "no $target (make test builds it)"
libc=$(realpath "$(ldd "$target" | awk '/libc.so.6/{print $3}')")
libc_debug=/usr/lib/debug/.build-id/$(readelf -n "$libc" | awk '/Build ID/{print substr($3,1,2) "/" substr($3,3)}').debug
[ -e "$libc_debug" ] || skip "no debug file for $libc (install libc6-dbg)"

"$target" >"$TMP/ready" &
BACKGROUND+=($!)
pid=$!
for _ in $(seq 100); do grep -q ready "$TMP/ready" 2>/dev/null && break; sleep 0.05; done
map_base() { awk -v f="$1" '$6 == f && $3 == "00000000" {split($1, r, "-"); print r[1]; exit}' "/proc/$pid/maps"; }
target_base=$(map_base "$target")
libc_base=$(map_base "$libc")
[ -n "$target_base" ] && [ -n "$libc_base" ] || fail "cannot find the mappings of $target and $libc"
# symfix::two_deep has calls inlined into it; __res_binary_hnok too (libc).
two_deep=$(nm "$target" | awk '/two_deep/{print $1}')
hnok=$(nm "$libc_debug" | awk '$3 == "__res_binary_hnok" {print $1}')
a_target=$(printf '%x' $((0x$target_base + 0x$two_deep + 0x10)))
addrs=("$a_target")
# Every address of __res_binary_hnok's first 64 bytes: some lie in inlined code.
for off in $(seq 0 63); do addrs+=("$(printf '%x' $((0x$libc_base + 0x$hnok + off)))"); done

"$EMBER" symbolize --pid "$pid" "${addrs[@]}" >"$TMP/full" 2>"$TMP/full.err" || fail "ember exited $?"
grep -q '\[inlined\].*__res_binary_hnok' "$TMP/full" || fail "no inlined frames in libc with an ample bound: $(head -3 "$TMP/full")"

"$EMBER" symbolize --pid "$pid" --symbol-memory 4 "${addrs[@]}" >"$TMP/bound" 2>"$TMP/bound.err" || fail "ember exited $?"
cat "$TMP/bound.err"
assert_contains "$TMP/bound.err" "libc.so.6: its DWARF \\([0-9]+ MiB\\) does not fit" "no warning naming libc"
assert_absent "$TMP/bound.err" "symtarget: its DWARF" "the small fixture was refused too"
assert_absent "$TMP/bound" '\[inlined\].*__res_binary_hnok' "libc still has inlined frames past the bound"
assert_contains "$TMP/bound" $'\t__res_binary_hnok$' "libc not named from its symbol table"
head -1 "$TMP/bound" | grep -q '\[inlined\]' || fail "the fixture lost its inlined frames: $(head -1 "$TMP/bound")"
