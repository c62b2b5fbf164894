// Wall-clock time: CPU time as the samples of a timer, each weighing its
// period, beside every block off CPU (runnable ones included), in ns.
#include "user/events/blocks.h"
#include "user/events/event.h"
#include "user/events/timer.h"

namespace ember::events {
namespace {

std::expected<void, std::string> configure(const Resolved& s, const Scope&, KernelParts& parts,
                                           std::vector<std::string>&) {
  sample_on_timer(s, parts);  // the timer of a CPU event given beside it, if any
  SchedSwitch& blocks = kernel_part<SchedSwitch>(parts);
  blocks.min_block_ns = 0;  // every block: the offcpu graph drops short ones itself
  blocks.preempted = true;
  return {};
}

EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 1u << EMBER_KIND_CPU | 1u << EMBER_KIND_BLOCKED | 1u << EMBER_KIND_PREEMPTED;
  v.cpu_weight = 1'000'000'000ull / s.settings.frequency;
  return v;
}

std::string summary(const Resolved&, const Outcome& o) {
  return summary_line(o, "%.3f s on and off CPU in %llu samples and blocks", o.total / 1e9,
                      static_cast<unsigned long long>(o.records));
}

}  // namespace

extern const Event kWall = {
    .name = "wall",
    .help = "time on and off CPU, in ns",
    .unit = "ns",
    .settings = kFrequency,
    .configure = configure,
    .view = view,
    .info = frequency_info,
    .summary = summary,
};

}  // namespace ember::events
