// Owns the loaded BPF object (bpf/*.bpf.c, linked into one): the programs of
// the events' kernel parts (user/events/kernel_part.h), the target maps,
// the unwinder's tables and the ring buffer the samples arrive on.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <linux/types.h>  // __u32 and friends for profile.h
extern "C" {
#include "profile.h"
#include "unwind.h"
}
#include "user/events/kernel_part.h"
#include "user/session/unwinder.h"

namespace ember {

// How user stacks are unwound (--unwind).
enum class UnwindMode {
  Fp = EMBER_UNWIND_FP,      // the kernel's frame-pointer walk
  Cfi = EMBER_UNWIND_CFI,    // CFI tables only
  Auto = EMBER_UNWIND_AUTO,  // CFI tables, frame pointers where a binary has none
};

struct SamplerConfig {
  // The events' kernel code (user/events/): what is recorded.
  KernelParts parts;
  // Frames the kernel's stack walk gives at most (kernel.perf_event_max_stack,
  // up to EMBER_MAX_STACK_DEPTH): the room each walk is given.
  uint32_t kernel_walk_frames = EMBER_MAX_STACK_DEPTH;
  std::vector<uint32_t> pids;        // with filter_pids: only these processes
  bool filter_pids = false;
  bool follow_forks = false;         // children of `pids` become targets
  std::vector<uint32_t> tids;        // non-empty: only these threads
  // Non-empty: only tasks in these cgroup v2 directories or below them
  // (at most EMBER_MAX_CGROUPS).
  std::vector<std::string> cgroup_dirs;
  bool include_idle = false;
  UnwindMode unwind = UnwindMode::Fp;
  uint64_t unwind_memory_bytes = 0;  // the kernel's unwind tables at most (not Fp)
  // Called once the programs are loaded, before any is attached (so before
  // the first sample), with the maps the unwind tables go into (not Fp):
  // the targets' tables are best made then. An error fails start().
  std::function<std::expected<void, std::string>(UnwindMode mode, const UnwindMaps& maps)> before_sampling;
  bool verbose = false;              // libbpf's own messages on stderr
};

struct SamplerCounters {
  uint64_t seen = 0;          // samples that passed the in-kernel filters
  uint64_t lost = 0;          // dropped: ring buffer full
  uint64_t idle = 0;          // samples of idle CPUs
  uint64_t targets_full = 0;  // child processes not followed: map full
  uint64_t mappings_lost = 0;  // mappings of exiting processes dropped: ring full
  uint64_t offcpu_untracked = 0;  // switches out not recorded: the off-CPU table was full
  uint64_t offcpu_unseen_ends = 0;  // blocks ended without a switch's tracepoint, sized from CPU time
  uint64_t malloc_untracked = 0;  // --live: sampled allocations not tracked, table full
  uint64_t waker_untracked = 0;   // --waker: wakeups whose waker's stacks could not be stored
  uint64_t unwind_unsupported = 0;  // frames with CFI the unwinder cannot apply
  uint64_t python_unread = 0;    // stacks whose Python chain ended at a frame that could not be read
  uint64_t python_unplaced = 0;  // stacks with Python frames left out: their eval loop's native frame was not met
  uint64_t scratch_busy = 0;  // records not built: every per-CPU buffer in use by nested programs
};

using SampleHandler = std::function<void(const ember_sample& sample)>;
// Called with each executable mapping of a sampled process as it exits.
using ExitHandler = std::function<void(const ember_mapping& mapping)>;

class Sampler {
 public:
  static std::expected<std::unique_ptr<Sampler>, std::string> start(const SamplerConfig& config,
                                                                     SampleHandler on_sample, ExitHandler on_exit);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Starts recording: start() attaches every program, but they record
  // nothing until then.
  void arm();
  // Waits up to timeout_ms (less if the ring fills up), then delivers every
  // queued sample to the handler.
  void poll(int timeout_ms);
  // Stops sampling (disarms the programs, then detaches them); poll() still
  // drains what is queued, and live_allocations() is what was live at the stop.
  void stop();
  SamplerCounters counters() const;
  // --live: ids of the sampled allocations not freed (yet).
  std::vector<uint32_t> live_allocations() const;
  // --live: forgets the allocations of processes gone (`pids`), whose
  // memory went with them.
  void forget_allocations(std::span<const uint32_t> pids);
  // --live: the processes that ended since the last call, and when
  // (CLOCK_MONOTONIC ns); taken, so the next call has the later ones.
  std::unordered_map<uint32_t, uint64_t> take_exits();
  int cpus() const { return cpus_; }  // CPUs online
  // How user stacks are walked: as asked, or Fp on a kernel too old for the unwinder.
  UnwindMode unwind_mode() const { return unwind_; }
  // Where the unwind tables go (not with UnwindMode::Fp).
  UnwindMaps unwind_maps() const;
  // What start() left out but recorded anyway (a probe the kernel lacks).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  Sampler() = default;
  // Once loaded: the sampler's own programs attached (following forks,
  // processes' exits), the ring buffers opened.
  std::expected<void, std::string> attach_own();
  std::expected<void, std::string> open_rings();
  struct State;
  std::unique_ptr<State> state_;
  int cpus_ = 0;
  UnwindMode unwind_ = UnwindMode::Fp;
  std::vector<std::string> warnings_;
};

}  // namespace ember
