// Inlined functions and source lines from DWARF (through libdw), indexed
// for many lookups: each compile unit's function and inline ranges are
// read once, on its first lookup, into a sorted table, so a lookup is two
// binary searches and a short walk up the nesting (eu-addr2line instead
// walks the unit's DIE tree for every address).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::symbolizer {

struct SourceFrame {
  std::string name;  // linkage name if there is one (mangled), else the DWARF name
  std::string file;  // source file of `line`, may be empty
  uint32_t line = 0;  // 0: unknown
  bool inlined = false;
};

class DwarfIndex {
 public:
  // Reads DWARF from `elf` (an Elf*, kept by the caller for this index's life).
  // Null when it has no usable DWARF.
  static std::unique_ptr<DwarfIndex> open(void* elf);
  ~DwarfIndex();
  DwarfIndex(const DwarfIndex&) = delete;
  DwarfIndex& operator=(const DwarfIndex&) = delete;

  // The function at `vaddr` and the functions inlined into it there, outermost
  // first (the last one is where the instruction is). With `lines`, each
  // frame's file and line: for all but the last, the line of the inlined call.
  // Empty when DWARF does not cover `vaddr`.
  std::vector<SourceFrame> lookup(uint64_t vaddr, bool lines);

  // Compile units read so far that libdw could read only in part (corrupt
  // DWARF): their functions may lack inlined frames or lines.
  size_t damaged_units() const { return damaged_units_; }

  // The bytes of the tables built so far: unit ranges, the units read and
  // their line tables (libdw's), names. Not the DWARF sections themselves.
  uint64_t memory_bytes() const { return memory_bytes_; }

  struct Unit;  // one compile unit's table (dwarf_index.cpp)

 private:
  DwarfIndex() = default;
  struct UnitRange {
    uint64_t lo, hi;
    uint32_t unit;
  };
  Unit& unit(uint32_t i);
  const std::string& name_of(uint64_t die_offset);
  void find_die_sections(void* elf);
  // Whether a string attribute (a Dwarf_Attribute*) ends inside its section.
  bool string_bounded(const void* attribute) const;

  void* dwarf_ = nullptr;  // Dwarf*
  std::vector<UnitRange> unit_ranges_;  // sorted by lo
  std::vector<std::unique_ptr<Unit>> units_;  // built on first use
  std::vector<uint64_t> unit_offsets_;  // DIE offset of each unit
  size_t damaged_units_ = 0;
  uint64_t memory_bytes_ = 0;
  std::vector<std::pair<const char*, const char*>> die_sections_;  // .debug_info/.debug_types bytes
  std::unordered_map<uint64_t, std::string> names_;  // by DIE offset
};

}  // namespace ember::symbolizer
