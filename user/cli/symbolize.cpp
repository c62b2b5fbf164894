#include "user/cli/symbolize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>

#include "symbolizer/profile_frames.h"
#include "symbolizer/symbolizer.h"

namespace ember {
namespace {

std::optional<uint64_t> parse_address(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
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
  std::vector<flamegraph::Frame> frames = profile_frames(s);
  if (!s.known()) {
    std::printf("\t?? %s: %s\n", frames.front().name.c_str(), symbolizer::describe(*s.unknown));
    return;
  }
  for (auto f = frames.rbegin(); f != frames.rend(); ++f)
    std::printf("\t%s%s", f->name.c_str(), f->kind == flamegraph::FrameKind::Inlined ? " [inlined]" : "");
  std::printf("\n");
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r") == std::string_view::npos; }

// --elf FILE must be a file ember can read, and an ELF file: anything else
// is a mistake in the command, not an address to answer "??" for. A
// damaged ELF file is still answered, from what can be read of it.
std::optional<std::string> unusable_elf(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  struct stat st{};
  char magic[4] = {};
  bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  bool elf = regular && pread(fd, magic, sizeof magic, 0) == sizeof magic && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
  close(fd);
  if (!regular) return path + " is not a regular file: give --elf a binary or a shared library";
  if (!elf) return path + " is not an ELF file: give --elf a binary or a shared library";
  return std::nullopt;
}

}  // namespace

int run_symbolize(const SymbolizeOptions& o) {
  if (!o.elf.empty())
    if (auto why = unusable_elf(o.elf)) {
      std::fprintf(stderr, "ember: %s\n", why->c_str());
      return 1;
    }
  std::vector<std::string> text = o.addresses;
  if (text.empty())
    for (std::string line; std::getline(std::cin, line);) text.push_back(line);
  // Every input line gets its output line, so a script can pair them: a
  // blank line stays blank, a line that is not an address says so.
  std::vector<std::optional<uint64_t>> parsed;
  std::vector<uint64_t> addresses;
  size_t bad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    parsed.push_back(parse_address(text[i]));
    if (parsed.back()) {
      addresses.push_back(*parsed.back());
    } else if (!blank(text[i])) {
      std::fprintf(stderr, "ember: %s %zu: '%s' is not a hex address\n", o.addresses.empty() ? "line" : "argument",
                   i + 1, text[i].c_str());
      ++bad;
    }
  }

  symbolizer::Options options;
  options.lines = o.lines;
  options.inlines = o.inlines;
  options.set_memory_bound(uint64_t(o.memory_mib) << 20);
  options.memory_knob = "--symbol-memory";
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
  size_t next = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (parsed[i]) {
      print(addresses[next], symbols[next]);
      ++next;
    } else if (blank(text[i])) {
      std::printf("\n");
    } else {
      std::printf("%s\t?? not a hex address\n", text[i].c_str());
    }
  }
  for (const std::string& w : symbolizer.take_warnings()) std::fprintf(stderr, "ember: warning: %s\n", w.c_str());
  // Status 2, as for other bad arguments: the answers are all there, but
  // a script should not take a half-read input for a complete one.
  return bad ? 2 : 0;
}

}  // namespace ember
