#!/usr/bin/env bash
# Builds the ELF seeds of tests/fuzz/corpus/elf from elf_seed.cpp. Run once
# by hand; the outputs are committed (a new compiler would change them, and
# AFL's finds are kept next to them). -z noseparate-code keeps each a few KB.
#   tests/fuzz/seeds/make_elf_seeds.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../corpus/elf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
cxx() { g++ -O2 -Wl,-z,noseparate-code "$@" "$here/elf_seed.cpp"; }

cxx -g -o "$out/seed-dwarf5-pie"                      # DWARF 5, .debug_rnglists, build-id
cxx -gdwarf-4 -no-pie -o "$out/seed-dwarf4-exec"      # DWARF 4, .debug_ranges, ET_EXEC
cxx -g -gz=zlib -o "$out/seed-zdebug"                 # SHF_COMPRESSED DWARF sections
cxx -g -gsplit-dwarf -o "$tmp/split" && cp "$tmp/split" "$out/seed-split-skeleton"  # skeleton units, no .dwo
g++ -O2 -g -c "$here/elf_seed.cpp" -o "$out/seed-reloc.o"   # ET_REL: DWARF with relocations

# Stripped, with a debuglink and MiniDebugInfo (.gnu_debugdata: an xz'd ELF
# holding the function symbols), as Fedora ships binaries.
cxx -g -o "$tmp/full"
objcopy --only-keep-debug "$tmp/full" "$tmp/full.debug"
nm "$tmp/full" --format=posix --defined-only | awk '$2 ~ /[TtWw]/ { print $1 }' | sort >"$tmp/funcs"
objcopy -S --remove-section .comment --keep-symbols="$tmp/funcs" "$tmp/full" "$tmp/mini"
xz --check=crc64 "$tmp/mini"
strip --strip-all -o "$tmp/stripped" "$tmp/full"
objcopy --add-gnu-debuglink="$tmp/full.debug" --add-section .gnu_debugdata="$tmp/mini.xz" "$tmp/stripped" \
	"$out/seed-minidebuginfo"
ls -l "$out"/seed-*
