#include "symbolizer/elf_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdlib>

namespace ember::symbolizer {
namespace {

uint8_t binding_rank(unsigned char binding) {
  switch (binding) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

}  // namespace

ElfSymbols::~ElfSymbols() {
  if (elf_) elf_end(static_cast<Elf*>(elf_));
}

std::expected<std::unique_ptr<ElfSymbols>, std::string> ElfSymbols::read(int fd, const std::string& name) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::unexpected("libelf: " + std::string(elf_errmsg(-1)));
  // ELF_C_READ, not _MMAP: a mapped file truncated under us would SIGBUS.
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf) return std::unexpected(name + ": not readable as ELF: " + elf_errmsg(-1));
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

  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
    if (sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      unsigned type = GELF_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
      const char* sname = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!sname || !*sname) continue;
      out->symbols_.push_back({sym.st_value, sym.st_size, sname, binding_rank(GELF_ST_BIND(sym.st_info))});
    }
  }
  // One symbol per address: prefer a sized one, then global over weak over local.
  auto& syms = out->symbols_;
  std::sort(syms.begin(), syms.end(), [](const Symbol& a, const Symbol& b) {
    if (a.address != b.address) return a.address < b.address;
    if ((a.size == 0) != (b.size == 0)) return a.size != 0;
    return a.rank < b.rank;
  });
  syms.erase(std::unique(syms.begin(), syms.end(),
                         [](const Symbol& a, const Symbol& b) { return a.address == b.address; }),
             syms.end());
  return out;
}

std::optional<uint64_t> ElfSymbols::vaddr_of_offset(uint64_t offset) const {
  for (const Segment& s : segments_)
    if (offset >= s.offset && offset < s.offset + s.filesz) return offset - s.offset + s.vaddr;
  return std::nullopt;
}

std::string_view ElfSymbols::find(uint64_t vaddr) const {
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
