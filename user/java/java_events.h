// The Java events in a JVM's agent stream (agent options alloc, live,
// lock; line formats in agent/protocol.h): allocation samples, frees of
// followed samples, monitor contention, with their Java stacks (and native frames, for allocations made by native code). Parsed
// and aggregated as they arrive — a site (thread, class, stacks) per
// distinct event, so memory follows the program's shape, not the
// recording's length; only samples followed for `live` are kept one by
// one (the agent bounds them). symbolizer::JitMap reads the same stream for
// the code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "symbolizer/line_buffer.h"

namespace ember::java {

class JavaEvents {
 public:
  // Feeds appended text; a trailing partial line is kept for the next call.
  void feed(std::string_view text);

  // A stack: method ids innermost first; `truncated` when the agent cut it
  // at its depth limit (the outermost frames are missing).
  struct Stack {
    std::vector<uint32_t> methods;
    bool truncated = false;
    bool operator==(const Stack&) const = default;
  };
  // What allocated (or waited) where; weights below. `native`: the native
  // frames of an allocation made by native code (native_stack()), 0 if none.
  struct Site {
    uint32_t tid = 0, klass = 0, stack = 0, native = 0;
    bool operator==(const Site&) const = default;
  };
  struct SiteHash {
    size_t operator()(const Site& s) const {
      uint64_t h = (uint64_t{s.tid} << 32 | s.klass) * 0x9e3779b97f4a7c15ULL;
      return static_cast<size_t>(h ^ ((uint64_t{s.native} << 32 | s.stack) * 0xc2b2ae3d27d4eb4fULL));
    }
  };
  // A file of native code, as the agent described it (O native-library).
  struct NativeLibrary {
    uint64_t start = 0, end = 0, bias = 0;  // mapped at [start, end); address - bias: in the file
    std::string path;                       // as the JVM sees it (its mount namespace)
  };
  static constexpr uint32_t kNoLibrary = UINT32_MAX;
  // A native frame: a call site in native_libraries()[library], as an
  // address of the file's symbol table; with kNoLibrary, an address in the
  // JVM that no library line covered (named by nobody).
  struct NativeFrame {
    uint32_t library = kNoLibrary;
    uint64_t address = 0;
    bool operator==(const NativeFrame&) const = default;
  };
  struct AllocWeight {
    uint64_t samples = 0;
    double bytes = 0;    // estimated bytes allocated (see weigh_alloc)
    double objects = 0;  // estimated objects allocated
  };
  struct LockWeight {
    uint64_t samples = 0;  // records
    uint64_t wait_ns = 0;  // time spent waiting (estimated: short waits are sampled)
  };

  // Starts a new window: the sites' weights and their counts restart at
  // zero; names, stacks and the stream's settings stay. Not with live
  // (what is alive is a fact of the whole stream).
  void next_window();

  // A followed sample still alive (with `live` only: F lines take them out).
  struct LiveAllocation {
    uint64_t sample;  // the agent's number for it
    Site site;
    AllocWeight weight;
    uint64_t time_ns;  // of its allocation (CLOCK_MONOTONIC, the A lines' clock)
    uint64_t gcs_at;   // the collections the stream had counted by its A line
  };

  // Allocation sites over the stream (since next_window).
  const std::unordered_map<Site, AllocWeight, SiteHash>& alloc_sites() const { return alloc_; }
  // The followed samples still alive that were allocated at least
  // `min_age_ns` before `end_ns` and have survived at least `min_gcs`
  // collections (none if the stream counted none), oldest first.
  std::vector<LiveAllocation> live_allocations(uint64_t min_age_ns = 0, uint64_t end_ns = UINT64_MAX,
                                               uint64_t min_gcs = 0) const;
  const std::unordered_map<Site, LockWeight, SiteHash>& lock_sites() const { return lock_; }

  const Stack& stack(uint32_t id) const { return stacks_[id]; }
  // Native frames, innermost first (the JNI function, then the C code that
  // called it, up to the native method); id 0 is the empty stack.
  const std::vector<NativeFrame>& native_stack(uint32_t id) const { return natives_[id]; }
  const std::vector<NativeLibrary>& native_libraries() const { return libraries_; }
  std::string_view method(uint32_t id) const;     // "[unknown method]" if never named
  std::string_view class_name(uint32_t id) const;  // "[unknown class]"
  std::string_view thread_name(uint32_t tid) const;  // "" if never named

  // The stream's settings (O lines): 0 when absent.
  uint64_t alloc_interval() const { return alloc_interval_; }
  uint64_t lock_interval() const { return lock_interval_; }
  bool live() const { return live_; }
  // How a live stream ended: "gc" (a full GC first: what is left is live),
  // "none" (no GC: garbage not yet collected is left too), or "" (not yet,
  // or not live).
  const std::string& live_end() const { return live_end_; }
  // The JVM's collections the stream counted (O gcs lines; with live), or
  // nothing: an agent before them, or a JVM that refused the GC events.
  std::optional<uint64_t> gcs() const { return gcs_; }
  // After the agent's `pin` (agent/protocol.h): the samples whose objects
  // the pin array holds, by element (element 0, the marker, holds none),
  // once its "O pinned" line came; `pin_token()` names the array. Or why
  // the agent could not pin (pin_unavailable()).
  struct Pin {
    std::string token;
    std::vector<uint64_t> samples;  // [i]: element i's sample; 0 for element 0 and any not told
  };
  const std::optional<Pin>& pin() const { return pin_; }
  const std::string& pin_unavailable() const { return pin_unavailable_; }
  // "alloc" or "lock" when the agent could not turn them on in this JVM.
  const std::vector<std::string>& unavailable() const { return unavailable_; }

  // Unbiased weights of one allocation sample of an object of `size`
  // bytes, taken with mean sampling interval `interval`.
  static AllocWeight weigh_alloc(uint64_t size, uint64_t interval);

  struct Stats {
    uint64_t alloc_samples = 0;
    uint64_t native_alloc_samples = 0;  // of those, made by native code (with native frames)
    uint64_t live_followed = 0;    // samples followed for liveness
    uint64_t live_untracked = 0;   // live: samples the agent could not follow (its table was full)
    uint64_t freed = 0;            // followed samples the GC freed
    uint64_t unknown_frees = 0;    // F lines for samples this stream never showed (an earlier stream's)
    uint64_t lock_samples = 0;
    uint64_t truncated_stacks = 0;  // events whose stack was cut at the agent's depth limit
    uint64_t bad_lines = 0;         // event lines that did not parse (skipped)
    std::map<std::string, uint64_t> agent_counters;  // D lines: losses inside the agent
  };
  const Stats& stats() const { return stats_; }

 private:
  struct StackHash {
    size_t operator()(const Stack& s) const;
  };
  struct NativeStackHash {
    size_t operator()(const std::vector<NativeFrame>& s) const;
  };
  void line(std::string_view s);
  uint32_t intern_stack(std::string_view frames, bool& ok);
  uint32_t intern_native(std::string_view frames, bool& ok);
  bool add_library(std::string_view value);
  bool end_pin(std::string_view value);

  symbolizer::LineBuffer lines_;
  // By id: maps, so that memory follows the lines read, whatever ids a
  // stream makes up.
  std::unordered_map<uint32_t, std::string> methods_, classes_;
  std::unordered_map<uint32_t, std::string> threads_;
  std::vector<Stack> stacks_;
  std::unordered_map<Stack, uint32_t, StackHash> stack_ids_;
  std::vector<std::vector<NativeFrame>> natives_{1};
  std::unordered_map<std::vector<NativeFrame>, uint32_t, NativeStackHash> native_ids_;
  std::vector<NativeLibrary> libraries_;    // every one described, in order
  std::map<uint64_t, uint32_t> mapped_;      // start -> library, for those mapped now (no overlaps)
  std::unordered_map<Site, AllocWeight, SiteHash> alloc_;
  std::unordered_map<Site, LockWeight, SiteHash> lock_;
  std::unordered_map<uint64_t, LiveAllocation> followed_;  // live samples by number
  uint64_t alloc_interval_ = 0, lock_interval_ = 0;
  bool live_ = false;
  std::string live_end_;
  std::optional<uint64_t> gcs_;
  std::vector<uint64_t> held_;  // H lines until "O pinned"
  std::optional<Pin> pin_;
  std::string pin_unavailable_;
  std::vector<std::string> unavailable_;
  Stats stats_;
};

}  // namespace ember::java
