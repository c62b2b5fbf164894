// What the events built on sched_switch (offcpu, wall, lock) ask of the
// kernel alike.
#pragma once

#include "user/events/event.h"

namespace ember::events {

// Blocks of at least the event's --min-block are sent (the shortest any
// event of the recording keeps), with their wakers' stacks under --waker.
inline std::expected<void, std::string> track_blocks(const Resolved& s, const Scope&, SamplerConfig& config,
                                                     std::vector<std::string>&) {
  config.min_block_ns = config.offcpu ? std::min(config.min_block_ns, s.min_block_ns) : s.min_block_ns;
  config.offcpu = true;
  config.offcpu_waker = config.offcpu_waker || s.settings.waker;
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
