// Addresses to frames, in batches: one answer per address. Kernel
// addresses through /proc/kallsyms; user addresses through each process's
// mappings, the ELF symbol tables of the mapped files, and perf-PID.map
// files written by JITs.
#pragma once

#include <cstdint>
#include <expected>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "flamegraph/profile.h"
#include "symbolizer/elf_symbols.h"
#include "symbolizer/kallsyms.h"
#include "symbolizer/proc_maps.h"

namespace ember::symbolizer {

struct Options {
  std::string proc_root = "/proc";               // where /proc/PID/{maps,root,map_files} live
  std::string kallsyms_path = "/proc/kallsyms";  // read on the first kernel lookup
  std::string perf_map_dir = "/tmp";             // perf-PID.map files
};

struct Symbol {
  flamegraph::Frame frame;
  bool known = true;  // false: `frame` is a placeholder (module+offset, [unknown])
};

class Symbolizer {
 public:
  explicit Symbolizer(Options options = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Records the process's mappings and opens each mapped executable, so its
  // addresses can still be named after it exits or its files are replaced.
  // Calling it again merges in mappings added since. False if the process
  // is gone.
  bool snapshot_process(uint32_t pid);
  bool has_process(uint32_t pid) const { return processes_.count(pid) != 0; }
  // Whether the last snapshot of `pid` maps `address` (else the process
  // mapped code since, e.g. a dlopen'ed libjvm.so: snapshot it again).
  bool maps(uint32_t pid, uint64_t address) const;

  // `addresses` are instruction addresses; pass return addresses minus one.
  std::vector<Symbol> symbolize_user(uint32_t pid, std::span<const uint64_t> addresses);
  std::vector<Symbol> symbolize_kernel(std::span<const uint64_t> addresses);

  // Starts reading kallsyms on another thread (about 50 ms of kernel time
  // formatting 200,000 lines), so the report after a recording need not wait.
  void prefetch_kernel();

  // Problems worth telling the user once (kptr_restrict, unreadable files).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Whether kernel symbols are hidden by kernel.kptr_restrict (loads kallsyms).
  bool kernel_symbols_hidden();

 private:
  struct MappedFile;
  struct Process {
    std::vector<Mapping> mappings;  // sorted by start, non-overlapping
    std::optional<PerfMap> perf_map;  // read on first use
  };
  MappedFile* file_for(uint32_t pid, const Mapping& m);
  Symbol symbolize_in_file(MappedFile& file, const Mapping& m, uint64_t address);
  const PerfMap& perf_map(uint32_t pid, Process& p);
  const KernelSymbols* kernel();

  Options options_;
  std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<MappedFile>> files_;  // by (dev, inode)
  std::unordered_map<uint32_t, Process> processes_;
  std::optional<std::expected<KernelSymbols, std::string>> kernel_;
  std::future<std::expected<KernelSymbols, std::string>> kernel_loading_;
  std::vector<std::string> warnings_;
};

}  // namespace ember::symbolizer
