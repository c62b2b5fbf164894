#include "symbolizer/elf_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace ember::symbolizer {
namespace {

uint8_t binding_rank(unsigned char binding) {
  switch (binding) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

// The GNU build-id note's bytes as lowercase hex, or empty.
std::string build_id_of(Elf* elf) {
  std::string id;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && id.empty(); scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    GElf_Nhdr nh;
    size_t off = 0, name_off, desc_off;
    while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          std::string_view(static_cast<const char*>(data->d_buf) + name_off, 3) == "GNU") {
        static const char digits[] = "0123456789abcdef";
        auto desc = static_cast<const unsigned char*>(data->d_buf) + desc_off;
        for (size_t i = 0; i < nh.n_descsz; ++i) {
          id += digits[desc[i] >> 4];
          id += digits[desc[i] & 15];
        }
      }
    }
  }
  return id;
}

// Sections that parse() reads whole (libelf keeps them in memory).
bool read_whole(const GElf_Shdr& sh, std::string_view name) {
  switch (sh.sh_type) {
    case SHT_SYMTAB:
    case SHT_DYNSYM:
    case SHT_STRTAB:
    case SHT_NOTE:
    case SHT_RELA:
      return true;
    default:
      return name == ".gnu_debuglink" || (name.starts_with(".plt") && (sh.sh_flags & SHF_EXECINSTR));
  }
}

// A string's bytes outside the object (past the small-string buffer).
uint64_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

}  // namespace

std::string ElfSymbols::read_build_id(int fd) {
  if (elf_version(EV_CURRENT) == EV_NONE) return {};
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf) return {};
  std::string id = elf_kind(elf) == ELF_K_ELF ? build_id_of(elf) : std::string();
  elf_end(elf);
  return id;
}

void ElfSymbols::release_file() {
  if (elf_ && !image_) elf_cntl(static_cast<Elf*>(elf_), ELF_C_FDDONE);
}

uint64_t ElfSymbols::memory_bytes() const {
  uint64_t bytes = sizeof *this + (image_ ? image_->size() : sections_read_bytes_);
  bytes += segments_.capacity() * sizeof(Segment) + symbols_.capacity() * sizeof(Symbol);
  bytes += plt_.capacity() * sizeof plt_[0] + plt_entries_.capacity() * sizeof(PltEntry);
  return bytes + plt_name_bytes_;
}

ElfSymbols::~ElfSymbols() {
  if (elf_) elf_end(static_cast<Elf*>(elf_));
}

std::expected<std::unique_ptr<ElfSymbols>, std::string> ElfSymbols::read(int fd, const std::string& name) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::unexpected("libelf: " + std::string(elf_errmsg(-1)));
  // ELF_C_READ, not _MMAP: a mapped file truncated under us would SIGBUS.
  // Section data is read on first use, so this stays cheap for big files.
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf) return std::unexpected(name + ": not readable as ELF: " + elf_errmsg(-1));
  return parse(elf, name);
}

std::expected<std::unique_ptr<ElfSymbols>, std::string> ElfSymbols::read_memory(std::string image,
                                                                               const std::string& name) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::unexpected("libelf: " + std::string(elf_errmsg(-1)));
  // parse() keeps the Elf*, which points into the image: move the image in first.
  auto holder = std::make_unique<std::string>(std::move(image));
  Elf* elf = elf_memory(holder->data(), holder->size());
  if (!elf) return std::unexpected(name + ": not readable as ELF: " + elf_errmsg(-1));
  auto out = parse(elf, name);
  if (out) (*out)->image_ = std::move(holder);
  return out;
}

std::expected<std::unique_ptr<ElfSymbols>, std::string> ElfSymbols::parse(void* handle, const std::string& name) {
  Elf* elf = static_cast<Elf*>(handle);
  std::unique_ptr<ElfSymbols> out(new ElfSymbols());
  out->elf_ = elf;
  if (elf_kind(elf) != ELF_K_ELF) return std::unexpected(name + ": not an ELF file");

  size_t nphdr = 0;
  if (elf_getphdrnum(elf, &nphdr) != 0) return std::unexpected(name + ": bad program headers: " + elf_errmsg(-1));
  for (size_t i = 0; i < nphdr; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      out->segments_.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
  }

  size_t shstrndx = 0, nscn = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return std::unexpected(name + ": bad section headers: " + elf_errmsg(-1));
  // libelf pretends a section header table that runs past the end of the
  // file is not there: a file cut short (the table comes last) would read
  // as one without symbols, and its frames go unexplained.
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh) && eh.e_shnum != 0 && elf_getshdrnum(elf, &nscn) == 0 && nscn == 0)
    return std::unexpected(name + ": truncated: its " + std::to_string(eh.e_shnum) + " section headers (at byte " +
                           std::to_string(eh.e_shoff) + ") lie past the end of the file");
  // Untyped symbols name code only in code sections (assembly labels such
  // as ld.so's _start); elsewhere they are data or markers.
  std::vector<bool> code_section;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    size_t index = elf_ndxscn(scn);
    if (index >= code_section.size()) code_section.resize(index + 1);
    code_section[index] = gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
  }
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    // SHT_NOBITS has no bytes: libelf gives it its size and a null buffer (a
    // corrupt .gnu_debuglink of that type had strnlen read address 0; found
    // by tests/fuzz/fuzz_elf.cpp). Nothing we read can be of that type.
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* sname = elf_strptr(elf, shstrndx, sh.sh_name);
    std::string_view section = sname ? sname : "";
    if (read_whole(sh, section)) out->sections_read_bytes_ += sh.sh_size + sizeof sh;
    if (section == ".gnu_debuglink") {
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data && data->d_size >= 8) {
        auto bytes = static_cast<const char*>(data->d_buf);
        size_t len = strnlen(bytes, data->d_size - 4);
        out->debuglink_.assign(bytes, len);
        size_t crc_at = (len + 4) & ~size_t{3};  // after the NUL, 4-aligned
        if (crc_at + 4 <= data->d_size) std::memcpy(&out->debuglink_crc_, bytes + crc_at, 4);
      }
    } else if (section.starts_with(".plt") && (sh.sh_flags & SHF_EXECINSTR)) {
      out->plt_.emplace_back(sh.sh_addr, sh.sh_addr + sh.sh_size);  // .plt, .plt.got, .plt.sec
    } else if (section == ".gnu_debugdata") {
      out->debugdata_ = scn;
    } else if (section.starts_with(".debug_") || section.starts_with(".zdebug_")) {
      // Compressed sections say their real size in their header.
      GElf_Chdr ch;
      uint64_t size = sh.sh_size;
      if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch)) size = ch.ch_size;
      if (sh.sh_type != SHT_NOBITS) out->dwarf_bytes_ += size;
    }
    if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    if (sh.sh_type == SHT_SYMTAB) out->has_symtab_ = true;
    size_t count = std::min<size_t>(sh.sh_size / sh.sh_entsize, data->d_size / sh.sh_entsize);
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      unsigned type = GELF_ST_TYPE(sym.st_info);
      bool label = type == STT_NOTYPE && sym.st_shndx < code_section.size() && code_section[sym.st_shndx];
      if ((type != STT_FUNC && type != STT_GNU_IFUNC && !label) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
        continue;
      const char* symname = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!symname || !*symname || (label && symname[0] == '$')) continue;  // $x: ARM mapping symbols
      // A typed function wins over a label at the same address.
      uint8_t rank = binding_rank(GELF_ST_BIND(sym.st_info)) + (label ? 3 : 0);
      out->symbols_.push_back({sym.st_value, sym.st_size, symname, rank});
    }
  }
  out->build_id_ = build_id_of(elf);
  out->sort_symbols();
  out->name_plt_entries();
  return out;
}

namespace {

// The GOT slot an x86_64 PLT entry of `size` bytes at `address` jumps
// through: jmp *slot(%rip), maybe after endbr64 or with a bnd prefix.
std::optional<uint64_t> x86_64_plt_slot(const uint8_t* code, uint64_t address, size_t size) {
  for (size_t i = 0; i + 6 <= size; ++i) {
    if (code[i] != 0xff || code[i + 1] != 0x25) continue;  // jmp *disp32(%rip)
    int32_t disp;
    std::memcpy(&disp, code + i + 2, 4);
    return address + i + 6 + static_cast<int64_t>(disp);
  }
  return std::nullopt;
}

// The GOT slot an arm64 PLT entry loads its target from: adrp x16, page;
// ldr x17, [x16, #offset] (then add x16 and br x17), maybe after bti c.
std::optional<uint64_t> arm64_plt_slot(const uint8_t* code, uint64_t address, size_t size) {
  for (size_t i = 0; i + 8 <= size; i += 4) {
    uint32_t adrp, ldr;
    std::memcpy(&adrp, code + i, 4);
    std::memcpy(&ldr, code + i + 4, 4);
    if ((adrp & 0x9f000000) != 0x90000000 || (ldr & 0xffc00000) != 0xf9400000 || ((ldr >> 5) & 0x1f) != (adrp & 0x1f))
      continue;
    // adrp: a 21-bit signed page count, its low 2 bits in 29-30, the rest in 5-23.
    int64_t pages = static_cast<int64_t>(((adrp >> 5) & 0x7ffff) << 2 | ((adrp >> 29) & 3)) << 43 >> 43;
    uint64_t page = ((address + i) & ~uint64_t{0xfff}) + static_cast<uint64_t>(pages * 4096);
    return page + ((ldr >> 10) & 0xfff) * 8;  // ldr's unsigned offset, in 8-byte units
  }
  return std::nullopt;
}

// The size of a PLT's entries where its section does not say: 16 bytes,
// or on arm64 24 where branch protection starts each with bti c (after
// the 32-byte header).
size_t plt_entry_size(bool arm64, const Elf_Data* data) {
  constexpr uint32_t kBtiC = 0xd503245f;
  uint32_t first;
  if (!arm64 || data->d_size < 36) return 16;
  std::memcpy(&first, static_cast<const uint8_t*>(data->d_buf) + 32, 4);
  return first == kBtiC ? 24 : 16;
}

}  // namespace

// Each PLT entry jumps through a GOT slot that a JUMP_SLOT or GLOB_DAT
// relocation binds to a dynamic symbol: the entry is named after it. Read
// from the code, not from the entries' order, which differs between .plt,
// .plt.sec (IBT) and .plt.got.
void ElfSymbols::name_plt_entries() {
  Elf* elf = static_cast<Elf*>(elf_);
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr)) return;
  const bool arm64 = ehdr.e_machine == EM_AARCH64;
  const uint64_t jump_slot = arm64 ? R_AARCH64_JUMP_SLOT : R_X86_64_JUMP_SLOT;
  const uint64_t glob_dat = arm64 ? R_AARCH64_GLOB_DAT : R_X86_64_GLOB_DAT;
  std::unordered_map<uint64_t, std::string> slots;  // GOT slot -> symbol name
  struct Plt {
    uint64_t address, entry_size;
    Elf_Data* data;
  };
  std::vector<Plt> plts;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* sname = elf_strptr(elf, shstrndx, sh.sh_name);
    if (sname && std::string_view(sname).starts_with(".plt") && (sh.sh_flags & SHF_EXECINSTR)) {
      if (Elf_Data* data = elf_getdata(scn, nullptr); data && data->d_buf)
        plts.push_back({sh.sh_addr, sh.sh_entsize >= 8 && sh.sh_entsize <= 32 ? sh.sh_entsize : plt_entry_size(arm64, data), data});
      continue;
    }
    if (sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
    Elf_Scn* symtab = elf_getscn(elf, sh.sh_link);
    GElf_Shdr symsh;
    Elf_Data* rela = elf_getdata(scn, nullptr);
    Elf_Data* syms = symtab && gelf_getshdr(symtab, &symsh) ? elf_getdata(symtab, nullptr) : nullptr;
    if (!rela || !syms) continue;
    size_t count = std::min<size_t>(sh.sh_size / sh.sh_entsize, rela->d_size / sh.sh_entsize);
    for (size_t i = 0; i < count; ++i) {
      GElf_Rela r;
      GElf_Sym sym;
      if (!gelf_getrela(rela, static_cast<int>(i), &r)) break;
      uint64_t type = GELF_R_TYPE(r.r_info), index = GELF_R_SYM(r.r_info);
      if ((type != jump_slot && type != glob_dat) || index == 0 ||
          !gelf_getsym(syms, static_cast<int>(index), &sym))
        continue;
      const char* symname = elf_strptr(elf, symsh.sh_link, sym.st_name);
      if (symname && *symname) slots.emplace(r.r_offset, symname);
    }
  }
  for (const Plt& plt : plts) {
    auto* code = static_cast<const uint8_t*>(plt.data->d_buf);
    for (size_t at = 0; at + plt.entry_size <= plt.data->d_size; at += plt.entry_size) {
      auto address = (arm64 ? arm64_plt_slot : x86_64_plt_slot)(code + at, plt.address + at, plt.entry_size);
      auto slot = address ? slots.find(*address) : slots.end();
      if (slot != slots.end()) plt_entries_.push_back({plt.address + at, plt.entry_size, slot->second + "@plt"});
    }
  }
  std::sort(plt_entries_.begin(), plt_entries_.end(),
            [](const PltEntry& a, const PltEntry& b) { return a.address < b.address; });
  for (const PltEntry& e : plt_entries_) plt_name_bytes_ += heap_bytes(e.name);
}

void ElfSymbols::sort_symbols() {
  // One symbol per address: prefer a sized one, then global over weak over local.
  auto& syms = symbols_;
  std::sort(syms.begin(), syms.end(), [](const Symbol& a, const Symbol& b) {
    if (a.address != b.address) return a.address < b.address;
    if ((a.size == 0) != (b.size == 0)) return a.size != 0;
    return a.rank < b.rank;
  });
  syms.erase(std::unique(syms.begin(), syms.end(),
                         [](const Symbol& a, const Symbol& b) { return a.address == b.address; }),
             syms.end());
}

void ElfSymbols::merge(const ElfSymbols& other) {
  symbols_.insert(symbols_.end(), other.symbols_.begin(), other.symbols_.end());
  sort_symbols();
  has_symtab_ |= other.has_symtab_;
}

std::string_view ElfSymbols::minidebuginfo() const {
  if (!debugdata_) return {};
  Elf_Data* data = elf_rawdata(static_cast<Elf_Scn*>(debugdata_), nullptr);
  return data && data->d_buf ? std::string_view(static_cast<const char*>(data->d_buf), data->d_size)
                             : std::string_view();
}

std::optional<uint64_t> ElfSymbols::vaddr_of_offset(uint64_t offset) const {
  for (const Segment& s : segments_)
    if (offset >= s.offset && offset < s.offset + s.filesz) return offset - s.offset + s.vaddr;
  return std::nullopt;
}

std::string_view ElfSymbols::find(uint64_t vaddr) const {
  // Linker stubs have no symbols: named after where they jump, or
  // labelled as what they are.
  for (const auto& [lo, hi] : plt_)
    if (vaddr >= lo && vaddr < hi) {
      auto entry = std::upper_bound(plt_entries_.begin(), plt_entries_.end(), vaddr,
                                    [](uint64_t a, const PltEntry& e) { return a < e.address; });
      if (entry != plt_entries_.begin() && vaddr < std::prev(entry)->address + std::prev(entry)->size)
        return std::prev(entry)->name;
      return "[plt]";
    }
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                             [](uint64_t a, const Symbol& s) { return a < s.address; });
  // Walk back over symbols that start below `vaddr`: the nearest sized one
  // that contains it wins; an unsized one (assembly) is taken only when it
  // is the nearest, since we cannot tell where it ends.
  for (int steps = 0; it != symbols_.begin() && steps < 4; ++steps) {
    --it;
    if (it->size == 0) return steps == 0 ? it->name : std::string_view();
    if (vaddr < it->address + it->size) return it->name;
  }
  return {};
}

std::string demangle(std::string_view name, bool* was_cpp) {
  if (was_cpp) *was_cpp = false;
  // Versioned names from .symver ("memcpy@@GLIBC_2.14"): the version is not
  // part of the function's name, and C++ demanglers reject it. A PLT
  // entry's "@plt" is kept: the stub is not the function.
  if (name.ends_with("@plt") && name.size() > 4) return demangle(name.substr(0, name.size() - 4), was_cpp) + "@plt";
  name = name.substr(0, name.find('@'));
  if (!name.starts_with("_Z")) return std::string(name);
  int status = 0;
  std::string mangled(name);
  char* out = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return mangled;
  std::string result(out);
  std::free(out);
  if (was_cpp) *was_cpp = true;
  return result;
}

}  // namespace ember::symbolizer
