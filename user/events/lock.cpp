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
  EventView v = blocked_view(s);
  v.kernel_frame_prefix = "futex_wait";
  v.excluded_frames = {"__futex_abstimed_wait_common", "ObjectMonitor::"};
  return v;
}

std::string agent_options(const Resolved&) { return ",lock"; }

std::string summary(const Resolved& s, const Outcome& o) {
  return summary_line(o, "%.3f s waiting for locks (mutexes, Java monitors), of at least %s each", o.total / 1e9,
                      s.settings.min_block.c_str());
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
