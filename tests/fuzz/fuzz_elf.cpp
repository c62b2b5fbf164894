// Fuzz target: an ELF file through everything the symbolizer reads of it:
// the symbol tables and segments (ElfSymbols, from memory and from a file
// descriptor, which take different paths through libelf), build-id,
// .gnu_debuglink, MiniDebugInfo, and DWARF (DwarfIndex) looked up over a
// spread of addresses, with and without lines; and the unwind table its
// call frame information makes (unwind/cfi_table.h).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "symbolizer/debug_info.h"
#include "symbolizer/dwarf_index.h"
#include "symbolizer/elf_symbols.h"
#include "unwind/cfi_table.h"

namespace {

using namespace ember::symbolizer;

// Addresses to ask about: every segment's code (a few points through it),
// the seeds' code range, and words of the input itself (what a corrupt file
// may put in its symbol and range tables).
std::vector<uint64_t> probes(const ElfSymbols& elf, const uint8_t* data, size_t size) {
  std::vector<uint64_t> out = {0, 1, 0x400000, 0x5f0, 0x650, 0x740, 0x770, 0x7b0, 0x401136, ~uint64_t{0}};
  for (size_t i = 0; i < 32; ++i)
    if (auto v = elf.vaddr_of_offset(size * i / 32)) out.push_back(*v);
  for (size_t at = 24; at + 8 <= size && out.size() < 64; at += size / 16 + 8) {
    uint64_t word;
    std::memcpy(&word, data + at, 8);
    out.push_back(word);
  }
  return out;
}

void exercise(const ElfSymbols& elf, const std::vector<uint64_t>& addresses) {
  for (uint64_t a : addresses) {
    std::string_view name = elf.find(a);
    if (!name.empty()) demangle(name);
  }
  (void)elf.build_id().size();
  (void)elf.debuglink().size();
  (void)elf.debuglink_crc();
}

void run(const ElfSymbols& elf, const uint8_t* data, size_t size) {
  std::vector<uint64_t> addresses = probes(elf, data, size);
  exercise(elf, addresses);
  std::vector<std::string> warnings;
  if (auto mini = DebugFinder::minidebuginfo(elf, "fuzz", warnings)) {
    exercise(*mini, addresses);
    if (auto dwarf = DwarfIndex::open(mini->elf())) dwarf->lookup(addresses[5], true);
  }
  if (!elf.has_dwarf()) return;
  auto dwarf = DwarfIndex::open(elf.elf());
  if (!dwarf) return;
  for (uint64_t a : addresses) {
    dwarf->lookup(a, false);
    dwarf->lookup(a, true);
  }
}

}  // namespace

// The rows must come out sorted, whatever the CFI says.
void unwind_table(const uint8_t* data, size_t size) {
  auto table = ember::unwind::build_cfi_table(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!table) return;
  for (size_t i = 1; i < table->rows.size(); ++i)
    if (table->rows[i - 1].pc >= table->rows[i].pc) __builtin_trap();
  for (const auto& s : table->segments) (void)table->address_of_offset(s.offset);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  unwind_table(data, size);
  if (auto elf = ElfSymbols::read_memory(std::string(reinterpret_cast<const char*>(data), size), "fuzz"))
    run(**elf, data, size);
  // The path `ember symbolize` and the profiler take: libelf reading a file.
  int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) == static_cast<ssize_t>(size))
    if (auto elf = ElfSymbols::read(fd, "fuzz")) run(**elf, data, size);
  close(fd);
  return 0;
}
