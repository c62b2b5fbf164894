#include "symbolizer/elf_facts.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>

namespace ember::symbolizer {

std::optional<bool> is_static_executable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
    return std::nullopt;
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return std::nullopt;
    if (ph.p_type == PT_INTERP) return false;
  }
  return true;
}

std::expected<SegmentPlace, std::string> exported_function_place(const std::string& path, std::string_view name) {
  auto exports = exported_symbols(path, {std::string(name)});
  if (!exports) return std::unexpected(exports.error());
  auto it = exports->symbols.find(std::string(name));
  if (it == exports->symbols.end() || !it->second.code_segment_size)
    return std::unexpected(path + " has no " + std::string(name) + " function in an executable segment");
  return SegmentPlace{it->second.vaddr - it->second.code_segment_vaddr, it->second.code_segment_size};
}

namespace {

// The exported symbols whose names `wanted` takes.
std::expected<Exports, std::string> exported_symbols_if(const std::string& path,
                                                        const std::function<bool(std::string_view)>& wanted) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(path + ": " + std::strerror(errno));
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf || elf_kind(elf) != ELF_K_ELF) {
    if (elf) elf_end(elf);
    close(fd);
    return std::unexpected(path + " is not an ELF file");
  }
  Exports out;
  std::vector<GElf_Phdr> loads;
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) == 0)
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) loads.push_back(ph);
    }
  if (!loads.empty()) out.first_load_vaddr = loads.front().p_vaddr & ~uint64_t{0xfff};
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNSYM || !shdr.sh_entsize) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data && i < shdr.sh_size / shdr.sh_entsize; ++i) {
      GElf_Sym sym;
      const char* name;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value ||
          !(name = elf_strptr(elf, shdr.sh_link, sym.st_name)))
        continue;
      if (!wanted(name)) continue;
      ExportedSymbol e{sym.st_value, sym.st_size};
      for (const GElf_Phdr& ph : loads) {
        if (sym.st_value >= ph.p_vaddr && sym.st_value + sym.st_size <= ph.p_vaddr + ph.p_filesz)
          e.file_offset = ph.p_offset + (sym.st_value - ph.p_vaddr);
        if (GELF_ST_TYPE(sym.st_info) == STT_FUNC && (ph.p_flags & PF_X) && sym.st_value >= ph.p_vaddr &&
            sym.st_value < ph.p_vaddr + ph.p_memsz) {
          e.code_segment_vaddr = ph.p_vaddr;
          e.code_segment_size = ph.p_memsz;
        }
      }
      out.symbols[name] = e;
    }
  }
  elf_end(elf);
  close(fd);
  return out;
}

}  // namespace

std::expected<Exports, std::string> exported_symbols(const std::string& path, const std::vector<std::string>& names) {
  return exported_symbols_if(path, [&](std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  });
}

std::expected<Exports, std::string> exported_symbols_starting(const std::string& path, std::string_view prefix) {
  return exported_symbols_if(path, [&](std::string_view name) { return name.starts_with(prefix); });
}

}  // namespace ember::symbolizer
