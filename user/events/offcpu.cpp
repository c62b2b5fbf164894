// Time blocked: each switch off CPU into a sleep, from sched_switch to the
// thread's next run, with the stacks it blocked in (and, with --waker,
// the stacks of whoever woke it).
#include "user/events/event.h"
#include "user/events/blocks.h"

namespace ember::events {
namespace {

EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 1u << EMBER_KIND_BLOCKED;
  v.min_blocked_ns = s.min_block_ns;
  v.waker = s.settings.waker;
  return v;
}

std::vector<std::pair<std::string, std::string>> info(const Resolved& s) {
  return {{"min-block", s.settings.min_block}};
}

std::string summary(const Resolved& s, const Outcome& o) {
  char line[200];
  std::snprintf(line, sizeof line, "  %-11.*s %.3f s off CPU in %llu blocks of at least %s",
                static_cast<int>(o.label.size()), o.label.data(), o.total / 1e9,
                static_cast<unsigned long long>(o.records), s.settings.min_block.c_str());
  return line;
}

}  // namespace

extern const Event kOffcpu = {
    .name = "offcpu",
    .help = "time blocked, in ns",
    .unit = "ns",
    .settings = kMinBlock | kWaker,
    .configure = track_blocks,
    .view = view,
    .info = info,
    .summary = summary,
};

}  // namespace ember::events
