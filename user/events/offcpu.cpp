// Time blocked: each switch off CPU into a sleep, from sched_switch to the
// thread's next run, with the stacks it blocked in (and, with --waker,
// the stacks of whoever woke it).
#include "user/events/event.h"
#include "user/events/blocks.h"

namespace ember::events {
namespace {

std::vector<std::pair<std::string, std::string>> info(const Resolved& s) {
  return {{"min-block", s.settings.min_block}};
}

std::string summary(const Resolved& s, const Outcome& o) {
  return summary_line(o, "%.3f s off CPU in %llu blocks of at least %s", o.total / 1e9,
                      static_cast<unsigned long long>(o.records), s.settings.min_block.c_str());
}

}  // namespace

extern const Event kOffcpu = {
    .name = "offcpu",
    .help = "time blocked, in ns",
    .unit = "ns",
    .settings = kMinBlock | kWaker,
    .configure = configure_blocks,
    .view = blocked_view,
    .info = info,
    .summary = summary,
};

}  // namespace ember::events
