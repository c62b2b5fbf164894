#include "symbolizer/kallsyms.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace ember::symbolizer {
namespace {

bool is_text(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

}  // namespace

std::expected<KernelSymbols, std::string> KernelSymbols::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::unexpected("cannot read " + path + ": " + std::strerror(errno));
  KernelSymbols ks;
  std::string line;
  size_t lines = 0, zero = 0;
  while (std::getline(in, line)) {
    // "ffffffff81000000 T _stext" or "ffffffffc0a01000 t foo\t[kvm]"
    ++lines;
    std::string_view v(line);
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), addr, 16);
    if (ec != std::errc() || p + 3 > v.data() + v.size() || *p != ' ') continue;
    char type = p[1];
    if (!is_text(type)) continue;
    if (addr == 0) {
      ++zero;
      continue;
    }
    std::string_view rest(p + 3, v.data() + v.size() - (p + 3));
    std::string_view name = rest, module;
    if (size_t tab = rest.find('\t'); tab != std::string_view::npos) {
      name = rest.substr(0, tab);
      module = rest.substr(tab + 1);
      if (module.size() >= 2 && module.front() == '[' && module.back() == ']')
        module = module.substr(1, module.size() - 2);
    }
    ks.symbols_.push_back(Symbol{addr, std::string(name), std::string(module)});
  }
  ks.hidden_ = lines > 0 && ks.symbols_.empty() && zero > 0;
  std::sort(ks.symbols_.begin(), ks.symbols_.end(),
            [](const Symbol& a, const Symbol& b) { return a.address < b.address; });
  return ks;
}

const KernelSymbols::Symbol* KernelSymbols::find(uint64_t address) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                             [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (it == symbols_.begin()) return nullptr;
  return &*std::prev(it);
}

}  // namespace ember::symbolizer
