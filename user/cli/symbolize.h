// `ember symbolize`: the symbolizer on the command line, in batch (what
// addr2line -e does, and for a live process's addresses too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

struct SymbolizeOptions {
  std::string elf;        // addresses are this file's virtual addresses...
  uint32_t pid = 0;       // ...or this process's
  bool kernel = false;    // ...or the kernel's
  bool lines = false;
  bool inlines = true;
  uint32_t memory_mib = 512;
  std::vector<std::string> addresses;  // hex; none: read stdin, one per line
};

int run_symbolize(const SymbolizeOptions& options);

}  // namespace ember
