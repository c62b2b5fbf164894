#include "user/symbolize.h"

#include <cstdio>
#include <iostream>
#include <string_view>

#include "symbolizer/symbolizer.h"

namespace ember {
namespace {

std::optional<uint64_t> parse_address(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v << 4 | uint64_t(d);
  }
  return v;
}

// One line per address: the address, then its frames innermost first (as
// addr2line -i prints them), tab-separated.
void print(uint64_t address, const symbolizer::Symbol& s) {
  std::printf("0x%llx", static_cast<unsigned long long>(address));
  if (!s.known()) {
    std::printf("\t?? %s: %s\n", s.frames.front().name.c_str(), s.unknown.c_str());
    return;
  }
  for (auto f = s.frames.rbegin(); f != s.frames.rend(); ++f)
    std::printf("\t%s%s", f->name.c_str(), f->kind == flamegraph::FrameKind::Inlined ? " [inlined]" : "");
  std::printf("\n");
}

}  // namespace

int run_symbolize(const SymbolizeOptions& o) {
  std::vector<std::string> text = o.addresses;
  if (text.empty())
    for (std::string line; std::getline(std::cin, line);)
      if (!line.empty()) text.push_back(line);
  std::vector<uint64_t> addresses;
  for (const std::string& t : text) {
    auto a = parse_address(t);
    if (!a) {
      std::fprintf(stderr, "ember: '%s' is not a hex address\n", t.c_str());
      return 2;
    }
    addresses.push_back(*a);
  }

  symbolizer::Options options;
  options.lines = o.lines;
  options.inlines = o.inlines;
  options.dwarf_memory_bytes = uint64_t(o.memory_mib) << 20;
  symbolizer::Symbolizer symbolizer(options);
  std::vector<symbolizer::Symbol> symbols;
  if (!o.elf.empty()) {
    symbols = symbolizer.symbolize_file(o.elf, addresses);
  } else if (o.kernel) {
    symbols = symbolizer.symbolize_kernel(addresses);
  } else {
    if (!symbolizer.snapshot_process(o.pid)) {
      std::fprintf(stderr, "ember: cannot read the mappings of pid %u: no such process, or not allowed (run as root)\n",
                   o.pid);
      return 1;
    }
    symbols = symbolizer.symbolize_user(o.pid, addresses);
  }
  for (size_t i = 0; i < addresses.size(); ++i) print(addresses[i], symbols[i]);
  for (const std::string& w : symbolizer.warnings()) std::fprintf(stderr, "ember: warning: %s\n", w.c_str());
  return 0;
}

}  // namespace ember
