#include "symbolizer/dwarf_index.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <string_view>
#include <unordered_map>

namespace ember::symbolizer {

// One compile unit's functions and inlined calls. Each has one entry per
// address range; ranges nest (an inlined call lies inside its caller), and
// `parent` points to the innermost entry that contains an entry.
struct DwarfIndex::Unit {
  struct Node {
    uint64_t die;  // DIE offset: subprogram or inlined_subroutine
    uint32_t call_file = 0, call_line = 0;  // where an inlined call was made
    bool inlined = false;
  };
  struct Entry {
    uint64_t lo, hi;
    int32_t parent;  // entry index, -1 at the top
    uint32_t node;
  };
  Dwarf_Die cu_die;
  bool lines_safe = false;  // its line table may be read (see DwarfIndex::string_bounded)
  bool lines_read = false;  // its line table was parsed (or failed to)
  std::vector<Node> nodes;
  std::vector<Entry> entries;  // sorted by lo, then outer before inner
};

namespace {

// Malformed DWARF can nest without end; real code stays far below this.
constexpr int kMaxDepth = 256;

// What libdw holds per row of a line table (struct Dwarf_Line_s, elfutils
// 0.188), and an unordered_map node beside its value.
constexpr uint64_t kLineBytes = 56;
constexpr uint64_t kNodeBytes = 32;

bool has_code_inside(int tag) {
  switch (tag) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_lexical_block:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    // Member functions of local classes (lambdas' operator()) are defined
    // inside their class, itself inside the enclosing function.
    case DW_TAG_class_type:
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
      return true;
    default:
      return false;
  }
}

// libdw (0.188) trusts DWARF strings to end: it hands out, and strlen()s,
// pointers into .debug_str and .debug_line_str, and DW_FORM_string values
// inside .debug_info, without a bound. A corrupt file whose strings do not
// end makes it, and us, read past the section data (heap overflows found by
// tests/fuzz/fuzz_elf.cpp: a .debug_line_str that lost SHF_COMPRESSED, read
// by dwarf_getsrclines; a .debug_str the same way, read by name_of).
bool is_string_section(std::string_view name) {
  bool dwarf = name.starts_with(".debug_") || name.starts_with(".zdebug_") || name.starts_with(".gnu.debuglto_.debug_");
  return dwarf && (name.ends_with("_str") || name.ends_with("_str.dwo"));
}

// String tables always end in NUL: whether those of `elf` do, as libdw holds
// them (decompressed). Call after dwarf_begin_elf, which read them.
bool string_sections_terminated(Elf* elf) {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    // Still compressed: libdw could not inflate it and does not use it.
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED)) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || !is_string_section(name)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data && data->d_buf && data->d_size && static_cast<const char*>(data->d_buf)[data->d_size - 1] != '\0')
      return false;
  }
  return true;
}

// .debug_info or .debug_types, maybe compressed (.zdebug_), maybe split (.dwo).
bool is_die_section(std::string_view name) {
  if (name.ends_with(".dwo")) name.remove_suffix(4);
  if (!name.starts_with(".debug_") && !name.starts_with(".zdebug_")) return false;
  name.remove_prefix(name.find('_') + 1);
  return name == "info" || name == "types";
}

uint32_t udata(Dwarf_Die* die, unsigned name) {
  Dwarf_Attribute attr;
  Dwarf_Word v = 0;
  if (!dwarf_attr(die, name, &attr) || dwarf_formudata(&attr, &v) != 0) return 0;
  return static_cast<uint32_t>(v);
}

struct Builder {
  DwarfIndex::Unit* unit;  // only its nodes and entries
  bool damaged = false;    // libdw could not read some DIEs
  std::vector<int> depth;  // per entry
  std::vector<std::pair<uint32_t, uint32_t>> node_entries;  // per node: its entries [first, last)

  // Adds the functions under `die`; `parent` is the node they are inside (-1: none).
  void walk(Dwarf_Die* die, int32_t parent, int level);
};

}  // namespace

void Builder::walk(Dwarf_Die* die, int32_t parent, int level) {
  if (level > kMaxDepth) return;
  Dwarf_Die child;
  int r = dwarf_child(die, &child);
  damaged |= r < 0;
  if (r != 0) return;
  do {
    int tag = dwarf_tag(&child);
    damaged |= tag == DW_TAG_invalid;  // an abbreviation code libdw cannot resolve
    if (!has_code_inside(tag)) continue;
    int32_t inside = parent;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
      uint32_t node = static_cast<uint32_t>(unit->nodes.size());
      size_t first = unit->entries.size();
      Dwarf_Addr base, lo, hi;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
        if (lo >= hi) continue;
        // The parent's range that holds this one (an inline lies in one of them).
        int32_t holder = -1;
        if (parent >= 0)
          for (uint32_t e = node_entries[parent].first; e < node_entries[parent].second; ++e)
            if (unit->entries[e].lo <= lo && lo < unit->entries[e].hi) holder = static_cast<int32_t>(e);
        unit->entries.push_back({lo, hi, holder, node});
        depth.push_back(holder < 0 ? 0 : depth[holder] + 1);
      }
      if (unit->entries.size() == first) continue;  // a declaration or abstract instance: no code
      DwarfIndex::Unit::Node n{dwarf_dieoffset(&child)};
      if (tag == DW_TAG_inlined_subroutine) {
        n.inlined = true;
        n.call_file = udata(&child, DW_AT_call_file);
        n.call_line = udata(&child, DW_AT_call_line);
      }
      unit->nodes.push_back(n);
      node_entries.emplace_back(static_cast<uint32_t>(first), static_cast<uint32_t>(unit->entries.size()));
      inside = static_cast<int32_t>(node);
    }
    walk(&child, inside, level + 1);
  } while ((r = dwarf_siblingof(&child, &child)) == 0);
  damaged |= r < 0;
}

// Where DW_FORM_string values may lie: inline among a DIE's attributes, so
// the section's last byte need not be NUL (an assembler's unit ends in its
// DW_AT_language). Values elsewhere (a .dwo, a supplementary file) are
// outside what we check and taken as they come.
void DwarfIndex::find_die_sections(void* handle) {
  Elf* elf = static_cast<Elf*>(handle);
  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || !is_die_section(name)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data && data->d_buf)
      die_sections_.emplace_back(static_cast<const char*>(data->d_buf), static_cast<const char*>(data->d_buf) + data->d_size);
  }
}

bool DwarfIndex::string_bounded(const void* attribute) const {
  auto& attr = *static_cast<const Dwarf_Attribute*>(attribute);
  if (attr.form != DW_FORM_string) return true;  // strp/strx/line_strp: checked when opened
  auto at = reinterpret_cast<const char*>(attr.valp);
  for (auto [begin, end] : die_sections_)
    if (std::less_equal<>()(begin, at) && std::less<>()(at, end)) return std::memchr(at, 0, end - at) != nullptr;
  return true;
}

std::unique_ptr<DwarfIndex> DwarfIndex::open(void* elf) {
  Dwarf* dw = dwarf_begin_elf(static_cast<Elf*>(elf), DWARF_C_READ, nullptr);
  if (!dw) return nullptr;
  std::unique_ptr<DwarfIndex> index(new DwarfIndex());
  index->dwarf_ = dw;
  if (!string_sections_terminated(static_cast<Elf*>(elf))) return nullptr;
  index->find_die_sections(elf);
  Dwarf_CU* cu = nullptr;
  Dwarf_Half version;
  uint8_t unit_type;
  Dwarf_Die cu_die;
  // Own table of unit ranges: clang emits no .debug_aranges by default.
  while (dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cu_die, nullptr) == 0) {
    if (unit_type != DW_UT_compile && unit_type != DW_UT_skeleton) continue;
    uint32_t i = static_cast<uint32_t>(index->unit_offsets_.size());
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    bool any = false;
    while ((off = dwarf_ranges(&cu_die, off, &base, &lo, &hi)) > 0)
      if (lo < hi) {
        index->unit_ranges_.push_back({lo, hi, i});
        any = true;
      }
    if (any) index->unit_offsets_.push_back(dwarf_dieoffset(&cu_die));
  }
  if (index->unit_ranges_.empty()) return nullptr;
  index->units_.resize(index->unit_offsets_.size());
  index->memory_bytes_ = sizeof(DwarfIndex) + index->unit_ranges_.capacity() * sizeof(UnitRange) +
                         index->units_.capacity() * sizeof(index->units_[0]) +
                         index->unit_offsets_.capacity() * sizeof(uint64_t) +
                         index->die_sections_.capacity() * sizeof(index->die_sections_[0]);
  std::sort(index->unit_ranges_.begin(), index->unit_ranges_.end(),
            [](const UnitRange& a, const UnitRange& b) { return a.lo < b.lo; });
  return index;
}

DwarfIndex::~DwarfIndex() {
  if (dwarf_) dwarf_end(static_cast<Dwarf*>(dwarf_));
}

DwarfIndex::Unit& DwarfIndex::unit(uint32_t i) {
  if (units_[i]) return *units_[i];
  auto u = std::make_unique<Unit>();
  Dwarf_Die* cu = dwarf_offdie(static_cast<Dwarf*>(dwarf_), unit_offsets_[i], &u->cu_die);
  if (cu) {
    // dwarf_getsrclines strlen()s the unit's name and directory.
    Dwarf_Attribute attr;
    u->lines_safe = true;
    for (unsigned name : {DW_AT_comp_dir, DW_AT_name})
      if (dwarf_attr(&u->cu_die, name, &attr) && !string_bounded(&attr)) u->lines_safe = false;
    Builder builder{u.get(), false, {}, {}};
    builder.walk(&u->cu_die, -1, 0);
    damaged_units_ += builder.damaged;
    // Sort by start, outer before inner, and renumber the parent links.
    auto& entries = u->entries;
    std::vector<uint32_t> order(entries.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return entries[a].lo != entries[b].lo ? entries[a].lo < entries[b].lo : builder.depth[a] < builder.depth[b];
    });
    std::vector<int32_t> new_index(entries.size());
    for (uint32_t k = 0; k < order.size(); ++k) new_index[order[k]] = static_cast<int32_t>(k);
    std::vector<Unit::Entry> sorted;
    sorted.reserve(entries.size());
    for (uint32_t old : order) {
      Unit::Entry e = entries[old];
      if (e.parent >= 0) e.parent = new_index[e.parent];
      sorted.push_back(e);
    }
    entries = std::move(sorted);
    memory_bytes_ += sizeof(Unit) + u->nodes.capacity() * sizeof(Unit::Node) + entries.capacity() * sizeof(Unit::Entry);
  }
  units_[i] = std::move(u);
  return *units_[i];
}

const std::string& DwarfIndex::name_of(uint64_t die_offset) {
  auto [it, fresh] = names_.try_emplace(die_offset);
  if (fresh) memory_bytes_ += kNodeBytes + sizeof *it;
  Dwarf_Die die;
  if (!fresh || !dwarf_offdie(static_cast<Dwarf*>(dwarf_), die_offset, &die)) return it->second;
  Dwarf_Attribute attr;
  // Integrate: an inlined call or an out-of-line copy names itself through
  // DW_AT_abstract_origin / DW_AT_specification.
  for (unsigned name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name, DW_AT_name})
    if (dwarf_attr_integrate(&die, name, &attr) && string_bounded(&attr))
      if (const char* s = dwarf_formstring(&attr); s && *s) {
        it->second = s;
        if (it->second.capacity() > 15) memory_bytes_ += it->second.capacity() + 1;
        break;
      }
  return it->second;
}

std::vector<SourceFrame> DwarfIndex::lookup(uint64_t vaddr, bool lines) {
  std::vector<SourceFrame> frames;
  auto ur = std::upper_bound(unit_ranges_.begin(), unit_ranges_.end(), vaddr,
                             [](uint64_t a, const UnitRange& r) { return a < r.lo; });
  if (ur == unit_ranges_.begin() || vaddr >= std::prev(ur)->hi) return frames;
  Unit& u = unit(std::prev(ur)->unit);
  auto it = std::upper_bound(u.entries.begin(), u.entries.end(), vaddr,
                             [](uint64_t a, const Unit::Entry& e) { return a < e.lo; });
  // The last range starting at or before vaddr lies inside the innermost one
  // holding vaddr (ranges nest), or is it: climb until one holds vaddr.
  int32_t e = static_cast<int32_t>(it - u.entries.begin()) - 1;
  for (int steps = 0; e >= 0 && vaddr >= u.entries[e].hi && steps < kMaxDepth; ++steps) e = u.entries[e].parent;
  if (e < 0 || vaddr >= u.entries[e].hi) return frames;

  if (lines && u.lines_safe && !u.lines_read) {
    // A line table libdw cannot parse is damage worth a warning, once.
    Dwarf_Lines* table;
    size_t count;
    u.lines_read = true;
    if (dwarf_getsrclines(&u.cu_die, &table, &count) != 0) {
      u.lines_safe = false;
      ++damaged_units_;
    } else {
      memory_bytes_ += count * kLineBytes;
    }
  }
  lines = lines && u.lines_safe;
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (lines && dwarf_getsrcfiles(&u.cu_die, &files, &nfiles) != 0) files = nullptr;
  uint32_t call_file = 0, call_line = 0;  // of the frame inside the current one
  for (int steps = 0; e >= 0 && steps < kMaxDepth; ++steps, e = u.entries[e].parent) {
    const Unit::Node& node = u.nodes[u.entries[e].node];
    SourceFrame f{name_of(node.die), {}, 0, node.inlined};
    if (lines) {
      if (frames.empty()) {
        if (Dwarf_Line* line = dwarf_getsrc_die(&u.cu_die, vaddr)) {
          int n = 0;
          dwarf_lineno(line, &n);
          f.line = static_cast<uint32_t>(n);
          if (const char* src = dwarf_linesrc(line, nullptr, nullptr)) f.file = src;
        }
      } else {
        f.line = call_line;
        if (files && call_file < nfiles)
          if (const char* src = dwarf_filesrc(files, call_file, nullptr, nullptr)) f.file = src;
      }
      call_file = node.call_file;
      call_line = node.call_line;
    }
    frames.push_back(std::move(f));
  }
  std::reverse(frames.begin(), frames.end());
  return frames;
}

}  // namespace ember::symbolizer
