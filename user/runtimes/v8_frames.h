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
#include <vector>

#include "flamegraph/profile.h"
#include "user/runtimes/process_memory.h"
#include "user/runtimes/process_table.h"
#include "user/runtimes/v8.h"

namespace ember::runtimes {

// What names a function.
struct V8Function {
  std::string name;    // "" for an anonymous one
  std::string script;  // the script's name (a path, node:fs), "" if it has none
  uint64_t script_object = 0;  // its Script (tagged), 0 if it has none
};

// The function of SharedFunctionInfo `shared` (a tagged pointer) in a
// process whose V8 is laid out as `l`, or why it cannot be read. The bytes
// read are the process's: anything may be in them.
std::expected<V8Function, std::string> read_v8_function(const V8Layout& l, uint64_t shared, const ReadMemory& read);

// A place in a JavaScript call chain: a function (SharedFunctionInfo) and
// the offset in its script of what it runs (-1: unknown).
struct V8Place {
  uint64_t shared = 0;
  int64_t script_offset = -1;
};

// Where a frame is, from its word and position word (bpf/v8.h; a pc
// offset already made to point into its call, not past it): its
// function's place, innermost first; an optimized frame's functions
// inlined into it come before it. Or why not.
std::expected<std::vector<V8Place>, std::string> read_v8_places(const V8Layout& l, uint64_t word, uint64_t position,
                                                                const ReadMemory& read);

// The line (from 1) of `script_offset` in Script `script` (tagged), or why
// not: from the line ends V8 keeps, or else its source's newlines.
std::expected<std::vector<uint32_t>, std::string> read_v8_line_ends(const V8Layout& l, uint64_t script,
                                                                    const ReadMemory& read);
int v8_line(const std::vector<uint32_t>& line_ends, int64_t script_offset);

class V8Frames {
 public:
  // `processes`: the walker's v8_processes. `lines`: frames name the line
  // running (--lines).
  V8Frames(ProcessTable processes, bool lines) : processes_table_(processes), lines_(lines) {}

  // Looks for V8 in process `pid`, whose mappings were just read (its
  // first sample, or an exec): the kernel names its JavaScript frames from now.
  void add_process(uint32_t pid);
  void remove_process(uint32_t pid);
  // The frames of `word` (EMBER_FRAME_V8) in a stack of `pid`, innermost
  // first: its function and those inlined into it. `position`: the word
  // after it (EMBER_FRAME_V8_BYTECODE or _PC, made to point into a call),
  // 0 if none.
  std::vector<flamegraph::Frame> frames(uint32_t pid, uint64_t word, uint64_t position);
  // A window ends: functions are read again when next met (V8's collector
  // moves and frees them).
  void next_window() {
    for (auto& [pid, p] : processes_) {
      p.functions.clear();
      p.line_ends.clear();
    }
  }

  struct Stats {
    uint64_t processes = 0;  // in which V8 was found (an exec counts once)
    uint64_t frames = 0;     // named
    uint64_t unnamed = 0;    // whose function could not be read
    uint64_t lines = 0;      // --lines: frames named with their line
    std::map<std::string, uint64_t> unlined;  // --lines: frames without, by why
    // Processes whose V8 cannot be read, by pid: why (their frames stay
    // V8's code addresses).
    std::map<uint32_t, std::string> refused;
    // --lines: processes whose frames' positions cannot be read, by pid: why.
    std::map<uint32_t, std::string> unpositioned;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Process {
    V8Process v8;
    std::unordered_map<uint64_t, std::optional<V8Function>> functions;  // by SharedFunctionInfo; none: unreadable
    std::unordered_map<uint64_t, std::expected<std::vector<uint32_t>, std::string>> line_ends;  // by Script
  };
  // The frame of a function at `script_offset`; none if unreadable.
  std::optional<flamegraph::Frame> function_frame(uint32_t pid, Process& p, uint64_t shared, int64_t script_offset,
                                                  bool positioned);
  ProcessTable processes_table_;
  bool lines_;
  std::unordered_map<uint32_t, Process> processes_;
  Stats stats_;
};

}  // namespace ember::runtimes
