// An event's graph as the collector builds it from the kernel's records:
// which kinds of record it takes, and how each weighs. The events declare
// it (Event::view), the session's collector reads it.
#pragma once

#include <cstdint>
#include <string>

#include <linux/types.h>  // __u32 and friends for profile.h
extern "C" {
#include "profile.h"
}

namespace ember {

struct EventView {
  std::string name = "cpu-clock";   // the event, as the user named it
  std::string unit = "samples";     // "samples" or "ns"
  uint32_t kinds = 1u << EMBER_KIND_CPU;  // bit per EMBER_KIND_*
  uint64_t cpu_weight = 1;          // a CPU sample's weight (its period in ns, for wall-clock time)
  uint64_t min_blocked_ns = 0;      // shorter off-CPU blocks are left out
  bool live_only = false;           // allocations: only those still live (see count_live_allocations)
  uint64_t min_age_ns = 0;          // live_only: and allocated at least this long before the end
  uint64_t min_gcs = 0;             // live_only, Java: and through at least this many collections
  // Blocks: the stacks of whoever woke the thread above its own, past a
  // "--" frame, leaf first, up to a "[waker: NAME]" frame (BCC's
  // offwaketime layout).
  bool waker = false;
  bool lock_waits_only = false;     // blocks: only those in a lock (EMBER_WAIT_LOCK)
};

}  // namespace ember
