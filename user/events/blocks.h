// What the events built on sched_switch (offcpu, wall, lock) share: their
// kernel part and their view of blocks.
#pragma once

#include <algorithm>

#include "user/events/event.h"

namespace ember::events {

// bpf/offcpu.bpf.c: sched_switch records each block off CPU with the
// blocked thread's stacks; sched_waking, with `waker`, its waker's stacks.
class SchedSwitch : public KernelPart {
 public:
  uint64_t min_block_ns = UINT64_MAX;  // shorter blocks are not sent
  bool preempted = false;              // blocks while runnable too (wall-clock time)
  bool waker = false;                  // blocks carry their waker's stacks
  bool lock_waits = false;             // tell the blocks in a lock (EMBER_WAIT_LOCK)

  std::expected<void, std::string> prepare(profile_bpf& skel, std::vector<std::string>& warnings) override;
  std::expected<void, std::string> attach(profile_bpf& skel, std::vector<std::string>& warnings) override;
  uint64_t ring_bytes(int cpus) const override { return burst_ring_bytes(cpus); }
};

// Blocks of at least the event's --min-block are sent (the shortest any
// event of the recording keeps), with their wakers' stacks under --waker.
inline SchedSwitch& track_blocks(const Resolved& s, KernelParts& parts) {
  SchedSwitch& blocks = kernel_part<SchedSwitch>(parts);
  blocks.min_block_ns = std::min(blocks.min_block_ns, s.min_block_ns);
  blocks.waker = blocks.waker || s.settings.waker;
  return blocks;
}

// track_blocks as an Event::configure.
inline std::expected<void, std::string> configure_blocks(const Resolved& s, const Scope&, KernelParts& parts,
                                                         std::vector<std::string>&) {
  track_blocks(s, parts);
  return {};
}

// The graph of blocks of at least --min-block, with their wakers' stacks
// under --waker.
inline EventView blocked_view(const Resolved& s) {
  EventView v;
  v.kinds = 1u << EMBER_KIND_BLOCKED;
  v.min_blocked_ns = s.min_block_ns;
  v.waker = s.settings.waker;
  return v;
}

}  // namespace ember::events
