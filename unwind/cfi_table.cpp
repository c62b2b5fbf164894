#include "unwind/cfi_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

namespace ember::unwind {
namespace {

// The registers the rows are about, by their DWARF numbers (x86_64: the
// System V psABI, figure 3.36; arm64: the Arm ABI's DWARF supplement, 4.1),
// and where a function's return address is before its CFI says anything.
struct Machine {
  uint64_t fp, sp, ra;
  bool ra_in_link;  // in the link register x30 (arm64), not at CFA - 8 (x86_64)
};
constexpr Machine kX86_64{6, 7, 16, false};
constexpr Machine kAarch64{29, 31, 30, true};
// Gaps between two functions' CFI smaller than this are taken for padding.
constexpr uint64_t kPadding = 64;

// What an FDE's program needs from its CIE.
struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = 1;
  const uint8_t *initial = nullptr, *initial_end = nullptr;  // its initial instructions
  uint8_t fde_encoding = DW_EH_PE_absptr;
  bool augmented = false;  // 'z': each FDE's augmentation data precedes its program
  bool signal = false;     // 'S': a signal frame (the kernel's return trampoline)
  bool readable = true;    // its augmentation understood (else its FDEs are skipped)
  bool usable = true;      // the return address in the machine's column
};

struct Fde {
  uint64_t start, end;
  const Cie* cie;
  const uint8_t *program, *program_end;
};

// A pointer encoded as DW_EH_PE_* `encoding` at `p` (section address
// `address`): advances `p`. Only what x86_64 toolchains emit: absolute
// or pc-relative, 2, 4 or 8 bytes.
std::optional<uint64_t> read_encoded(uint8_t encoding, const uint8_t*& p, const uint8_t* end, uint64_t address,
                                     bool relative_allowed = true) {
  if (encoding == DW_EH_PE_omit) return std::nullopt;
  uint64_t value = 0;
  size_t size;
  switch (encoding & 0x0f) {
    case DW_EH_PE_absptr: case DW_EH_PE_udata8: case DW_EH_PE_sdata8: size = 8; break;
    case DW_EH_PE_udata4: case DW_EH_PE_sdata4: size = 4; break;
    case DW_EH_PE_udata2: case DW_EH_PE_sdata2: size = 2; break;
    default: return std::nullopt;
  }
  if (end - p < static_cast<ptrdiff_t>(size)) return std::nullopt;
  if (size == 8) {
    std::memcpy(&value, p, 8);
  } else if (size == 4) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    value = (encoding & 0x0f) == DW_EH_PE_sdata4 ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v))) : v;
  } else {
    uint16_t v;
    std::memcpy(&v, p, 2);
    value = (encoding & 0x0f) == DW_EH_PE_sdata2 ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(v))) : v;
  }
  p += size;
  switch (encoding & 0x70) {
    case DW_EH_PE_absptr: return value;
    case DW_EH_PE_pcrel:
      if (!relative_allowed) return std::nullopt;
      return value + address;
    default: return std::nullopt;
  }
}

// An unsigned value of T's size at `p`, advancing `p`.
template <typename T>
std::optional<T> read_fixed(const uint8_t*& p, const uint8_t* end) {
  T value;
  if (end - p < static_cast<ptrdiff_t>(sizeof value)) return std::nullopt;
  std::memcpy(&value, p, sizeof value);
  p += sizeof value;
  return value;
}

std::optional<uint64_t> read_uleb(const uint8_t*& p, const uint8_t* end) {
  uint64_t value = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    uint8_t b = *p++;
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return value;
  }
  return std::nullopt;
}

std::optional<int64_t> read_sleb(const uint8_t*& p, const uint8_t* end) {
  uint64_t value = 0;
  for (int shift = 0; p < end && shift < 64;) {
    uint8_t b = *p++;
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    shift += 7;
    if (!(b & 0x80)) {
      if (shift < 64 && (b & 0x40)) value |= ~uint64_t{0} << shift;
      return static_cast<int64_t>(value);
    }
  }
  return std::nullopt;
}

// A CIE's augmentation ("zRS", "zPLR", ...) and what its FDEs need of it.
Cie read_cie(const Dwarf_CIE& entry, const Machine& machine) {
  Cie cie;
  cie.code_align = entry.code_alignment_factor;
  cie.data_align = entry.data_alignment_factor;
  cie.initial = entry.initial_instructions;
  cie.initial_end = entry.initial_instructions_end;
  cie.usable = entry.return_address_register == machine.ra;
  const char* aug = entry.augmentation;
  if (!aug || !aug[0]) return cie;
  if (aug[0] != 'z') {
    cie.readable = false;
    return cie;
  }
  cie.augmented = true;
  const uint8_t* p = entry.augmentation_data;
  const uint8_t* end = p + entry.augmentation_data_size;
  for (const char* a = aug + 1; *a && cie.readable; ++a) {
    switch (*a) {
      case 'R':
        if (p >= end) cie.readable = false; else cie.fde_encoding = *p++;
        break;
      case 'L':
        if (p >= end) cie.readable = false; else ++p;
        break;
      case 'P': {
        // The personality routine's address: skipped (its value is not needed).
        if (p >= end) cie.readable = false;
        else if (uint8_t enc = *p++; !read_encoded(enc & ~DW_EH_PE_indirect, p, end, 0)) cie.readable = false;
        break;
      }
      case 'S': cie.signal = true; break;
      case 'B': break;
      default: cie.readable = false;
    }
  }
  return cie;
}

// Every FDE in a CFI section at `section_address`, sorted by address, with
// its CIE (kept in `cies`, by offset).
std::vector<Fde> read_fdes(Elf* elf, Elf_Data* data, bool eh_frame, uint64_t section_address, const Machine& machine,
                           std::unordered_map<Dwarf_Off, Cie>& cies) {
  std::vector<Fde> fdes;
  const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr));
  auto* base = static_cast<const uint8_t*>(data->d_buf);
  auto cie_at = [&](Dwarf_Off offset) -> const Cie* {
    if (auto it = cies.find(offset); it != cies.end()) return &it->second;
    Dwarf_CFI_Entry entry;
    Dwarf_Off unused;
    if (dwarf_next_cfi(ident, data, eh_frame, offset, &unused, &entry) != 0 || entry.CIE_id != LIBDW_CIE_ID)
      return nullptr;
    return &cies.emplace(offset, read_cie(entry.cie, machine)).first->second;
  };
  Dwarf_Off offset = 0, next = 0;
  Dwarf_CFI_Entry entry;
  for (; dwarf_next_cfi(ident, data, eh_frame, offset, &next, &entry) == 0; offset = next) {
    if (entry.CIE_id == LIBDW_CIE_ID) continue;
    const Cie* cie = cie_at(entry.fde.CIE_pointer);
    if (!cie || !cie->readable) continue;
    const uint8_t* p = entry.fde.start;
    auto start = read_encoded(cie->fde_encoding, p, entry.fde.end, section_address + (p - base));
    auto length = read_encoded(cie->fde_encoding & 0x0f, p, entry.fde.end, 0);
    if (!start || !length || !*length) continue;
    if (cie->augmented) {
      auto skip = read_uleb(p, entry.fde.end);
      p = skip && *skip <= static_cast<uint64_t>(entry.fde.end - p) ? p + *skip : entry.fde.end;
    }
    fdes.push_back({*start, *start + *length, cie, p, entry.fde.end});
  }
  std::sort(fdes.begin(), fdes.end(), [](const Fde& a, const Fde& b) { return a.start < b.start; });
  return fdes;
}

// How a register is recovered, as far as the rows can say: unchanged
// (same value, or undefined: the return address's means the outermost
// frame), saved at CFA + offset, or a rule the rows cannot express.
struct Rule {
  enum Kind : uint8_t { Same, Undefined, AtCfa, Other } kind = Same;
  int64_t offset = 0;
};

// The rules in effect at an address. The CFA: register + offset, a PLT
// entry's expression, or another expression. Before any instruction, the
// ABI's: at a call's target the CFA is the stack pointer as the call left
// it, the return address on top of it (x86_64) or in the link register.
struct Rules {
  explicit Rules(const Machine& m)
      : machine(&m), cfa_register(m.sp), cfa_offset(m.ra_in_link ? 0 : 8),
        ra(m.ra_in_link ? Rule{Rule::Same, 0} : Rule{Rule::AtCfa, -8}) {}

  const Machine* machine;
  enum CfaKind : uint8_t { Register, Plt, Expression } cfa_kind = Register;
  uint64_t cfa_register;
  int64_t cfa_offset;
  uint8_t plt_threshold = 0;
  Rule fp, ra;

  Rule* rule(uint64_t reg) { return reg == machine->fp ? &fp : reg == machine->ra ? &ra : nullptr; }
  const Rule* rule(uint64_t reg) const { return const_cast<Rules*>(this)->rule(reg); }
};

// A PLT entry's CFA (ld's eh_frame for .plt): rsp + 8, + 8 once the entry
// has pushed its index, at byte `threshold` of each 16:
//   breg7 8; breg16 0; lit15; and; litN; ge; lit3; shl; plus
std::optional<uint8_t> plt_threshold(const uint8_t* p, const uint8_t* end) {
  static const uint8_t head[] = {DW_OP_breg7, 8, DW_OP_breg16, 0, DW_OP_lit15, DW_OP_and};
  static const uint8_t tail[] = {DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus};
  if (end - p != sizeof head + 1 + sizeof tail || std::memcmp(p, head, sizeof head) != 0 ||
      std::memcmp(p + sizeof head + 1, tail, sizeof tail) != 0)
    return std::nullopt;
  uint8_t lit = p[sizeof head];
  if (lit < DW_OP_lit0 || lit > DW_OP_lit15) return std::nullopt;
  return static_cast<uint8_t>(lit - DW_OP_lit0);
}

// An offset in words, if a row can hold it.
std::optional<int8_t> words_of(int64_t offset) {
  if (offset % 8 != 0 || offset / 8 < INT8_MIN || offset / 8 > INT8_MAX) return std::nullopt;
  return static_cast<int8_t>(offset / 8);
}

// A saved register's offset from the CFA in words (never 0: that is the
// caller's sp), if a row can hold it.
std::optional<int8_t> slot_of(int64_t offset) { return offset ? words_of(offset) : std::nullopt; }

ember_unwind_row row_of(const Rules& rules, bool signal) {
  ember_unwind_row row{};
  row.type = EMBER_ROW_UNSUPPORTED;
  if (signal) {
    row.type = EMBER_ROW_SIGNAL;
    return row;
  }
  // A return address undefined: the stack ends here.
  if (rules.ra.kind == Rule::Undefined) {
    row.type = EMBER_ROW_ROOT;
    return row;
  }
  const Machine& m = *rules.machine;
  uint8_t type;
  uint16_t cfa;
  if (rules.cfa_kind == Rules::Register && (rules.cfa_register == m.sp || rules.cfa_register == m.fp)) {
    if (rules.cfa_offset < 0 || rules.cfa_offset > UINT16_MAX) return row;
    cfa = static_cast<uint16_t>(rules.cfa_offset);
    type = rules.cfa_register == m.sp ? EMBER_ROW_CFA_SP : EMBER_ROW_CFA_FP;
  } else if (rules.cfa_kind == Rules::Plt) {
    cfa = rules.plt_threshold;
    type = EMBER_ROW_PLT;
  } else {
    return row;
  }

  // The frame pointer: unchanged (same value, or undefined: not needed by
  // this frame), or saved.
  if (rules.fp.kind == Rule::Other) return row;
  const bool fp_saved = rules.fp.kind == Rule::AtCfa;
  const int64_t fp_at = rules.fp.offset;
  std::optional<int8_t> slot = fp_saved ? slot_of(fp_at) : 0;
  uint8_t ra;
  if (rules.ra.kind == Rule::AtCfa && fp_saved && rules.ra.offset == fp_at + 8) {
    ra = EMBER_RA_RECORD;
    // A frame of over 1 KiB: its record at its bottom, where the CFA's
    // register points.
    if (!slot && (slot = words_of(fp_at + static_cast<int64_t>(cfa)))) ra = EMBER_RA_RECORD_LOW;
  } else if (rules.ra.kind == Rule::AtCfa && rules.ra.offset == -8) {
    ra = EMBER_RA_CFA;
  } else if (rules.ra.kind == Rule::AtCfa && !fp_saved) {
    ra = EMBER_RA_SAVED;
    slot = slot_of(rules.ra.offset);
  } else if (rules.ra.kind == Rule::Same && m.ra_in_link) {
    ra = EMBER_RA_LINK;
  } else {
    return row;
  }
  if (!slot) return row;
  row.type = type;
  row.cfa = cfa;
  row.ra = ra;
  row.fp = *slot;
  return row;
}

// Runs a CFA program (DWARF 5 § 6.4.2, with GNU's extensions) from
// `rules`. In an FDE (`initial`: the rules its CIE's program left), each
// advance of the location calls `rows(from, to, rules)` for the range the
// rules held over; `loc` ends where the last rules start. False: an
// instruction the table does not know, or a malformed program. Long: one
// case per instruction of the standard's table, in its order.
template <typename Rows>
bool run_program(const Cie& cie, const uint8_t* p, const uint8_t* end, Rules& rules, const Rules* initial,
                 uint64_t& loc, Rows&& rows) {
  std::vector<Rules> remembered;
  auto advance = [&](uint64_t delta) {
    if (!initial) return false;  // a CIE's program does not advance
    uint64_t to = loc + delta * cie.code_align;
    rows(loc, to, rules);
    loc = to;
    return true;
  };
  auto set = [&](std::optional<uint64_t> reg, Rule rule) {
    if (!reg) return false;
    if (Rule* r = rules.rule(*reg)) *r = rule;
    return true;
  };
  auto at_cfa = [&](std::optional<int64_t> factored) {
    return factored ? Rule{Rule::AtCfa, *factored * cie.data_align} : Rule{Rule::Other, 0};
  };
  auto uleb_as_sleb = [](std::optional<uint64_t> v) {
    return v ? std::optional<int64_t>(static_cast<int64_t>(*v)) : std::nullopt;
  };
  auto skip_block = [&]() {
    auto size = read_uleb(p, end);
    if (!size || *size > static_cast<uint64_t>(end - p)) return false;
    p += *size;
    return true;
  };
  while (p < end) {
    uint8_t op = *p++;
    uint8_t low = op & 0x3f;
    switch (op & 0xc0) {
      case DW_CFA_advance_loc:
        if (!advance(low)) return false;
        continue;
      case DW_CFA_offset: {
        auto offset = read_uleb(p, end);
        if (!offset) return false;
        set(low, at_cfa(uleb_as_sleb(offset)));
        continue;
      }
      case DW_CFA_restore:
        if (!initial) return false;
        if (Rule* r = rules.rule(low)) *r = *initial->rule(low);
        continue;
    }
    switch (op) {
      case DW_CFA_nop: break;
      case DW_CFA_advance_loc1: {
        auto delta = read_fixed<uint8_t>(p, end);
        if (!delta || !advance(*delta)) return false;
        break;
      }
      case DW_CFA_advance_loc2: {
        auto delta = read_fixed<uint16_t>(p, end);
        if (!delta || !advance(*delta)) return false;
        break;
      }
      case DW_CFA_advance_loc4: {
        auto delta = read_fixed<uint32_t>(p, end);
        if (!delta || !advance(*delta)) return false;
        break;
      }
      case DW_CFA_offset_extended: {
        auto reg = read_uleb(p, end);
        if (!set(reg, at_cfa(uleb_as_sleb(read_uleb(p, end))))) return false;
        break;
      }
      case DW_CFA_offset_extended_sf: {
        auto reg = read_uleb(p, end);
        if (!set(reg, at_cfa(read_sleb(p, end)))) return false;
        break;
      }
      case DW_CFA_GNU_negative_offset_extended: {
        auto reg = read_uleb(p, end);
        auto offset = uleb_as_sleb(read_uleb(p, end));
        if (!set(reg, at_cfa(offset ? std::optional<int64_t>(-*offset) : std::nullopt))) return false;
        break;
      }
      case DW_CFA_restore_extended: {
        auto reg = read_uleb(p, end);
        if (!reg || !initial) return false;
        if (Rule* r = rules.rule(*reg)) *r = *initial->rule(*reg);
        break;
      }
      case DW_CFA_undefined:
        if (!set(read_uleb(p, end), {Rule::Undefined, 0})) return false;
        break;
      case DW_CFA_same_value:
        if (!set(read_uleb(p, end), {Rule::Same, 0})) return false;
        break;
      case DW_CFA_register:
      case DW_CFA_val_offset:
      case DW_CFA_val_offset_sf: {
        auto reg = read_uleb(p, end);
        bool operand = op == DW_CFA_val_offset_sf ? read_sleb(p, end).has_value() : read_uleb(p, end).has_value();
        if (!operand || !set(reg, {Rule::Other, 0})) return false;
        break;
      }
      case DW_CFA_expression:
      case DW_CFA_val_expression: {
        auto reg = read_uleb(p, end);
        if (!skip_block() || !set(reg, {Rule::Other, 0})) return false;
        break;
      }
      case DW_CFA_remember_state:
        remembered.push_back(rules);
        break;
      case DW_CFA_restore_state:
        if (remembered.empty()) return false;
        rules = remembered.back();
        remembered.pop_back();
        break;
      case DW_CFA_def_cfa:
      case DW_CFA_def_cfa_sf: {
        auto reg = read_uleb(p, end);
        auto offset = op == DW_CFA_def_cfa ? uleb_as_sleb(read_uleb(p, end)) : read_sleb(p, end);
        if (!reg || !offset) return false;
        rules.cfa_kind = Rules::Register;
        rules.cfa_register = *reg;
        rules.cfa_offset = op == DW_CFA_def_cfa ? *offset : *offset * cie.data_align;
        break;
      }
      case DW_CFA_def_cfa_register: {
        auto reg = read_uleb(p, end);
        if (!reg || rules.cfa_kind != Rules::Register) return false;
        rules.cfa_register = *reg;
        break;
      }
      case DW_CFA_def_cfa_offset:
      case DW_CFA_def_cfa_offset_sf: {
        auto offset = op == DW_CFA_def_cfa_offset ? uleb_as_sleb(read_uleb(p, end)) : read_sleb(p, end);
        if (!offset || rules.cfa_kind != Rules::Register) return false;
        rules.cfa_offset = op == DW_CFA_def_cfa_offset ? *offset : *offset * cie.data_align;
        break;
      }
      case DW_CFA_def_cfa_expression: {
        const uint8_t* block = p;
        if (!skip_block()) return false;
        read_uleb(block, end);  // the size, read again to reach the expression
        auto threshold = plt_threshold(block, p);
        rules.cfa_kind = threshold ? Rules::Plt : Rules::Expression;
        rules.plt_threshold = threshold.value_or(0);
        break;
      }
      case DW_CFA_GNU_args_size:
        if (!read_uleb(p, end)) return false;
        break;
      case DW_CFA_GNU_window_save:
        // On arm64 DW_CFA_AARCH64_negate_ra_state: the return address is
        // signed from here on, or no longer. The walker strips pointer
        // authentication codes from every return address it reads.
        if (rules.machine != &kAarch64) return false;
        break;
      default:
        return false;  // DW_CFA_set_loc and the rest: not emitted for x86_64 by GCC, clang or ld
    }
  }
  return true;
}

bool same_rule(const ember_unwind_row& a, const ember_unwind_row& b) {
  return a.type == b.type && a.ra == b.ra && a.cfa == b.cfa && a.fp == b.fp;
}

class RowWriter {
 public:
  explicit RowWriter(CfiTable& table) : table_(table) {}
  // The rule `row` holds from address `at` on.
  bool add(uint64_t at, ember_unwind_row row) {
    if (at < table_.base || at - table_.base > UINT32_MAX) return false;
    row.pc = static_cast<uint32_t>(at - table_.base);
    if (!table_.rows.empty() && same_rule(table_.rows.back(), row)) return true;
    if (!table_.rows.empty() && table_.rows.back().pc == row.pc) table_.rows.pop_back();
    if (!table_.rows.empty() && same_rule(table_.rows.back(), row)) return true;
    if (row.type == EMBER_ROW_UNSUPPORTED) ++table_.unsupported;
    table_.rows.push_back(row);
    return true;
  }

 private:
  CfiTable& table_;
};

Elf_Scn* section_named(Elf* elf, const char* name, GElf_Shdr& shdr) {
  size_t strndx;
  if (elf_getshdrstrndx(elf, &strndx) != 0) return nullptr;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    const char* n;
    if (gelf_getshdr(scn, &shdr) && (n = elf_strptr(elf, strndx, shdr.sh_name)) && std::strcmp(n, name) == 0 &&
        shdr.sh_type != SHT_NOBITS)
      return scn;
  }
  return nullptr;
}

// arm64's PLT, which ld gives no CFI: its entries jump on without a frame
// (adrp x16; ldr x17; add x16; br x17), the return address in x30; the
// first, the lazy binder's, pushes x16 and x30 first (stp x16, x30,
// [sp, #-16]!, after a bti c where branch protection is on), 32 bytes in
// all. Described by a CFA program of our own, `program` (with `cie`,
// living as long as `fdes`), added to `fdes` in address order.
void add_plt(Elf* elf, std::vector<Fde>& fdes, Cie& cie, std::array<uint8_t, 6>& program) {
  constexpr uint32_t kPushPair = 0xa9bf7bf0, kHeader = 32;
  GElf_Shdr shdr;
  Elf_Scn* scn = section_named(elf, ".plt", shdr);
  Elf_Data* data = scn ? elf_getdata(scn, nullptr) : nullptr;
  if (!data || data->d_size < kHeader || shdr.sh_size < kHeader) return;
  auto covers = [&](const Fde& f) { return f.start < shdr.sh_addr + shdr.sh_size && f.end > shdr.sh_addr; };
  if (std::any_of(fdes.begin(), fdes.end(), covers)) return;
  uint32_t words[2];
  std::memcpy(words, data->d_buf, sizeof words);
  int push = words[0] == kPushPair ? 0 : words[1] == kPushPair ? 1 : -1;
  cie.code_align = 4;
  cie.data_align = -8;
  if (push >= 0)
    program = {static_cast<uint8_t>(DW_CFA_advance_loc | (push + 1)), DW_CFA_def_cfa_offset, 16,
               static_cast<uint8_t>(DW_CFA_advance_loc | (kHeader / 4 - push - 1)), DW_CFA_def_cfa_offset, 0};
  Fde plt{shdr.sh_addr, shdr.sh_addr + shdr.sh_size, &cie, program.data(), program.data() + (push >= 0 ? program.size() : 0)};
  fdes.insert(std::upper_bound(fdes.begin(), fdes.end(), plt, [](const Fde& a, const Fde& b) { return a.start < b.start; }), plt);
}

std::vector<CfiTable::Segment> loadable_segments(Elf* elf) {
  std::vector<CfiTable::Segment> segments;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) == 0)
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        segments.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
    }
  return segments;
}

// The address of dynamic symbol `name`, if there is one.
std::optional<uint64_t> dynamic_symbol(Elf* elf, const char* name) {
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr shdr;
    Elf_Data* data;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNSYM || !shdr.sh_entsize || !(data = elf_getdata(scn, nullptr)))
      continue;
    for (size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; ++i) {
      GElf_Sym sym;
      const char* n;
      if (gelf_getsym(data, static_cast<int>(i), &sym) && (n = elf_strptr(elf, shdr.sh_link, sym.st_name)) &&
          std::strcmp(n, name) == 0)
        return sym.st_value;
    }
  }
  return std::nullopt;
}

// An arm64 vDSO built without CFI (Linux 6.1's, as Debian 12 ships it):
// its functions are leaves that build no frame, the return address in x30
// throughout; the signal return trampoline, __kernel_rt_sigreturn, and the
// nop before it (where a return address to it is looked up) have the
// interrupted registers in the signal frame at sp.
std::expected<CfiTable, TableError> arm64_vdso_table(Elf* elf) {
  GElf_Shdr text;
  auto sigreturn = dynamic_symbol(elf, "__kernel_rt_sigreturn");
  if (!section_named(elf, ".text", text) || !sigreturn || *sigreturn < text.sh_addr + 4 ||
      *sigreturn + 8 > text.sh_addr + text.sh_size)
    return std::unexpected(TableError{NoTable::NoCfi, "no .eh_frame or .debug_frame"});
  CfiTable table;
  table.segments = loadable_segments(elf);
  table.base = text.sh_addr;
  ember_unwind_row leaf{}, signal{}, none{};
  leaf.type = EMBER_ROW_CFA_SP;
  leaf.ra = EMBER_RA_LINK;
  signal.type = EMBER_ROW_SIGNAL;
  none.type = EMBER_ROW_NONE;
  RowWriter writer(table);
  writer.add(text.sh_addr, leaf);
  writer.add(*sigreturn - 4, signal);
  writer.add(*sigreturn + 8, leaf);
  writer.add(text.sh_addr + text.sh_size, none);
  return table;
}

}  // namespace

std::optional<uint64_t> CfiTable::address_of_offset(uint64_t offset) const {
  for (const Segment& s : segments)
    if (offset >= s.offset && offset < s.offset + s.size) return s.vaddr + (offset - s.offset);
  return std::nullopt;
}

std::expected<CfiTable, TableError> build_cfi_table(Elf* elf) {
  GElf_Ehdr ehdr;
  if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
    return std::unexpected(TableError{NoTable::Unreadable, "not an ELF file"});
  const Machine* machine = ehdr.e_machine == EM_X86_64 ? &kX86_64 : ehdr.e_machine == EM_AARCH64 ? &kAarch64 : nullptr;
  if (!machine) return std::unexpected(TableError{NoTable::NoCfi, "not an x86_64 or arm64 binary"});
  CfiTable table;
  table.segments = loadable_segments(elf);

  // .eh_frame is what the C++ runtime itself unwinds with; .debug_frame
  // only where there is none (it may be stripped away).
  GElf_Shdr shdr;
  bool eh_frame = true;
  Elf_Scn* scn = section_named(elf, ".eh_frame", shdr);
  if (!scn) {
    eh_frame = false;
    scn = section_named(elf, ".debug_frame", shdr);
  }
  Elf_Data* data = scn ? elf_getdata(scn, nullptr) : nullptr;
  if (!data || !data->d_size) return std::unexpected(TableError{NoTable::NoCfi, "no .eh_frame or .debug_frame"});
  std::unordered_map<Dwarf_Off, Cie> cies;
  std::vector<Fde> fdes = read_fdes(elf, data, eh_frame, eh_frame ? shdr.sh_addr : 0, *machine, cies);
  if (fdes.empty()) return std::unexpected(TableError{NoTable::NoCfi, "no frame descriptions"});
  table.fdes = fdes.size();
  Cie plt_cie;
  std::array<uint8_t, 6> plt_program;
  if (machine == &kAarch64) add_plt(elf, fdes, plt_cie, plt_program);

  table.base = fdes.front().start;
  RowWriter writer(table);
  ember_unwind_row none{}, unsupported{};
  none.type = EMBER_ROW_NONE;
  unsupported.type = EMBER_ROW_UNSUPPORTED;
  // Each CIE's initial rules, computed once.
  std::unordered_map<const Cie*, std::optional<Rules>> initial_rules;
  uint64_t covered = table.base;  // CFI known below this address
  bool room = true;
  for (const Fde& fde : fdes) {
    // Between functions lies alignment padding, never run: the rows of
    // the function before may cover it (libjvm: 42k rows fewer).
    if (fde.start >= covered + kPadding && !writer.add(covered, none)) break;
    auto [known, fresh] = initial_rules.try_emplace(fde.cie);
    if (fresh && fde.cie->usable) {
      Rules rules(*machine);
      uint64_t unused = 0;
      if (run_program(*fde.cie, fde.cie->initial, fde.cie->initial_end, rules, nullptr, unused, [](auto...) {}))
        known->second = rules;
    }
    // One row per range of addresses with the same rules; an FDE that
    // overlaps the one before gives rows from where that one ends.
    uint64_t from = std::max(fde.start, covered);
    auto rows = [&](uint64_t start, uint64_t end, const Rules& rules) {
      end = std::min(end, fde.end);
      if (end > from && start < end && room) room = writer.add(std::max(start, from), row_of(rules, fde.cie->signal));
    };
    if (!known->second) {
      room = writer.add(from, unsupported);
    } else {
      Rules rules = *known->second;
      uint64_t loc = fde.start;
      if (run_program(*fde.cie, fde.program, fde.program_end, rules, &*known->second, loc, rows))
        rows(loc, fde.end, rules);
      else if (loc < fde.end && room)
        room = writer.add(std::max(loc, from), unsupported);
    }
    if (!room) break;
    covered = std::max(covered, fde.end);
  }
  writer.add(covered, none);
  if (covered - table.base > UINT32_MAX)
    return std::unexpected(TableError{NoTable::TooLarge, "code spans more than 4 GiB"});
  return table;
}

std::expected<CfiTable, TableError> build_cfi_table(int fd) {
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, int (*)(Elf*)> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr), elf_end);
  return build_cfi_table(elf.get());
}

std::expected<CfiTable, TableError> build_cfi_table(std::string_view image) {
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, int (*)(Elf*)> elf(elf_memory(const_cast<char*>(image.data()), image.size()), elf_end);
  return build_cfi_table(elf.get());
}

std::expected<CfiTable, TableError> build_vdso_table(std::string_view image) {
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, int (*)(Elf*)> elf(elf_memory(const_cast<char*>(image.data()), image.size()), elf_end);
  auto table = build_cfi_table(elf.get());
  GElf_Ehdr ehdr;
  if (!table && table.error().reason == NoTable::NoCfi && gelf_getehdr(elf.get(), &ehdr) && ehdr.e_machine == EM_AARCH64)
    return arm64_vdso_table(elf.get());
  return table;
}

}  // namespace ember::unwind
