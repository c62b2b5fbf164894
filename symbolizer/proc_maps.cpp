#include "symbolizer/proc_maps.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>

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

std::vector<Mapping> parse_proc_maps(std::string_view text) {
  // 55d0c3a00000-55d0c3a28000 r-xp 00002000 fd:01 1234   /usr/bin/foo
  std::vector<Mapping> out;
  while (!text.empty()) {
    size_t end = std::min(text.find('\n'), text.size());
    std::string_view s = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
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

std::optional<std::vector<Mapping>> read_proc_maps(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  size_t used = 0;
  for (ssize_t n = 1; n > 0;) {
    text.resize(used + 16384);
    n = read(fd, text.data() + used, text.size() - used);
    if (n > 0) used += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR) n = 1;
  }
  close(fd);
  text.resize(used);
  return parse_proc_maps(text);
}

const PerfMapEntry* PerfMap::find(uint64_t address) const {
  auto it = std::upper_bound(entries.begin(), entries.end(), address,
                             [](uint64_t a, const PerfMapEntry& e) { return a < e.start; });
  if (it == entries.begin()) return nullptr;
  --it;
  return address < it->start + it->size ? &*it : nullptr;
}

std::string process_start_text(uint32_t pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the name, which may hold spaces and parentheses: state is
  // the 3rd, starttime the 22nd.
  size_t name_end = stat.rfind(") ");
  if (name_end == std::string::npos) return "";
  std::istringstream fields(stat.substr(name_end + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field;) ++i;
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return "";
  std::ifstream boot_file("/proc/stat");
  std::string line;
  unsigned long long boot = 0;
  while (std::getline(boot_file, line))
    if (line.starts_with("btime ")) boot = std::stoull(line.substr(6));
  long hz = sysconf(_SC_CLK_TCK);
  if (!boot || hz <= 0) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(boot) + static_cast<double>(ticks) / hz);
  return text;
}

std::string_view own_vdso_image() {
  auto base = static_cast<uint64_t>(getauxval(AT_SYSINFO_EHDR));
  for (const Mapping& m : read_proc_maps("/proc/self/maps").value_or(std::vector<Mapping>{}))
    if (base && m.start == base) return {reinterpret_cast<const char*>(base), m.end - m.start};
  return {};
}

}  // namespace ember::symbolizer
