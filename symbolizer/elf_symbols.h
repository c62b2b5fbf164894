// Function symbols of one ELF file (.symtab and .dynsym), looked up by file
// offset, which is what a process mapping gives us.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::symbolizer {

class ElfSymbols {
 public:
  // Reads the file behind `fd` (not taken over). `name` is for messages.
  static std::expected<std::unique_ptr<ElfSymbols>, std::string> read(int fd, const std::string& name);
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  // The virtual address (as in the symbol table) of a file offset inside an
  // executable PT_LOAD segment, if any.
  std::optional<uint64_t> vaddr_of_offset(uint64_t offset) const;
  // The raw (mangled) name of the function containing `vaddr`, or empty.
  std::string_view find(uint64_t vaddr) const;
  size_t size() const { return symbols_.size(); }

 private:
  ElfSymbols() = default;
  struct Segment {
    uint64_t offset, vaddr, filesz;
  };
  struct Symbol {
    uint64_t address, size;
    const char* name;  // points into the string table libelf holds
    uint8_t rank;      // binding preference among aliases: global < weak < local
  };
  void* elf_ = nullptr;  // Elf*, owns the string tables
  std::vector<Segment> segments_;
  std::vector<Symbol> symbols_;  // sorted by address, one per address
};

// Demangles C++ names ("_Z..."); returns other names unchanged.
std::string demangle(std::string_view name, bool* was_cpp = nullptr);

}  // namespace ember::symbolizer
