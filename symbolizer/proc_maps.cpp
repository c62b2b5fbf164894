#include "symbolizer/proc_maps.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string_view>

#include <sys/auxv.h>

namespace ember::symbolizer {
namespace {

bool parse_hex(std::string_view& s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(p - s.data());
  return true;
}

bool skip(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

void skip_spaces(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
}

}  // namespace

std::vector<Mapping> parse_proc_maps(std::istream& in) {
  // 55d0c3a00000-55d0c3a28000 r-xp 00002000 fd:01 1234   /usr/bin/foo
  std::vector<Mapping> out;
  std::string line;
  while (std::getline(in, line)) {
    std::string_view s(line);
    Mapping m;
    uint64_t major = 0, minor = 0;
    if (!parse_hex(s, m.start) || !skip(s, '-') || !parse_hex(s, m.end) || !skip(s, ' ')) continue;
    if (s.size() < 5) continue;
    m.executable = s[2] == 'x';
    s.remove_prefix(5);
    skip_spaces(s);
    if (!parse_hex(s, m.offset)) continue;
    skip_spaces(s);
    if (!parse_hex(s, major) || !skip(s, ':') || !parse_hex(s, minor)) continue;
    m.dev = (major << 20) | minor;
    skip_spaces(s);
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), m.inode);
    if (ec != std::errc()) continue;
    s.remove_prefix(p - s.data());
    skip_spaces(s);
    m.path = std::string(s);
    out.push_back(std::move(m));
  }
  return out;
}

PerfMap parse_perf_map(std::istream& in) {
  PerfMap map;
  std::string line;
  std::vector<PerfMapEntry> entries;
  while (std::getline(in, line)) {
    std::string_view s(line);
    PerfMapEntry e;
    if (s.starts_with("0x")) s.remove_prefix(2);
    bool ok = parse_hex(s, e.start) && skip(s, ' ');
    if (ok && s.starts_with("0x")) s.remove_prefix(2);
    ok = ok && parse_hex(s, e.size) && skip(s, ' ') && !s.empty() && e.size > 0;
    if (!ok) {
      if (!line.empty()) ++map.bad_lines;
      continue;
    }
    e.name = std::string(s);
    entries.push_back(std::move(e));
  }
  // Keep the last entry for each start address, as the JIT wrote it last.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const PerfMapEntry& a, const PerfMapEntry& b) { return a.start < b.start; });
  for (size_t i = 0; i < entries.size(); ++i)
    if (i + 1 == entries.size() || entries[i + 1].start != entries[i].start) map.entries.push_back(std::move(entries[i]));
  return map;
}

const PerfMapEntry* PerfMap::find(uint64_t address) const {
  auto it = std::upper_bound(entries.begin(), entries.end(), address,
                             [](uint64_t a, const PerfMapEntry& e) { return a < e.start; });
  if (it == entries.begin()) return nullptr;
  --it;
  return address < it->start + it->size ? &*it : nullptr;
}

std::string_view own_vdso_image() {
  auto base = static_cast<uint64_t>(getauxval(AT_SYSINFO_EHDR));
  std::ifstream in("/proc/self/maps");
  for (const Mapping& m : parse_proc_maps(in))
    if (base && m.start == base) return {reinterpret_cast<const char*>(base), m.end - m.start};
  return {};
}

}  // namespace ember::symbolizer
