// An independent symbolizer for the tests: BCC's (libbcc, the one behind
// profile.py and offcputime), asked about addresses in a live process.
//   bcc_symbolize PID < addresses      (or the pid as the first stdin line)
// Reads hex addresses, one per line; prints, in order, one line each:
//   0xADDR<TAB>demangled name<TAB>module     or     0xADDR<TAB>??
// BCC names the ELF symbol (of the binary or its debug file) that contains
// the address; it knows nothing of DWARF, so no inlined frames.
#include <bcc/bcc_syms.h>
#include <elf.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::string line;
  long pid = 0;
  if (argc > 1)
    pid = std::strtol(argv[1], nullptr, 10);
  else if (std::getline(std::cin, line))
    pid = std::strtol(line.c_str(), nullptr, 10);
  if (pid <= 0) {
    std::fprintf(stderr, "usage: bcc_symbolize PID < hex-addresses\n");
    return 2;
  }
  bcc_symbol_option opt{};
  opt.use_debug_file = 1;        // .gnu_debuglink and /usr/lib/debug/.build-id
  opt.check_debug_file_crc = 1;
  opt.lazy_symbolize = 1;        // names read on demand: libjvm has 100,000 symbols
  opt.use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC);
  void* cache = bcc_symcache_new(static_cast<int>(pid), &opt);
  if (!cache) {
    std::fprintf(stderr, "bcc_symbolize: bcc_symcache_new(%ld) failed\n", pid);
    return 1;
  }
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    uint64_t addr = std::strtoull(line.c_str(), nullptr, 16);
    bcc_symbol sym{};
    if (bcc_symcache_resolve(cache, addr, &sym) == 0 && sym.name)
      std::printf("0x%" PRIx64 "\t%s\t%s\n", addr, sym.demangle_name ? sym.demangle_name : sym.name,
                  sym.module ? sym.module : "");
    else
      std::printf("0x%" PRIx64 "\t??\n", addr);
    bcc_symbol_free_demangle_name(&sym);  // frees only what demangling allocated
  }
  bcc_free_symcache(cache, static_cast<int>(pid));
  return 0;
}
