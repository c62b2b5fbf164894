// Time waiting for locks: native mutexes (blocks in a futex lock wait,
// told by sched_switch: bpf/offcpu.bpf.c's wait_of) and Java monitors (from
// the JVMs' agents).
#include "agent/protocol.h"
#include "user/events/blocks.h"
#include "user/events/event.h"

namespace ember::events {
namespace {

std::expected<void, std::string> configure(const Resolved& s, const Scope&, KernelParts& parts,
                                           std::vector<std::string>&) {
  track_blocks(s, parts).lock_waits = true;
  return {};
}

EventView view(const Resolved& s) {
  EventView v = blocked_view(s);
  v.lock_waits_only = true;
  return v;
}

std::string agent_options(const Resolved&) { return std::string(",") + agent::protocol::args::kLock; }

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
    .configure = configure,
    .agent_options = agent_options,
    .java_profile = JavaProfileKind::Lock,
    .view = view,
    .summary = summary,
};

}  // namespace ember::events
