// A profiling session: the loaded BPF programs, the targets, the JVMs'
// agents, the unwinder and the symbolizer, alive from start() to stop();
// cut() returns the profile of one window and starts the next without
// reloading anything. `ember record` is one window; the fleet agent many.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "flamegraph/profile.h"
#include "symbolizer/symbolizer.h"
#include "user/events/event.h"
#include "user/java/java.h"
#include "user/java/java_attach.h"
#include "user/java/jvm.h"
#include "user/runtimes/python_frames.h"
#include "user/runtimes/v8_frames.h"
#include "user/session/cgroup.h"
#include "user/session/collector.h"
#include "user/session/command.h"
#include "user/session/sampler.h"
#include "user/session/unwinder.h"

namespace ember {

struct SessionConfig {
  std::vector<std::string> events = {"cpu-clock"};  // one graph each
  events::Settings settings;
  // Targets: the whole host, unless pids, tids or a command are given.
  std::vector<std::string> command;  // run and profile this, with its children
  bool java_frame_pointers = false;  // add -XX:+PreserveFramePointer to JVMs the command starts
  std::vector<uint32_t> pids;
  std::vector<uint32_t> tids;
  std::vector<std::string> cgroups;  // only tasks in these cgroups (v2) and below them
  std::string comm;   // POSIX extended regex over process and thread names
  bool idle = false;  // samples of idle CPUs
  // Stacks and their names.
  bool thread_frames = false;
  bool pid_frames = false;
  bool kernel_only = false;
  bool user_only = false;
  bool lines = false;                // file:line in frame names
  bool inlines = true;               // inlined calls as frames
  // Addresses named as the stacks come (a pass a second, binaries read on
  // the symbolizer's loader thread), so that a recording's stop has
  // little left to do: for someone waiting on it. Without, each window's
  // addresses are named at its end, with less memory held meanwhile (a
  // whole host at 999 Hz: 84 MB of peak RSS rather than 97-103 MB).
  bool name_while_recording = true;
  uint32_t symbol_memory_mib = 512;  // what the symbolizer may hold (symbolizer::Options::set_memory_bound)
  std::string unwind = "auto";  // user stacks: auto, fp or cfi
  uint32_t unwind_memory_mib = 16;   // the kernel's unwind tables at most
  // Java.
  bool java = true;                   // attach the agent to JVMs in scope (whole host: also
                                      // those that start later, found every 2 s)
  std::vector<uint32_t> java_attach;  // attach only to these JVMs
  std::function<bool(pid_t)> java_allowed;  // which JVMs found on the host get the agent (none: all)
  double java_attach_timeout_s = java::kAttachTimeoutS;  // each wait of an attach: the JVM's socket, the agent's load
  // Each JVM's heap, GCs and allocation rate (jvm_summaries), from its
  // hsperfdata read at every poll: a third of an agent's CPU beside a few
  // JVMs, for a summary only `ember record` prints.
  bool jvm_telemetry = true;
  bool verbose = false;               // libbpf's own messages on stderr
  // How messages name the settings: record's options, the agent's keys.
  events::Spelling spelling = events::Spelling::Option;
};

// One event's graph of a window.
struct WindowGraph {
  const events::Event* event;
  EventView view;
  flamegraph::Profile profile;
  CollectorStats stats;
};

struct Window {
  double seconds = 0;            // its length
  uint64_t start_unix_ns = 0;
  std::vector<WindowGraph> graphs;  // one per event, in the order given
  SamplerCounters counters;         // over the window
  std::vector<std::string> java_notes;  // what the agents could not follow or lost
  std::vector<Collector::UnwindTally> unwind_tallies;
  CgroupTally cgroups;  // records per cgroup, with --cgroup
  // What the symbolizer met this window (unreadable files...), each told
  // once a session: a binary read again after eviction warns again.
  std::vector<std::string> symbol_warnings;
  std::vector<uint32_t> forgotten;  // processes gone for good: nothing of theirs comes any more
};

class Session {
 public:
  // Checks the configuration (events and their settings, the host's
  // limits): nothing is loaded yet. `warnings`: what the events will not
  // see, given even when the session is refused (they may say why).
  static std::expected<std::unique_ptr<Session>, std::string> create(SessionConfig config,
                                                                     std::vector<std::string>& warnings);
  ~Session();
  // Ends what the session holds outside this process: the JVMs' agents
  // are stopped and their directories removed. What is left is memory,
  // which a process about to exit may leave to the kernel (see
  // run_record). No recording after it.
  void close();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts the command held before its exec, loads and attaches the
  // programs, makes the targets' unwind tables and attaches the JVMs'
  // agents; `stopping` cuts the attaching short. Nothing is recorded
  // before arm(), which lets the command run (and fails if it cannot).
  std::expected<void, std::string> start(const std::function<bool()>& stopping);
  std::expected<void, std::string> arm();
  // The command ember started (config().command), followed with its
  // children; null without one.
  HeldCommand* command() { return command_ ? &*command_ : nullptr; }
  // Waits for records (up to `timeout_ms`) and takes them in, with the
  // JVMs' new code and events.
  void poll(int timeout_ms);
  // Each stack of a window's graph as it is added, with the index of its
  // graph and the process it came from (frames are ids in `profile`): the
  // fleet agent splits a window into profiles per service with it.
  using StackSink = std::function<void(size_t graph, uint32_t pid, const std::string& process_name,
                                       const flamegraph::Profile& profile,
                                       std::span<const flamegraph::FrameId> frames, uint64_t weight)>;
  // The profile of the window since the last cut (or arm()); `final`: the
  // session stops first, so what was in flight is in it.
  Window cut(bool final, const StackSink& each_stack = {});

  SamplerCounters counters() const { return sampler_->counters(); }  // since arm()
  int cpus() const { return cpus_; }
  bool kernel_symbols_hidden() { return !config_.user_only && symbolizer_.kernel_symbols_hidden(); }
  const events::Plan& plan() const { return plan_; }
  const SessionConfig& config() const { return config_; }
  uint32_t max_depth() const { return collector_opts_.max_depth; }
  // Problems worth telling before the recording: the agent's, the sampler's.
  std::vector<std::string> warnings() const;
  // ...and after it, once symbols were read (kptr_restrict, unreadable files).
  // The unwinder's tables, if user stacks are unwound by CFI.
  const Unwinder* unwinder() const { return unwinder_.get(); }
  // Python frames, named in stacks where the unwinder walks (not with fp).
  const runtimes::PythonFrames* python() const { return python_ ? &*python_ : nullptr; }
  // JavaScript frames, likewise.
  const runtimes::V8Frames* v8() const { return v8_ ? &*v8_ : nullptr; }
  const symbolizer::Symbolizer& symbolizer() const { return symbolizer_; }
  std::vector<Collector::JavaStream> java_streams() const { return collector_.java_streams(); }
  // Each JVM's heap, GCs and allocation rate since it was first seen.
  std::vector<std::pair<uint32_t, std::string>> jvm_summaries() const;

 private:
  Session(SessionConfig config, events::Plan plan, HostFacts host, std::optional<std::regex> comm,
          std::vector<CgroupTarget> cgroups);
  // Has the collector read the code maps of `agents`.
  void read_agents(std::vector<JavaSession::Agent> agents);
  void watch_jvms();
  // The JVMs in scope among `pids` (--comm, --cgroup, java_allowed).
  std::vector<pid_t> jvms_in_scope(std::vector<pid_t> pids) const;
  void attach_late_jvms();
  // The command's environment: JAVA_TOOL_OPTIONS loading the agent into
  // the JVMs it starts.
  std::expected<std::vector<std::string>, std::string> command_env();
  // start() but the command.
  std::expected<void, std::string> start_sampling(const std::function<bool()>& stopping);

  SessionConfig config_;
  events::Plan plan_;
  HostFacts host_;
  std::vector<CgroupTarget> cgroups_;
  CgroupTally cgroup_tally_;  // of the window now open
  // Hashes of the symbol warnings told; forgotten past kToldWarnings, so a
  // session through endless distinct binaries stays bounded.
  std::unordered_set<uint64_t> told_warnings_;
  static constexpr size_t kToldWarnings = 4096;
  std::vector<std::string> warnings_;
  CollectorOptions collector_opts_;
  symbolizer::Symbolizer symbolizer_;
  Collector collector_;
  std::optional<JavaSession> java_;
  std::unique_ptr<Unwinder> unwinder_;
  std::optional<runtimes::PythonFrames> python_;
  std::optional<runtimes::V8Frames> v8_;
  std::unique_ptr<Sampler> sampler_;
  std::optional<HeldCommand> command_;
  int cpus_ = 0;
  bool stopped_ = false;
  // The recording's start: live graphs (--live) span the recording so far.
  double start_s_ = 0;
  uint64_t start_unix_ns_ = 0;
  // The window now open: since when, and the counters at its start.
  double window_start_s_ = 0;
  uint64_t window_start_unix_ns_ = 0;
  SamplerCounters window_counters_;
  // Each JVM's telemetry, from its hsperfdata, read at every poll so each
  // GC is seen. A JVM that exited lets its file go and keeps its summary;
  // the summaries of the kEndedJvmsKept last to exit stay, so a session
  // through endless short-lived JVMs holds no more.
  struct Watched {
    std::optional<JvmWatch> watch;  // none: not yet, no hsperfdata (-XX:-UsePerfData), or ended
    // A JVM loads its agents before it makes its hsperfdata, and marks it
    // readable once created: one found by its agent is tried again every
    // kHsperfRetryS (each try reads its maps), for kHsperfWaitS.
    double next_try_s = 0;
    double give_up_s = 0;
    std::string ended_summary;      // the JVM exited: its summary stands
    uint64_t ended_order = 0;       // 1, 2, ... in the order they ended
  };
  std::map<uint32_t, Watched> jvm_watches_;
  uint64_t jvms_ended_ = 0;
  static constexpr size_t kEndedJvmsKept = 64;
  static constexpr double kHsperfWaitS = 10;
  static constexpr double kHsperfRetryS = 0.25;
  // The JVMs' counters are read every kWatchEveryS, not at every poll
  // (every 20 ms with JVMs): a dozen JVMs' 32 KB files parsed 50 times a
  // second were 6% of `ember record -a`'s CPU. GCs between two reads are
  // estimated (java::allocated_between).
  double next_watch_s_ = 0;
  static constexpr double kWatchEveryS = 0.1;
  // With name_while_recording: a naming pass of at most kNamingPass
  // every kNamingEveryS (a whole host's 30 s at 999 Hz: 78,000 addresses
  // of 69 processes, 0.5 s to name at the stop when all waited for it).
  double next_naming_s_ = 0;
  static constexpr double kNamingEveryS = 1;
  static constexpr std::chrono::milliseconds kNamingPass{100};
  java::JvmScanner jvm_scanner_;
  bool whole_host_ = false;  // no pids, tids or command: JVMs are found on the host
  double next_jvm_scan_s_ = 0;
};

}  // namespace ember
