// Parsers for the text files that describe a process's address space:
// /proc/PID/maps and the JIT symbol files /tmp/perf-PID.map; and when a
// process started, from /proc.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::symbolizer {

struct Mapping {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t offset = 0;          // file offset of `start`
  uint64_t dev = 0, inode = 0;  // identity of the file; inode 0 = anonymous
  bool executable = false;
  std::string path;             // as the process sees it; may end in " (deleted)"
};

// The text of a maps file; lines that do not parse are skipped.
std::vector<Mapping> parse_proc_maps(std::string_view text);

// The mappings /proc/PID/maps (at `path`) lists, none if it cannot be read
// (the process is gone). Read with read(2), not a stream: a host whose
// processes come and go by the thousand a minute has each one's read, and
// constructing a std::ifstream cost more than parsing what it read.
std::optional<std::vector<Mapping>> read_proc_maps(const std::string& path);

// The vDSO this process maps: every process of this kernel maps the same
// image (the same for 64-bit processes). Empty if it cannot be found.
std::string_view own_vdso_image();

// When process `pid` started, "1764571212.34" (Unix seconds, to the
// clock tick: its /proc/PID/stat start after the boot time of /proc/stat):
// with the pid, what tells a process from a later one given the same pid.
// Empty if it is gone.
std::string process_start_text(uint32_t pid);

struct PerfMapEntry {
  uint64_t start = 0, size = 0;
  std::string name;
};

// "START SIZE name" in hex, one per line; later entries for the same range
// win (JITs reuse code addresses). Garbage lines are skipped and counted.
struct PerfMap {
  std::vector<PerfMapEntry> entries;  // sorted by start
  size_t bad_lines = 0;
  const PerfMapEntry* find(uint64_t address) const;
};
PerfMap parse_perf_map(std::istream& in);

}  // namespace ember::symbolizer
