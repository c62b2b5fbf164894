// Finds the debug info of a binary the way distributions ship it. The order
// (first hit wins), as documented in README.md:
//   1. the binary itself, when it carries DWARF;
//   2. /usr/lib/debug/.build-id/xx/rest.debug (by GNU build-id);
//   3. .gnu_debuglink: next to the binary, in its .debug/, and under
//      /usr/lib/debug/<its directory>;
//   4. debuginfod, when DEBUGINFOD_URLS is set (its cache honoured);
//   5. MiniDebugInfo (.gnu_debugdata): a symbol table only, no DWARF.
// A candidate counts only if its build-id (or, without one, its debuglink
// CRC) matches the binary: a stale debug file names the wrong functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symbolizer/elf_symbols.h"

namespace ember::symbolizer {

struct DebugSearch {
  // Where the process sees "/" (e.g. /proc/PID/root): debug files installed
  // in a container are looked up there first, then on the host.
  std::string process_root;
  std::vector<std::string> debug_dirs = {"/usr/lib/debug"};
  // Total time debuginfod may take over a whole run, so an unreachable or
  // stalled server cannot hold up a report; DEBUGINFOD_TIMEOUT (seconds)
  // sets it instead when given.
  std::chrono::milliseconds debuginfod_budget{10'000};
};

struct DebugFile {
  int fd = -1;  // owned
  std::string path;
  std::string found_by;  // "build-id", "debuglink", "debuginfod"
  std::unique_ptr<ElfSymbols> elf;
  DebugFile() = default;
  DebugFile(DebugFile&&) noexcept;
  DebugFile& operator=(DebugFile&&) noexcept;
  ~DebugFile();
};

class DebugFinder {
 public:
  explicit DebugFinder(DebugSearch search = {});
  ~DebugFinder();
  DebugFinder(const DebugFinder&) = delete;
  DebugFinder& operator=(const DebugFinder&) = delete;

  // A separate file with the DWARF (and full symbol table) of `binary`,
  // which lives at `path` as the process sees it. `root` is the process's
  // root directory ("" for the host). Problems go to `warnings`.
  std::optional<DebugFile> find(const ElfSymbols& binary, const std::string& path, const std::string& root,
                                std::vector<std::string>& warnings);

  // The symbol table hidden in .gnu_debugdata (xz), if the binary has one.
  static std::unique_ptr<ElfSymbols> minidebuginfo(const ElfSymbols& binary, const std::string& name,
                                                   std::vector<std::string>& warnings);

 private:
  std::optional<DebugFile> open_matching(const std::string& path, const ElfSymbols& binary, const char* found_by);
  std::optional<DebugFile> from_debuginfod(const ElfSymbols& binary, const std::string& name,
                                           std::vector<std::string>& warnings);

  DebugSearch search_;
  void* debuginfod_ = nullptr;  // debuginfod_client*, made on first use
  bool debuginfod_off_ = false;  // no DEBUGINFOD_URLS, or the budget is spent
  std::chrono::steady_clock::duration debuginfod_spent_{};
};

// The CRC32 that .gnu_debuglink records (zlib's polynomial) of a file.
std::optional<uint32_t> file_crc32(int fd);

}  // namespace ember::symbolizer
