// Turns the raw sample stream into a Profile: deduplicates stacks as they
// arrive (the hot path), snapshots each new process for the symbolizer,
// and at the end names every address once and builds the frames.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include <linux/types.h>  // __u32 and friends for profile.h
extern "C" {
#include "profile.h"
}
#include "flamegraph/profile.h"
#include "symbolizer/symbolizer.h"

namespace ember {

struct CollectorOptions {
  bool thread_frames = false;   // [name tid=N] under the process frame
  bool pid_frames = false;      // root frame "comm (pid)" instead of "comm"
  bool kernel_only = false;
  bool user_only = false;
  std::optional<std::regex> comm;  // keep processes or threads whose name matches
  uint32_t max_depth = 127;        // effective stack depth limit, for truncation counts
};

struct CollectorStats {
  uint64_t samples = 0;         // kept in the profile
  uint64_t comm_filtered = 0;   // dropped by --comm
  uint64_t truncated = 0;       // a stack reached max_depth
  uint64_t unknown_addresses = 0;  // distinct addresses left unnamed
  uint64_t unknown_samples = 0;    // samples with at least one unnamed frame
  uint64_t processes = 0;
  uint64_t unique_stacks = 0;
};

class Collector {
 public:
  Collector(CollectorOptions options, symbolizer::Symbolizer& symbolizer);
  void add(const ember_sample& sample);
  // Re-reads the mappings of live processes (code loaded since their first sample).
  void refresh_processes();
  flamegraph::Profile build();
  const CollectorStats& stats() const { return stats_; }

 private:
  struct Key {
    uint32_t pid, tid, process_name, thread_name, ustack, kstack;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  // Looks strings up by string_view: no allocation for ones already seen,
  // which is nearly every stack and name on the per-sample path.
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using InternMap = std::unordered_map<std::string, uint32_t, ViewHash, std::equal_to<>>;
  // Unique ip sequences (leaf first), interned.
  class StackTable {
   public:
    uint32_t intern(const __u64* ips, size_t n);
    std::span<const uint64_t> get(uint32_t id) const;

   private:
    InternMap ids_;
    std::vector<const std::string*> by_id_;
  };

  CollectorOptions options_;
  symbolizer::Symbolizer& symbolizer_;
  StackTable ustacks_, kstacks_;
  std::unordered_map<Key, uint64_t, KeyHash> counts_;
  // Names as sampled: a process that execs changes its name mid-recording.
  uint32_t name_id(const char (&comm)[EMBER_COMM_LEN]);
  InternMap name_ids_;
  std::vector<std::string> names_;
  std::vector<int8_t> comm_matches_;  // by name id: -1 unknown, else the --comm verdict
  std::unordered_map<uint32_t, uint32_t> process_name_;  // pid -> last name id seen
  CollectorStats stats_;
};

}  // namespace ember
