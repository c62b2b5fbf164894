// Python frames in user stacks: tells the kernel's walker
// (bpf/python.bpf.c) which processes run CPython and how to read them, and
// names the frames it puts in stacks (EMBER_FRAME_PYTHON words) by their
// code objects, read from the process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "flamegraph/profile.h"
#include "user/runtimes/process_memory.h"
#include "user/runtimes/process_table.h"
#include "user/runtimes/python.h"

namespace ember::runtimes {

// What names a code object.
struct PythonCode {
  std::string qualname;          // co_qualname (3.11+), co_name before
  std::string file;              // co_filename
  int32_t first_line = 0;        // co_firstlineno
  int32_t first_traceable = -1;  // 3.11+: instructions before it set the frame up
  std::string line_table;        // co_lnotab or co_linetable, when lines are wanted
};

// The code object at `address` of a process running CPython of layout `l`
// (whose code objects have type `code_type`), or why it cannot be read.
// The bytes read are the process's: anything may be in them.
std::expected<PythonCode, std::string> read_python_code(const ember_python_layout& l, uint64_t code_type,
                                                        uint64_t address, const ReadMemory& read, bool lines);

// The line of the instruction at `index` (in 2-byte code units) of a code
// object of CPython `version` (major << 8 | minor) whose line table is
// `table`; 0 where the table gives it none.
int python_line(uint16_t version, std::string_view table, int first_line, int64_t index);

class PythonFrames {
 public:
  // `processes`: the walker's python_processes. `lines`: frames name the
  // line running (--lines).
  PythonFrames(ProcessTable processes, bool lines) : processes_table_(processes), lines_(lines) {}

  // Looks for CPython in process `pid`, whose mappings were just read (its
  // first sample, or an exec): the kernel walks its Python frames from now.
  void add_process(uint32_t pid);
  void remove_process(uint32_t pid);
  // The frame of `word` (EMBER_FRAME_PYTHON) in a stack of `pid`; none
  // for a frame CPython itself hides (one that has not started running).
  std::optional<flamegraph::Frame> frame(uint32_t pid, uint64_t word);
  // A window ends: the code objects read are read again when next met (a
  // session of weeks meets code without end, and a freed one's address is
  // reused by the next).
  void next_window() {
    for (auto& [pid, p] : processes_) p.code.clear();
  }

  struct Stats {
    uint64_t processes = 0;        // in which CPython was found (an exec counts once)
    uint64_t frames = 0;           // named
    uint64_t unnamed = 0;          // whose code object could not be read
    // Processes whose CPython cannot be read, by pid: why (its frames stay
    // the interpreter's native ones).
    std::map<uint32_t, std::string> refused;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Process {
    PythonProcess python;
    std::unordered_map<uint64_t, std::optional<PythonCode>> code;  // by address; none: unreadable
  };
  ProcessTable processes_table_;
  bool lines_;
  std::unordered_map<uint32_t, Process> processes_;
  Stats stats_;
};

}  // namespace ember::runtimes
