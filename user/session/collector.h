// Turns the raw sample stream into a Profile: deduplicates stacks as they
// arrive (the hot path), snapshots each new process for the symbolizer,
// names every address once (as the stacks come: AddressNames), and at the
// end builds the frames.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <algorithm>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <linux/types.h>  // __u32 and friends for profile.h
extern "C" {
#include "profile.h"
#include "python.h"
#include "v8.h"
#include "unwind.h"
}
#include "flamegraph/profile.h"
#include "symbolizer/jit_map.h"
#include "symbolizer/symbolizer.h"
#include "user/events/view.h"
#include "user/java/agent_dir.h"
#include "user/java/java_events.h"
#include "user/session/address_names.h"

namespace ember {

struct CollectorOptions {
  std::vector<EventView> views = {EventView{}};
  bool thread_frames = false;   // [name tid=N] under the process frame
  bool pid_frames = false;      // root frame "comm (pid)" instead of "comm"
  bool kernel_only = false;
  bool user_only = false;
  std::optional<std::regex> comm;  // keep processes or threads whose name matches
  // `-- CMD`: the name ember's child carries until it execs the command.
  // Its records until then (ember's own code) are left out.
  std::string before_exec_name;
  uint32_t max_depth = 127;        // effective stack depth limit, for truncation counts
  // Records kept for the graphs' timelines (24 bytes each): past this,
  // their times are made coarser (see Collector::coarsen_records).
  size_t max_timeline_records = 4 << 20;
  // The agents' Java events (alloc, lock) read from their streams. Without
  // any graph of them, their lines are not kept: the method names alone
  // were 7 of an agent's 56 MB live, beside JVMs it only sampled.
  bool java_events = false;
};

struct CollectorStats {
  uint64_t samples = 0;         // records in the last graph built (CPU samples, off-CPU intervals)
  uint64_t comm_filtered = 0;   // dropped by --comm
  uint64_t truncated = 0;       // a stack reached max_depth
  uint64_t unknown_addresses = 0;  // distinct addresses left unnamed (in the last graph built)
  uint64_t unknown_samples = 0;    // its records with at least one unnamed frame
  uint64_t jvms = 0;             // JVMs whose code maps were read
  uint64_t jit_frames = 0;       // user frames named through a JVM's code map
  uint64_t interpreted_frames = 0, unnamed_interpreted_frames = 0;  // by Method* (EMBER_FRAME_METHOD)
  uint64_t broken_java_stacks = 0;  // cut at a JIT frame: no -XX:+PreserveFramePointer
  uint64_t bad_jit_map_lines = 0;   // code-map lines that did not parse (and were skipped)
  uint64_t java_streams_cut = 0;  // JVM streams whose next file (an R line's) could not be opened
  uint64_t exited_processes = 0;    // processes whose exit-time mappings were taken in
  // Views with waker: the last graph's blocks by what woke them.
  uint64_t woken_by_thread = 0;
  uint64_t woken_by_interrupt = 0;
  uint64_t waker_unseen = 0;        // no wakeup seen (or its stacks not stored)
};

class Collector {
 public:
  Collector(CollectorOptions options, symbolizer::Symbolizer& symbolizer);
  void add(const ember_sample& sample);
  // Re-reads the mappings of live processes (code loaded since their first sample).
  void refresh_processes();
  // Called with each process whose mappings were just read (snapshotted).
  void on_snapshot(std::function<void(uint32_t pid)> listener) { on_snapshot_ = std::move(listener); }
  // Unwinds a user stack the kernel copied for lack of tables (a process's
  // first moments): Unwinder::unwind_copy, called after on_snapshot.
  using CopyUnwinder = std::function<std::pair<size_t, uint8_t>(uint32_t pid, std::span<const __u64> copy, __u64* out)>;
  void on_copied_stack(CopyUnwinder unwinder) { copy_unwinder_ = std::move(unwinder); }
  // Called with a JVM's live code whenever it changed (update_jvms), for
  // the kernel's unwinder: then compiled frames whose size was published
  // are taken as unwound, with or without frame pointers.
  using JitListener = std::function<void(uint32_t pid, const std::vector<symbolizer::JitMap::Code>& code)>;
  void on_jit_code(JitListener listener) { on_jit_code_ = std::move(listener); }
  // Names a runtime's frame (bpf/python.h's EMBER_FRAME_PYTHON words,
  // bpf/v8.h's EMBER_FRAME_V8) in a stack of `pid`: its frames, innermost
  // first, none for a frame the runtime itself hides. `position`: the
  // word after it that says where it runs (EMBER_FRAME_V8_BYTECODE, _PC,
  // made to point into a call), 0 if none.
  using RuntimeNamer =
      std::function<std::vector<flamegraph::Frame>(uint32_t pid, uint64_t word, uint64_t position)>;
  void on_python_frame(RuntimeNamer namer) { python_namer_ = std::move(namer); }
  void on_v8_frame(RuntimeNamer namer) { v8_namer_ = std::move(namer); }
  // Takes in a mapping that a sampled process had as it exited.
  void add_exit_mapping(const ember_mapping& mapping);
  // Takes in the records whose user stack is a copy waiting for its
  // process's mappings: those of processes that exited since (their
  // mappings came as they exited), or all of them if final.
  void take_in_copies(bool final);

  // Names the JIT code of JVM `pid` through the code map its agent writes,
  // read from `jitmap_fd` (the collector closes it), the file `name`, and
  // the files it goes on in through `files`. Without frame pointers in JIT
  // code (no -XX:+PreserveFramePointer) stacks are cut above the first JIT
  // frame.
  void watch_jvm(uint32_t pid, int jitmap_fd, std::string name, StreamFiles files, bool frame_pointers);
  // Reads what the agents appended, then takes in the JVM samples held back
  // until the code they ran in was surely published (all of them if final).
  void update_jvms(bool final);
  // Names the addresses of the stacks taken in so far, until `until` (a
  // pass while recording: build() then names only what came since).
  void name_addresses(std::chrono::steady_clock::time_point until) { addresses_.name_queued(false, until); }
  // Lets go of the JVMs' streams: their files closed, their directories
  // removed once no JVM reads from them. Nothing is read from them after.
  void close_streams();
  // For views with live_only, before build(): counts the allocations held
  // so far whose ids are among `ids` (the sampled allocations not freed by
  // `end_ns`, CLOCK_MONOTONIC, the records' clock) and at least their
  // view's min_age_ns old then, or at their process's end if it is among
  // `exits` (pid -> when it ended); forgets the others, freed for good.
  // The live ones are held on into the next window, as long as their
  // process lives: a window's live graph is the recording's so far, and
  // what a process never freed is in the window of its end alone.
  void count_live_allocations(const std::vector<uint32_t>& ids, uint64_t end_ns,
                              const std::unordered_map<uint32_t, uint64_t>& exits);
  // Each stack of a graph as it is added, with the process it came from
  // (its frames are ids in `profile`): a caller splits one build, one
  // naming of the window's addresses, into graphs per service.
  using StackSink = std::function<void(uint32_t pid, const std::string& process_name,
                                       const flamegraph::Profile& profile, std::span<const flamegraph::FrameId> frames,
                                       uint64_t weight)>;
  // The graph of options.views[view]; each of its stacks also to `each_stack`.
  // Its timeline counts from `start_ns` (CLOCK_MONOTONIC, the records' clock).
  flamegraph::Profile build(size_t view = 0, const StackSink& each_stack = {}, uint64_t start_ns = 0);
  // Starts the next window once its graphs are built: the records taken in
  // so far, their stacks, names and counts are dropped. Processes seen to
  // exit before the window now ending began are forgotten and returned
  // (the symbolizer and the unwinder forget them too): a window of grace
  // for records that arrive after their process's exit.
  std::vector<uint32_t> next_window();
  const CollectorStats& stats() const { return stats_; }
  // How the user stacks of a process ended (EMBER_STOP_*), over every record.
  struct UnwindTally {
    uint32_t pid = 0;
    std::string name;
    uint64_t stacks = 0;  // user stacks (kernel threads have none)
    uint64_t stops[EMBER_STOP_KINDS] = {};
  };
  // Processes with user stacks, most stacks first.
  std::vector<UnwindTally> unwind_tallies() const;
  // The JVMs whose code maps are read (attached, or started by the command).
  std::vector<uint32_t> jvm_pids() const;
  // What each JVM's agent reported besides code (allocations, contention),
  // with the JVM's process name; after update_jvms(true).
  struct JavaStream {
    uint32_t pid;
    std::string name;
    const java::JavaEvents* events;
    std::string frames_unavailable;  // see JitMap::frames_unavailable
    std::string interpreter_methods_unavailable;  // see JitMap::interpreter_methods_unavailable
    std::string started;  // when the JVM started (symbolizer::process_start_text), "" if unknown
  };
  std::vector<JavaStream> java_streams() const;

 private:
  struct Key {
    uint32_t view, offcpu, pid, tid, process_name, thread_name, ustack, kstack;
    // For views with waker (zero otherwise): EMBER_WAKER_*, and who it was.
    uint32_t waker = 0, waker_pid = 0, waker_tid = 0, waker_process_name = 0, waker_thread_name = 0;
    uint32_t waker_ustack = 0, waker_kstack = 0;
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
  // Unique ip sequences (leaf first), interned: one arena, found by content.
  class StackTable {
   public:
    StackTable() : ids_(0, Hash{this}, Equal{this}) {}
    StackTable(const StackTable&) = delete;
    uint32_t intern(std::span<const uint64_t> ips);
    void clear() {
      ids_.clear();
      arena_.clear();
      spans_.clear();
    }
    std::span<const uint64_t> get(uint32_t id) const {
      return {arena_.data() + spans_[id].first, spans_[id].second};
    }

   private:
    using Ips = std::span<const uint64_t>;
    struct Hash {
      using is_transparent = void;
      const StackTable* table;
      size_t operator()(Ips ips) const;
      size_t operator()(uint32_t id) const { return (*this)(table->get(id)); }
    };
    struct Equal {
      using is_transparent = void;
      const StackTable* table;
      Ips ips(Ips s) const { return s; }
      Ips ips(uint32_t id) const { return table->get(id); }
      bool operator()(auto a, auto b) const { return std::ranges::equal(ips(a), ips(b)); }
    };
    std::vector<uint64_t> arena_;
    std::vector<std::pair<size_t, size_t>> spans_;  // by id: offset, length
    std::unordered_set<uint32_t, Hash, Equal> ids_;
  };

  // A JVM's samples wait here ~0.3 s: JDK 17 publishes compiled methods from
  // its service thread, a little after they start running.
  struct LocationHash {
    size_t operator()(const symbolizer::JitMap::Location& l) const;
  };
  struct Jvm {
    int fd = -1;
    std::string file;  // the stream's file fd reads
    StreamFiles files;
    bool frame_pointers = true;
    std::string started;  // see JavaStream
    symbolizer::JitMap map;
    java::JavaEvents events;  // allocation samples, monitor contention (same stream)
    uint64_t code_version = 0;      // of `map`, as last given to on_jit_code
    std::deque<std::vector<uint8_t>> held;  // raw ember_sample records
    std::unordered_map<symbolizer::JitMap::Location, uint32_t, LocationHash> tokens;
    std::unordered_map<uint32_t, uint32_t> method_tokens;  // interpreted frames: method id -> token
    Jvm() = default;
    Jvm(const Jvm&) = delete;
    ~Jvm();
  };
  // Where a wakeup ran, from the waker's kernel stack (`name` of its frame
  // i, leaf first); `frames`: how many of them are the waker's.
  enum class WakeContext { Task, Hardirq, Softirq };
  struct Wakeup {
    WakeContext context = WakeContext::Task;
    size_t frames = 0;
  };
  void add_fixed_frames();
  // Feeds what the agent appended to the map and the events, following the
  // stream into the files it goes on in.
  void read_stream(Jvm& jvm);
  static Wakeup classify_wakeup(size_t depth, const std::function<const std::string&(size_t)>& name);
  // Where the wakeup of a waker's kernel stack (kstacks_ id) ran
  // (classify_wakeup), remembered by stack; reads kallsyms if not yet read.
  const Wakeup& wakeup(uint32_t waker_kstack);
  // Takes in a record whose JIT code, if any, is published by now.
  // `final`: no later chance for a copied stack (see take_in_copies).
  void add_now(const ember_sample& sample, bool final = false);
  // A user stack as the kernel sent it (`ips`, ending for `stop`), or as
  // unwound here if it is a copy: into `out`; the stop updated.
  std::span<const __u64> user_ips(uint32_t pid, const char (&process_comm)[EMBER_COMM_LEN], std::span<const __u64> ips,
                                  uint64_t time_ns, uint8_t& stop, __u64* out);
  // `ustack`, `waker_ustack`: the user stacks, JIT addresses already
  // replaced by tokens; `ustop`, `waker_ustop`: why they end; `waker_kstack`:
  // the waker's kernel stack, interned (with waker stacks only).
  void add_resolved(const ember_sample& sample, std::span<const uint64_t> ustack, uint8_t ustop,
                    std::span<const uint64_t> waker_ustack, uint8_t waker_ustop, uint32_t waker_kstack);
  // A kernel stack of a record, interned in kstacks_.
  uint32_t intern_kstack(const __u64* ips, size_t n);
  // The user stack `ips` of process `pid` at `time_ns` into `out` (room for
  // one more frame than `ips`); returns its length.
  size_t user_stack(uint32_t pid, std::span<const __u64> ips, uint64_t time_ns, uint64_t* out);
  uint32_t jit_token(Jvm& jvm, const symbolizer::JitMap::Location& at);
  // The frame of an interpreted method by its Method* (EMBER_FRAME_METHOD).
  uint32_t interpreted_token(Jvm* jvm, uint64_t method_pointer);
  // The frame of a runtime's frame word of `pid`; kHiddenToken for none.
  uint32_t runtime_token(uint32_t pid, uint64_t word, uint64_t position);
  // Reads the mappings of process `pid` again, for the symbolizer and the
  // unwinder; whether the unwinder has them.
  bool snapshot(uint32_t pid);
  // Snapshots the mappings of process `pid` (named `name`) as needed to name
  // `ustack`, taken at `time_ns`; `stale`: the unwinder met a frame outside
  // the mappings it was given. Whether it took one.
  bool note_process(uint32_t pid, uint32_t name, std::span<const uint64_t> ustack, uint64_t time_ns,
                    bool stale = false);
  // Whether a user stack of `frames` that ended for `stop` was cut at the depth limit.
  bool user_truncated(uint32_t frames, uint8_t stop) const;
  void count_unwind(uint32_t pid, uint32_t name, uint8_t stop);

  CollectorOptions options_;
  std::unordered_map<uint32_t, Jvm> jvms_;
  // User stack entries with the top bit set are tokens for JIT frames, not
  // addresses (user addresses never have it): index into jit_frames_.
  std::vector<std::vector<flamegraph::Frame>> jit_frames_;  // innermost first
  symbolizer::Symbolizer& symbolizer_;
  StackTable ustacks_, kstacks_;
  AddressNames addresses_;  // of every stack in counts_
  // Queues the addresses of a new entry of counts_ for naming.
  void queue_addresses(const Key& key);
  std::unordered_map<uint32_t, Wakeup> wakeups_;  // wakeup()'s, by waker kernel stack
  const uint32_t self_pid_;  // ember's own process
  struct Weight {
    uint64_t total = 0, records = 0;
    uint32_t stack = flamegraph::Profile::kNoStack;  // in the graph being built
  };
  std::unordered_map<Key, Weight, KeyHash> counts_;
  // Each record as counted, for the graphs' timelines (an entry of counts_
  // stays where it is as the map grows).
  struct Record {
    uint64_t time_ns, weight;
    const std::pair<const Key, Weight>* count;
  };
  std::vector<Record> records_;
  uint64_t records_step_ns_ = 0;  // how precise their times are: 0 exact, else bucket starts
  // Rounds the records' times down to a coarser step and merges those of
  // one entry and time, until they fill half of max_timeline_records: a
  // whole host at 999 Hz on 64 CPUs takes 64,000 records a second.
  void coarsen_records();
  // Counts a record's weight taken at `time_ns`, or, for time off CPU
  // (`spread`), over the `weight` ns from `time_ns` on.
  void count(const Key& key, uint64_t weight, uint64_t time_ns, bool spread = false);
  struct HeldAllocation {
    Key key;
    uint64_t bytes;
    uint32_t id;
    uint64_t time_ns;
  };
  std::vector<HeldAllocation> held_allocations_;  // live_only views, until freed
  // The held allocations on their way to the next window, with each
  // stack they use once, by its old id, out of the tables next_window clears.
  struct CarriedAllocations {
    std::vector<HeldAllocation> held;
    std::unordered_map<uint32_t, std::vector<uint64_t>> ustacks, kstacks;
  };
  // The held allocations of processes still alive, taken out of the window.
  CarriedAllocations take_held_allocations();
  // Holds them again in the new window's tables, their names and JIT
  // tokens (the old window's `names` and `jit_frames`) interned afresh.
  void hold_again(CarriedAllocations carried, const std::vector<std::string>& names,
                  const std::vector<std::vector<flamegraph::Frame>>& jit_frames);
  // Names as sampled: a process that execs changes its name mid-recording.
  uint32_t name_id(std::string_view name);
  uint32_t name_id(const char (&comm)[EMBER_COMM_LEN]) { return name_id({comm, strnlen(comm, EMBER_COMM_LEN)}); }
  InternMap name_ids_;
  std::vector<std::string> names_;
  std::vector<int8_t> comm_matches_;  // by name id: the --comm verdict (1 without --comm)
  std::unordered_map<uint32_t, uint32_t> process_name_;  // pid -> last name id seen
  struct Snapshots {
    uint64_t read_ns = 0;  // when the last was read (monotonic)
    uint64_t next_ns = 0;  // the rate limit's: when the next is due
  };
  std::unordered_map<uint32_t, Snapshots> snapshots_;  // by pid
  std::unordered_set<uint32_t> exited_;  // pids whose exit-time mappings came in
  std::unordered_set<uint32_t> exited_before_;  // ...before the current window began
  std::function<void(uint32_t)> on_snapshot_;
  // Records whose user stack is a copy of a process ember has no mappings
  // of (it exited before they were read), by pid: until its exit-time ones come.
  std::unordered_map<uint32_t, std::vector<std::vector<uint8_t>>> copies_waiting_;
  CopyUnwinder copy_unwinder_;
  JitListener on_jit_code_;
  RuntimeNamer python_namer_, v8_namer_;
  struct WordsHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& w) const {
      return std::hash<uint64_t>{}(w.first * 0x9e3779b97f4a7c15ull ^ w.second);
    }
  };
  // pid -> (word, position) -> token
  std::unordered_map<uint32_t, std::unordered_map<std::pair<uint64_t, uint64_t>, uint32_t, WordsHash>> runtime_tokens_;
  struct Tally {
    uint32_t name = 0;
    uint64_t stops[EMBER_STOP_KINDS] = {};
  };
  std::unordered_map<uint32_t, Tally> unwind_tallies_;  // by pid
  CollectorStats stats_;
};

}  // namespace ember
