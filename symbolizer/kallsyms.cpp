#include "symbolizer/kallsyms.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>

namespace ember::symbolizer {
namespace {

bool is_text(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

std::expected<std::string, std::string> read_all(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected("cannot read " + path + ": " + std::strerror(errno));
  std::string data;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    size_t have = data.size();
    data.resize(have + kChunk);
    ssize_t n = read(fd, data.data() + have, kChunk);
    if (n < 0 && errno == EINTR) n = 0;
    if (n < 0) {
      int err = errno;
      close(fd);
      return std::unexpected("cannot read " + path + ": " + std::strerror(err));
    }
    data.resize(have + static_cast<size_t>(n));
    if (n == 0 && data.size() == have) break;
  }
  close(fd);
  return data;
}

}  // namespace

std::expected<KernelSymbols, std::string> KernelSymbols::load(const std::string& path) {
  auto data = read_all(path);
  if (!data) return std::unexpected(data.error());
  KernelSymbols ks;
  ks.text_.reserve(data->size() / 2);
  size_t lines = 0, zero = 0;
  std::string_view rest(*data);
  while (!rest.empty()) {
    // "ffffffff81000000 T _stext" or "ffffffffc0a01000 t foo\t[kvm]"
    size_t eol = rest.find('\n');
    std::string_view v = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    ++lines;
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), addr, 16);
    if (ec != std::errc() || p + 3 > v.data() + v.size() || *p != ' ' || !is_text(p[1])) continue;
    if (addr == 0) {
      ++zero;
      continue;
    }
    std::string_view name(p + 3, v.data() + v.size() - (p + 3)), module;
    if (size_t tab = name.find('\t'); tab != std::string_view::npos) {
      module = name.substr(tab + 1);
      name = name.substr(0, tab);
      if (module.size() >= 2 && module.front() == '[' && module.back() == ']')
        module = module.substr(1, module.size() - 2);
    }
    ks.entries_.push_back({addr, static_cast<uint32_t>(ks.text_.size()), static_cast<uint16_t>(name.size()),
                           static_cast<uint16_t>(module.size())});
    ks.text_.append(name).append(1, '\0').append(module);
  }
  ks.hidden_ = lines > 0 && ks.entries_.empty() && zero > 0;
  auto by_address = [](const Entry& a, const Entry& b) { return a.address < b.address; };
  // Core kernel symbols come sorted; modules and BPF programs do not.
  if (!std::is_sorted(ks.entries_.begin(), ks.entries_.end(), by_address))
    std::stable_sort(ks.entries_.begin(), ks.entries_.end(), by_address);
  return ks;
}

std::optional<KernelSymbols::Symbol> KernelSymbols::find(uint64_t address) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.address; });
  if (it == entries_.begin()) return std::nullopt;
  const Entry& e = *std::prev(it);
  std::string_view text(text_);
  return Symbol{text.substr(e.name, e.name_len), text.substr(e.name + e.name_len + 1, e.module_len)};
}

}  // namespace ember::symbolizer
