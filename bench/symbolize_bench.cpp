// The in-process half of bench/symbolize.sh.
//
//   symbolize_bench gen SEED COUNT < nm-output
//     COUNT addresses (hex, one per line) drawn from `nm -S --defined-only`
//     output: a sized function symbol uniformly (aliases merged), then an
//     offset uniformly inside it. std::mt19937_64 is specified bit for bit
//     by the standard, so the same seed and symbols give the same addresses
//     on every machine (awk's rand() differs between mawk and gawk).
//
//   symbolize_bench run [--lines] [--no-inlines] ELF ADDRS [ELF ADDRS]...
//     One Symbolizer names every file's addresses (symbolize_file, one batch
//     per file), then does the whole again in the same process: the second
//     pass is what a long-running ember pays for recurring addresses. Prints
//     per file and in total: addresses, named (known), frames, both passes'
//     times, answers that differ between the passes; then peak RSS.
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "symbolizer/symbolizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool parse_hex(std::string_view s, uint64_t& v) {
  if (s.starts_with("0x")) s.remove_prefix(2);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// nm -S lines: "ADDRESS SIZE TYPE NAME". Types t/T (text), w/W (weak, in
// practice functions here) and i (GNU ifunc resolvers) are code.
int generate(uint64_t seed, uint64_t count) {
  std::map<uint64_t, uint64_t> functions;  // start -> largest size among its aliases
  for (std::string line; std::getline(std::cin, line);) {
    std::vector<std::string_view> f;
    std::string_view rest = line;
    while (f.size() < 4 && !rest.empty()) {
      size_t sp = rest.find(' ');
      f.push_back(rest.substr(0, sp));
      rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    }
    uint64_t start, size;
    if (f.size() < 4 || f[2].size() != 1 || std::string_view("tTwWi").find(f[2][0]) == std::string_view::npos ||
        !parse_hex(f[0], start) || !parse_hex(f[1], size) || size == 0)
      continue;
    uint64_t& s = functions[start];
    s = std::max(s, size);
  }
  if (functions.empty()) {
    std::fprintf(stderr, "symbolize_bench: no sized function symbols on stdin\n");
    return 1;
  }
  std::vector<std::pair<uint64_t, uint64_t>> fs(functions.begin(), functions.end());
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < count; ++i) {
    const auto& [start, size] = fs[rng() % fs.size()];
    std::printf("0x%llx\n", static_cast<unsigned long long>(start + rng() % size));
  }
  std::fprintf(stderr, "%zu functions\n", fs.size());
  return 0;
}

struct Batch {
  std::string elf;
  std::vector<uint64_t> addresses;
  size_t named = 0, frames = 0, differ = 0;
  double pass_ms[2] = {0, 0};
  std::vector<size_t> digest;  // per address, of the first pass's answer
};

size_t digest(const ember::symbolizer::Symbol& s) {
  size_t h = s.unknown ? size_t(*s.unknown) + 1 : 0;
  for (const auto& f : s.frames) h = h * 31 + std::hash<std::string>()(f.name) + size_t(f.kind);
  return h;
}

void print(const char* what, const Batch& b, size_t addresses) {
  std::printf("%s %s addresses %zu named %zu frames %zu pass1_ms %.1f pass2_ms %.2f differ %zu\n", what,
              b.elf.c_str(), addresses, b.named, b.frames, b.pass_ms[0], b.pass_ms[1], b.differ);
}

int run(int argc, char** argv) {
  ember::symbolizer::Options options;
  std::vector<Batch> batches;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--lines") {
      options.lines = true;
    } else if (a == "--no-inlines") {
      options.inlines = false;
    } else if (i + 1 < argc) {
      Batch b;
      b.elf = argv[i];
      std::ifstream in(argv[++i]);
      for (std::string line; std::getline(in, line);) {
        uint64_t v;
        if (parse_hex(line, v)) b.addresses.push_back(v);
      }
      if (b.addresses.empty()) {
        std::fprintf(stderr, "symbolize_bench: no addresses in %s\n", argv[i]);
        return 1;
      }
      batches.push_back(std::move(b));
    } else {
      std::fprintf(stderr, "symbolize_bench: ELF %s has no address file\n", argv[i]);
      return 2;
    }
  }
  ember::symbolizer::Symbolizer symbolizer(options);
  for (int pass = 0; pass < 2; ++pass)
    for (Batch& b : batches) {
      auto start = Clock::now();
      std::vector<ember::symbolizer::Symbol> symbols = symbolizer.symbolize_file(b.elf, b.addresses);
      b.pass_ms[pass] = ms_since(start);
      for (size_t i = 0; i < symbols.size(); ++i) {
        size_t d = digest(symbols[i]);
        if (pass == 0) {
          b.digest.push_back(d);
          b.named += symbols[i].known();
          b.frames += symbols[i].known() ? symbols[i].frames.size() : 0;
        } else {
          b.differ += d != b.digest[i];
        }
      }
    }
  Batch total;
  total.elf = "-";
  size_t count = 0;
  for (const Batch& b : batches) {
    print("file", b, b.addresses.size());
    count += b.addresses.size();
    total.named += b.named, total.frames += b.frames, total.differ += b.differ;
    total.pass_ms[0] += b.pass_ms[0], total.pass_ms[1] += b.pass_ms[1];
  }
  print("total", total, count);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("rss_kb %ld\n", ru.ru_maxrss);
  for (const std::string& w : symbolizer.take_warnings()) std::fprintf(stderr, "ember: warning: %s\n", w.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view mode = argc > 1 ? argv[1] : "";
  uint64_t seed, count;
  if (mode == "gen" && argc == 4 && std::from_chars(argv[2], argv[2] + std::strlen(argv[2]), seed).ec == std::errc() &&
      std::from_chars(argv[3], argv[3] + std::strlen(argv[3]), count).ec == std::errc())
    return generate(seed, count);
  if (mode == "run") return run(argc - 2, argv + 2);
  std::fprintf(stderr,
               "usage: symbolize_bench gen SEED COUNT < nm-output\n"
               "       symbolize_bench run [--lines] [--no-inlines] ELF ADDRS [ELF ADDRS]...\n");
  return 2;
}
