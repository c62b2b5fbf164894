// `ember record`: sample stacks, symbolize, write a flamegraph or folded file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// The events `ember record -e` takes, in the order --help lists them.
// plan_events (record.cpp) accepts exactly these.
struct RecordEventDoc {
  std::string_view name;
  std::string_view what;  // for --help
};
inline constexpr RecordEventDoc kRecordEvents[] = {
    {"cpu-clock", "CPU time from a software timer that works everywhere (the default, also spelt 'cpu')"},
    {"cycles", "CPU time from the hardware cycle counter (needs a PMU, absent in most VMs)"},
    {"offcpu", "time blocked, in ns"},
    {"wall", "time on and off CPU, in ns"},
    {"lock", "time waiting for mutexes and Java monitors, in ns"},
    {"malloc", "bytes allocated by C/C++ code"},
    {"alloc", "bytes allocated by Java code, from ember's agent"},
};

struct RecordOptions {
  std::vector<std::string> events = {"cpu-clock"};  // one graph each
  std::string min_block = "1us";  // offcpu: shorter blocks are left out
  uint64_t alloc_interval = 512 * 1024;  // malloc: a sample per this many bytes
  bool live = false;                     // malloc: only allocations not freed by the end
  bool waker = false;                    // offcpu, lock: each block with its waker's stacks
  uint32_t frequency = 99;
  bool all = false;              // -a: explicit, and exclusive with any narrower scope
  std::vector<uint32_t> pids;
  std::vector<uint32_t> tids;
  std::string comm;              // POSIX extended regex over process and thread names
  std::vector<std::string> cgroups;  // only tasks in these cgroups (v2) and below them
  double duration = 0;           // seconds; 0 = until Ctrl-C, SIGTERM or the command exits
  std::string output = "ember.html";
  bool thread_frames = false;
  bool pid_frames = false;
  bool kernel_only = false;
  bool user_only = false;
  bool idle = false;
  bool verbose = false;
  bool lines = false;                // file:line in frame names
  bool inlines = true;               // inlined calls as frames
  uint32_t symbol_memory_mib = 256;  // DWARF the symbolizer may hold
  std::string unwind = "auto";       // user stacks: auto, fp or cfi (--unwind)
  uint32_t unwind_memory_mib = 16;   // the kernel's unwind tables at most
  std::vector<std::string> command;  // run and profile this, with its children
  bool java = true;                  // attach the agent to JVMs in scope
  std::vector<uint32_t> java_attach; // attach only to these JVMs
  bool java_frame_pointers = false;  // add -XX:+PreserveFramePointer to JVMs the command starts
  int progress_fd = -1;              // a line "SECONDS SAMPLES LOST" here 4 times a second (ember serve)
};

// Returns the process exit code: the command's own with `-- CMD`.
int run_record(const RecordOptions& options);

// A --min-block value: "10ms", "500us", "2s", "100" (microseconds) ->
// nanoseconds; nothing if it is not a duration.
std::optional<uint64_t> parse_duration_ns(const std::string& text);

}  // namespace ember
