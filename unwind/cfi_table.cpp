#include "unwind/cfi_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

namespace ember::unwind {
namespace {

// DWARF register numbers on x86_64 (System V psABI, figure 3.36).
constexpr int kRbp = 6, kRsp = 7, kReturnAddress = 16;
// Gaps between two functions' CFI smaller than this are taken for padding.
constexpr uint64_t kPadding = 64;

struct Fde {
  uint64_t start, end;
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

// The FDE pointer encoding a CIE's augmentation gives ('R'), absolute by default.
std::optional<uint8_t> fde_encoding(const Dwarf_CIE& cie) {
  const char* aug = cie.augmentation;
  if (!aug || aug[0] != 'z') return aug && aug[0] ? std::nullopt : std::optional<uint8_t>(DW_EH_PE_absptr);
  const uint8_t* p = cie.augmentation_data;
  const uint8_t* end = p + cie.augmentation_data_size;
  for (const char* a = aug + 1; *a; ++a) {
    if (p >= end) return std::nullopt;
    switch (*a) {
      case 'R': return *p;
      case 'L': ++p; break;
      case 'P': {
        uint8_t enc = *p++;
        // The personality routine's address: skipped (its value is not needed).
        if (!read_encoded(enc & ~DW_EH_PE_indirect, p, end, 0)) return std::nullopt;
        break;
      }
      case 'S': case 'B': break;
      default: return std::nullopt;
    }
  }
  return DW_EH_PE_absptr;
}

// Every FDE's address range in a CFI section at `section_address`.
std::vector<Fde> read_fdes(Elf* elf, Elf_Data* data, bool eh_frame, uint64_t section_address) {
  std::vector<Fde> fdes;
  const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr));
  std::unordered_map<Dwarf_Off, std::optional<uint8_t>> encodings;  // CIE offset -> FDE pointer encoding
  auto* base = static_cast<const uint8_t*>(data->d_buf);
  Dwarf_Off offset = 0, next = 0;
  Dwarf_CFI_Entry entry;
  for (; dwarf_next_cfi(ident, data, eh_frame, offset, &next, &entry) == 0; offset = next) {
    if (entry.CIE_id == LIBDW_CIE_ID) {
      encodings[offset] = fde_encoding(entry.cie);
      continue;
    }
    std::optional<uint8_t> enc = DW_EH_PE_absptr;
    if (auto it = encodings.find(entry.fde.CIE_pointer); it != encodings.end()) {
      enc = it->second;
    } else {
      Dwarf_CFI_Entry cie;
      Dwarf_Off unused;
      if (dwarf_next_cfi(ident, data, eh_frame, entry.fde.CIE_pointer, &unused, &cie) != 0 ||
          cie.CIE_id != LIBDW_CIE_ID)
        continue;
      enc = encodings[entry.fde.CIE_pointer] = fde_encoding(cie.cie);
    }
    if (!enc) continue;
    const uint8_t* p = entry.fde.start;
    auto start = read_encoded(*enc, p, entry.fde.end, section_address + (p - base));
    auto length = read_encoded(*enc & 0x0f, p, entry.fde.end, 0);
    if (start && length && *length) fdes.push_back({*start, *start + *length});
  }
  std::sort(fdes.begin(), fdes.end(), [](const Fde& a, const Fde& b) { return a.start < b.start; });
  return fdes;
}

bool is_breg(const Dwarf_Op& op, int reg) {
  return op.atom == DW_OP_breg0 + reg || (op.atom == DW_OP_bregx && op.number == static_cast<Dwarf_Word>(reg));
}
int64_t breg_offset(const Dwarf_Op& op) {
  return static_cast<int64_t>(op.atom == DW_OP_bregx ? op.number2 : op.number);
}

// A PLT entry's CFA (ld's eh_frame for .plt): rsp + 8, + 8 once the entry
// has pushed its index, at byte `threshold` of each 16:
//   breg7 8; breg16 0; lit15; and; litN; ge; lit3; shl; plus
std::optional<uint8_t> plt_threshold(const Dwarf_Op* ops, size_t n) {
  if (n != 9 || !is_breg(ops[0], kRsp) || breg_offset(ops[0]) != 8 || !is_breg(ops[1], kReturnAddress) ||
      breg_offset(ops[1]) != 0 || ops[2].atom != DW_OP_lit15 || ops[3].atom != DW_OP_and ||
      ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit15 || ops[5].atom != DW_OP_ge ||
      ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl || ops[8].atom != DW_OP_plus)
    return std::nullopt;
  return static_cast<uint8_t>(ops[4].atom - DW_OP_lit0);
}

// A register saved at CFA + offset: DW_OP_call_frame_cfa [plus_uconst N].
std::optional<int64_t> saved_at_cfa(const Dwarf_Op* ops, size_t n) {
  if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) return 0;
  if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst)
    return static_cast<int64_t>(ops[1].number);
  return std::nullopt;
}

ember_unwind_row row_of(Dwarf_Frame* frame, bool signal) {
  ember_unwind_row row{};
  row.type = EMBER_ROW_UNSUPPORTED;
  if (signal) {
    row.type = EMBER_ROW_SIGNAL;
    return row;
  }
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  // The return address: where it says the stack ends, or at CFA - 8.
  if (dwarf_frame_register(frame, kReturnAddress, mem, &ops, &n) != 0) return row;
  if (n == 0 && ops == mem) {
    row.type = EMBER_ROW_ROOT;
    return row;
  }
  if (saved_at_cfa(ops, n) != -8) return row;

  if (dwarf_frame_cfa(frame, &ops, &n) != 0 || n == 0) return row;
  if (n == 1 && (is_breg(ops[0], kRsp) || is_breg(ops[0], kRbp))) {
    int64_t offset = breg_offset(ops[0]);
    if (offset < 0 || offset > UINT16_MAX) return row;
    row.cfa = static_cast<uint16_t>(offset);
    row.type = is_breg(ops[0], kRsp) ? EMBER_ROW_CFA_RSP : EMBER_ROW_CFA_RBP;
  } else if (auto threshold = plt_threshold(ops, n)) {
    row.cfa = *threshold;
    row.type = EMBER_ROW_PLT;
  } else {
    return row;
  }

  // rbp: unchanged (same value, or undefined: not needed by this frame), or saved.
  if (dwarf_frame_register(frame, kRbp, mem, &ops, &n) != 0) {
    row.type = EMBER_ROW_UNSUPPORTED;
    return row;
  }
  if (n > 0) {
    auto at = saved_at_cfa(ops, n);
    if (!at || *at % 8 != 0 || *at == 0 || *at / 8 < INT8_MIN || *at / 8 > INT8_MAX) {
      row = {};
      row.type = EMBER_ROW_UNSUPPORTED;
      return row;
    }
    row.rbp = static_cast<int8_t>(*at / 8);
  }
  return row;
}

bool same_rule(const ember_unwind_row& a, const ember_unwind_row& b) {
  return a.type == b.type && a.cfa == b.cfa && a.rbp == b.rbp;
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
  if (ehdr.e_machine != EM_X86_64)
    return std::unexpected(TableError{NoTable::NoCfi, "not an x86_64 binary"});
  CfiTable table;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) == 0)
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        table.segments.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
    }

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
  std::vector<Fde> fdes = read_fdes(elf, data, eh_frame, eh_frame ? shdr.sh_addr : 0);
  if (fdes.empty()) return std::unexpected(TableError{NoTable::NoCfi, "no frame descriptions"});
  table.fdes = fdes.size();

  Dwarf* dwarf = nullptr;
  Dwarf_CFI* cfi = nullptr;
  if (eh_frame) {
    cfi = dwarf_getcfi_elf(elf);
  } else if ((dwarf = dwarf_begin_elf(elf, DWARF_C_READ, nullptr))) {
    cfi = dwarf_getcfi(dwarf);
  }
  auto release = [&] {
    if (eh_frame && cfi) dwarf_cfi_end(cfi);
    if (dwarf) dwarf_end(dwarf);
  };
  if (!cfi) {
    release();
    return std::unexpected(TableError{NoTable::Unreadable, std::string("cannot read CFI: ") + dwarf_errmsg(-1)});
  }

  table.base = fdes.front().start;
  RowWriter writer(table);
  ember_unwind_row none{};
  none.type = EMBER_ROW_NONE;
  uint64_t covered = table.base;  // CFI known below this address
  for (const Fde& fde : fdes) {
    // Between functions lies alignment padding, never run: the rows of
    // the function before may cover it (libjvm: 42k rows fewer).
    if (fde.start >= covered + kPadding && !writer.add(covered, none)) break;
    // One answer per range of addresses with the same rules: elfutils runs
    // the CFA program up to `at` and says where its row ends.
    for (uint64_t at = std::max(fde.start, covered); at < fde.end;) {
      Dwarf_Frame* frame = nullptr;
      Dwarf_Addr start = 0, end = 0;
      bool signal = false;
      if (dwarf_cfi_addrframe(cfi, at, &frame) != 0 || dwarf_frame_info(frame, &start, &end, &signal) < 0 ||
          end <= at) {
        free(frame);
        ember_unwind_row bad{};
        bad.type = EMBER_ROW_UNSUPPORTED;
        writer.add(at, bad);
        at = fde.end;
        break;
      }
      bool ok = writer.add(at, row_of(frame, signal));
      free(frame);
      if (!ok) break;
      at = std::min<uint64_t>(end, fde.end);
    }
    covered = std::max(covered, fde.end);
  }
  writer.add(covered, none);
  release();
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

}  // namespace ember::unwind
