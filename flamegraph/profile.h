// The profile model: frames with kinds, stacks with weights. Every reader
// and writer in flamegraph/ and the collector in user/ speak this type.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::flamegraph {

// What produced a frame. Kept as data so writers can colour and suffix it;
// the order is part of the HTML contract (see kinds[] in flamegraph.html).
enum class FrameKind : uint8_t {
  Kernel,
  Native,       // C or unknown-language code in an ELF file
  Cpp,          // demangled C++ (libjvm, libstdc++ ...)
  Jit,          // JIT-compiled Java
  Inlined,      // Java inlined into a JIT frame
  Interpreted,  // interpreted Java
  Python,       // a Python function (CPython's frames, in place of its eval loop's)
  JavaScript,   // a JavaScript function (V8's frames, in place of its code's)
  Alloc,        // allocated class, top of an allocation stack
  Thread,       // pseudo-frame: one per thread (--threads)
  Process,      // pseudo-frame: comm or "comm (pid)" at the root
  Unknown,      // an address no symbol source could name
};

inline constexpr std::array<std::string_view, 12> kFrameKindNames = {
    "kernel", "native", "cpp",   "jit",    "inlined", "interpreted",
    "python", "js",     "alloc", "thread", "process", "unknown"};

inline std::string_view kind_name(FrameKind k) { return kFrameKindNames[static_cast<size_t>(k)]; }

struct Frame {
  std::string name;
  FrameKind kind = FrameKind::Native;
  std::string module;  // file the code lives in; empty when not applicable

  bool operator==(const Frame&) const = default;
};

using FrameId = uint32_t;

struct Stack {
  std::vector<FrameId> frames;  // root first
  uint64_t weight = 0;
};

// Weight taken at one time: `stack` indexes Profile::stacks(), `time_ns`
// counts from Profile::start_unix_ns.
struct Timed {
  uint64_t time_ns = 0;
  uint64_t weight = 0;
  uint32_t stack = 0;
};

class Profile {
 public:
  std::string event = "cpu-clock";  // what was sampled
  std::string unit = "samples";     // "samples", "ns" or "bytes"
  uint64_t period_ns = 0;           // with "samples": CPU time one sample stands for, if known
  uint64_t start_unix_ns = 0;       // when the recording began, if known
  uint64_t duration_ns = 0;         // how long it lasted, if known
  // Facts shown with the graph and in reports (samples, lost, duration ...).
  std::vector<std::pair<std::string, std::string>> info;
  // When the weight was taken, where the source knows it (a recording, a
  // pprof with times, a merged spool): in time order and adding up to
  // total(). Empty where times are unknown (folded stacks) or were lost.
  std::vector<Timed> timeline;
  // How precise the timeline's times are: 0 when exact, else each is the
  // start of a span this long (a merged spool's periods).
  uint64_t time_step_ns = 0;

  static constexpr uint32_t kNoStack = UINT32_MAX;
  // Returns the id of an equal frame if there is one, else adds it.
  FrameId intern(const Frame& frame);
  // Adds weight to the stack (root first); equal stacks are merged. Returns
  // the stack's index in stacks(), kNoStack for no weight (nothing added).
  uint32_t add(std::span<const FrameId> frames, uint64_t weight);
  // Adds a stack of `other`'s frames (ids there), interned here.
  uint32_t add_from(const Profile& other, std::span<const FrameId> frames, uint64_t weight);

  const std::vector<Frame>& frames() const { return frames_; }
  const std::vector<Stack>& stacks() const { return stacks_; }
  uint64_t total() const { return total_; }
  // The info value of `key`, nullptr if it has none.
  const std::string* info_value(std::string_view key) const;
  // Stacks ordered by their frame ids: deterministic output, shared prefixes adjacent.
  std::vector<const Stack*> sorted_stacks() const;

  struct FrameHash {
    size_t operator()(const Frame& f) const;
  };

 private:
  // Items of a vector found by content, open addressing: a slot holds an
  // item's index + 1 (0: free) and part of its hash. A big profile has
  // millions of stacks and hundreds of thousands of frames: node maps kept
  // a second copy of each, and made an allocation per entry.
  class Index {
   public:
    // The index of the item `equal` accepts among those of `hash`, and else
    // -1 with `slot` set to where add() puts it.
    template <class Equal>
    int64_t find(uint64_t hash, Equal equal, size_t& slot) const {
      const size_t mask = slots_.size() - 1;
      for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (!s.index_plus_one) {
          slot = i;
          return -1;
        }
        if (s.hash == static_cast<uint32_t>(hash >> 32) && equal(s.index_plus_one - 1)) return s.index_plus_one - 1;
      }
    }
    void add(size_t slot, uint64_t hash, uint32_t index) {
      slots_[slot] = {index + 1, static_cast<uint32_t>(hash >> 32)};
    }
    // Room for one more item: called before find(); `hash_of(i)` rehashes
    // item i of the `count` there are.
    template <class HashOf>
    void reserve_one(size_t count, HashOf hash_of) {
      if (2 * (count + 1) <= slots_.size()) return;
      std::vector<Slot> slots(std::max<size_t>(1024, 2 * slots_.size()));
      const size_t mask = slots.size() - 1;
      for (uint32_t item = 0; item < count; ++item) {
        const uint64_t h = hash_of(item);
        size_t i = h & mask;
        while (slots[i].index_plus_one) i = (i + 1) & mask;
        slots[i] = {item + 1, static_cast<uint32_t>(h >> 32)};
      }
      slots_.swap(slots);
    }

   private:
    struct Slot {
      uint32_t index_plus_one = 0;
      uint32_t hash = 0;
    };
    std::vector<Slot> slots_;
  };
  std::vector<Frame> frames_;
  Index frame_index_;
  std::vector<Stack> stacks_;
  Index stack_index_;
  uint64_t total_ = 0;
};

// `profile` in at most `max_stacks` stacks, for a backend
// that refuses more (Pyroscope: 16,000 samples a profile), with the same
// total and the same weight in every frame near the root: the heaviest
// stacks whole, the lightest cut after their outermost frames (as many as
// fit: the root at least, unless there are more roots than room) and ended
// by a frame "[lighter stacks cut]".
Profile cut_stacks(const Profile& profile, size_t max_stacks);

// The root pseudo-frames' names and their parts: a process "comm (123)"
// ("comm" without a pid: 0), a thread "[name tid=123]".
std::string process_frame_name(std::string_view comm, uint64_t pid);
std::pair<std::string, uint64_t> split_process_frame(const std::string& name);
std::string thread_frame_name(std::string_view name, uint64_t tid);
std::pair<std::string, uint64_t> split_thread_frame(const std::string& name);

// The name Pyroscope gives an event's profiles (a series' __name__):
// process_cpu, off_cpu, memory (malloc, Java alloc, and their in-use
// types), else the event's own (wall, lock).
std::string series_name(const std::string& event);
// The sample type of an allocation event's profile of what is still live
// (malloc_inuse, alloc_inuse: Pyroscope tells a profile type by its sample
// type, as Go's alloc_space from inuse_space), and whether `type` is one.
std::string inuse_type(const std::string& event);
bool is_inuse_type(std::string_view type);

}  // namespace ember::flamegraph
