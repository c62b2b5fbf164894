// JavaScript frames in user stacks: tells the kernel's walker
// (bpf/v8.bpf.c) which processes run V8 and how to read their frames, and
// names the frames it puts in stacks (EMBER_FRAME_V8 words) by their
// SharedFunctionInfo, read from the process.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "flamegraph/profile.h"
#include "user/runtimes/process_memory.h"
#include "user/runtimes/v8.h"

namespace ember::runtimes {

// What names a function.
struct V8Function {
  std::string name;    // "" for an anonymous one
  std::string script;  // the script's name (a path, node:fs), "" if it has none
};

// The function of SharedFunctionInfo `shared` (a tagged pointer) in a
// process whose V8 is laid out as `l`, or why it cannot be read. The bytes
// read are the process's: anything may be in them.
std::expected<V8Function, std::string> read_v8_function(const V8Layout& l, uint64_t shared, const ReadMemory& read);

class V8Frames {
 public:
  // `processes_fd`: the walker's v8_processes map.
  explicit V8Frames(int processes_fd) : processes_fd_(processes_fd) {}

  // Looks for V8 in process `pid`, whose mappings were just read (its
  // first sample, or an exec): the kernel names its JavaScript frames from now.
  void add_process(uint32_t pid);
  void remove_process(uint32_t pid);
  // The frame of `word` (EMBER_FRAME_V8) in a stack of `pid`.
  flamegraph::Frame frame(uint32_t pid, uint64_t word);
  // A window ends: functions are read again when next met (V8's collector
  // moves and frees them).
  void next_window() {
    for (auto& [pid, p] : processes_) p.functions.clear();
  }

  struct Stats {
    uint64_t processes = 0;  // in which V8 was found (an exec counts once)
    uint64_t frames = 0;     // named
    uint64_t unnamed = 0;    // whose function could not be read
    // Processes whose V8 cannot be read, by pid: why (their frames stay
    // V8's code addresses).
    std::map<uint32_t, std::string> refused;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Process {
    V8Process v8;
    std::unordered_map<uint64_t, std::optional<flamegraph::Frame>> functions;  // by word; none: unreadable
  };
  int processes_fd_;
  std::unordered_map<uint32_t, Process> processes_;
  Stats stats_;
};

}  // namespace ember::runtimes
