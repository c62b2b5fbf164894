// One ELF file: its function symbols (.symtab and .dynsym, looked up by
// virtual address), its executable segments (to turn the file offsets that
// process mappings give into those addresses), and what leads to its debug
// info: build-id, .gnu_debuglink, MiniDebugInfo, DWARF sections.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::symbolizer {

class ElfSymbols {
 public:
  // Reads the file behind `fd` (not taken over; it must stay open while
  // this lives). `name` is for messages.
  static std::expected<std::unique_ptr<ElfSymbols>, std::string> read(int fd, const std::string& name);
  // Reads an ELF image held in memory (a decompressed MiniDebugInfo, the vDSO).
  static std::expected<std::unique_ptr<ElfSymbols>, std::string> read_memory(std::string image,
                                                                             const std::string& name);
  // Only the GNU build-id of the file behind `fd` (its notes: a few hundred
  // bytes read, where read() reads the symbol tables), or empty.
  static std::string read_build_id(int fd);
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  // The virtual address (as in the symbol table) of a file offset inside an
  // executable PT_LOAD segment, if any.
  std::optional<uint64_t> vaddr_of_offset(uint64_t offset) const;
  // The raw (mangled) name of the function containing `vaddr`, or empty. In
  // a PLT section: "<function>@plt" for the entry that jumps to it (as
  // perf names them), "[plt]" where that cannot be told.
  std::string_view find(uint64_t vaddr) const;
  size_t size() const { return symbols_.size(); }
  // Adds the symbols of `other` (a debug file of this one), which must outlive this.
  void merge(const ElfSymbols& other);

  // GNU build-id as lowercase hex, or empty.
  const std::string& build_id() const { return build_id_; }
  // .gnu_debuglink: the debug file's name and CRC32, or an empty name.
  const std::string& debuglink() const { return debuglink_; }
  uint32_t debuglink_crc() const { return debuglink_crc_; }
  bool has_symtab() const { return has_symtab_; }
  // Whether the file carries DWARF (.debug_info, possibly compressed).
  bool has_dwarf() const { return dwarf_bytes_ != 0; }
  // Bytes of DWARF sections, uncompressed: what reading them costs in memory.
  uint64_t dwarf_bytes() const { return dwarf_bytes_; }
  // The xz-compressed ELF image of .gnu_debugdata (MiniDebugInfo), or empty.
  std::string_view minidebuginfo() const;
  void* elf() const { return elf_; }  // Elf*, for libdw
  // Reads nothing more from the file: what was read stays usable (symbols,
  // and DWARF already given to libdw), later reads fail. Then the fd may close.
  void release_file();
  // The bytes this holds: the sections libelf read into memory (symbol and
  // string tables, notes, PLT and its relocations; the whole image when
  // read from memory) and the symbol tables built from them.
  uint64_t memory_bytes() const;
 private:
  ElfSymbols() = default;
  struct Segment {
    uint64_t offset, vaddr, filesz;
  };
  struct Symbol {
    uint64_t address, size;
    const char* name;  // points into the string table libelf holds
    uint8_t rank;      // preference among aliases: global < weak < local functions < labels
  };
  static std::expected<std::unique_ptr<ElfSymbols>, std::string> parse(void* elf, const std::string& name);
  void sort_symbols();

  void* elf_ = nullptr;  // Elf*, owns the string tables
  std::unique_ptr<std::string> image_;  // the bytes behind elf_ when read from memory
  std::vector<Segment> segments_;
  std::vector<Symbol> symbols_;  // sorted by address, one per address
  std::vector<std::pair<uint64_t, uint64_t>> plt_;  // [lo, hi) of the PLT sections
  struct PltEntry {
    uint64_t address, size;
    std::string name;  // "<function>@plt"
  };
  std::vector<PltEntry> plt_entries_;  // sorted by address
  uint64_t plt_name_bytes_ = 0;        // their names' heap bytes: memory_bytes() is asked for each batch
  void name_plt_entries();
  std::string build_id_, debuglink_;
  uint32_t debuglink_crc_ = 0;
  bool has_symtab_ = false;
  uint64_t dwarf_bytes_ = 0;
  uint64_t sections_read_bytes_ = 0;  // see memory_bytes()
  void* debugdata_ = nullptr;  // Elf_Scn* of .gnu_debugdata
};

// Demangles C++ names ("_Z...") and drops symbol versions ("@@GLIBC_2.14").
std::string demangle(std::string_view name, bool* was_cpp = nullptr);

}  // namespace ember::symbolizer
