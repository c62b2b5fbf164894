// A binary's unwind table for the in-kernel unwinder (bpf/unwind.bpf.c):
// its call frame information (.eh_frame, else .debug_frame), its entries
// read with elfutils and each FDE's CFA program run once, from start to
// end, reduced to the rules the BPF walker applies (bpf/unwind.h). Running
// the programs here, not asking elfutils address by address (which runs
// a program again from its start for every row), is 4-9x faster: cc1plus's
// 465k rows take 42 ms, not 376, libjvm 17 ms, not 75. x86_64 and arm64
// binaries, whatever the host's architecture.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <linux/types.h>  // __u32 and friends for unwind.h
extern "C" {
#include "unwind.h"
}

namespace ember::unwind {

struct CfiTable {
  uint64_t base = 0;  // the address (as in the file) of row pc 0
  std::vector<ember_unwind_row> rows;  // sorted by pc; each holds until the next
  // The file's loadable segments: where file offsets land in its addresses.
  struct Segment {
    uint64_t offset, vaddr, size;
  };
  std::vector<Segment> segments;
  size_t fdes = 0;         // frame descriptions read
  size_t unsupported = 0;  // rows the walker cannot apply (EMBER_ROW_UNSUPPORTED)

  // The file address at file offset `offset`, if a loadable segment holds it.
  std::optional<uint64_t> address_of_offset(uint64_t offset) const;
};

// Why a binary has no table.
enum class NoTable { NoCfi, Unreadable, TooLarge };
struct TableError {
  NoTable reason;
  std::string detail;
};

std::expected<CfiTable, TableError> build_cfi_table(Elf* elf);
// The same from a file, or from an image in memory.
std::expected<CfiTable, TableError> build_cfi_table(int fd);
std::expected<CfiTable, TableError> build_cfi_table(std::string_view image);
// The vDSO's, from its image; where it has no CFI (arm64's, as Linux 6.1
// builds it), from the way the kernel writes its code.
std::expected<CfiTable, TableError> build_vdso_table(std::string_view image);

}  // namespace ember::unwind
