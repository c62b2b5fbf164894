// Time waiting for locks: native mutexes (a futex wait on glibc's lock
// slow path, from sched_switch) and Java monitors (from the JVMs' agents).
#include "user/events/blocks.h"
#include "user/events/event.h"

namespace ember::events {
namespace {

// Waits on condition variables, read-write locks and semaphores (glibc's
// __futex_abstimed_wait_common) are mostly idle threads waiting for work:
// -e offcpu has them. Java monitors come from the agent, with the monitor's
// class; HotSpot's own futex waits under ObjectMonitor would count them twice.
EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 1u << EMBER_KIND_BLOCKED;
  v.min_blocked_ns = s.min_block_ns;
  v.waker = s.settings.waker;
  v.kernel_frame_prefix = "futex_wait";
  v.excluded_frames = {"__futex_abstimed_wait_common", "ObjectMonitor::"};
  return v;
}

std::string agent_options(const Resolved&) { return ",lock"; }

std::string summary(const Resolved& s, const Outcome& o) {
  char line[200];
  std::snprintf(line, sizeof line, "  %-11.*s %.3f s waiting for locks (mutexes, Java monitors), of at least %s each",
                static_cast<int>(o.label.size()), o.label.data(), o.total / 1e9, s.settings.min_block.c_str());
  return line;
}

}  // namespace

extern const Event kLock = {
    .name = "lock",
    .help = "time waiting for mutexes and Java monitors, in ns",
    .unit = "ns",
    .settings = kMinBlock | kWaker,
    .configure = track_blocks,
    .agent_options = agent_options,
    .java_profile = JavaProfileKind::Lock,
    .view = view,
    .summary = summary,
};

}  // namespace ember::events
