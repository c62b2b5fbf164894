// CPU time, sampled by a perf-event timer on every CPU: the software
// cpu-clock everywhere, or the hardware cycle counter where there is a PMU.
#include "user/events/event.h"
#include "user/events/timer.h"

namespace ember::events {
namespace {

template <CpuTimer::Clock kClock>
std::expected<void, std::string> configure(const Resolved& s, const Scope&, KernelParts& parts,
                                           std::vector<std::string>&) {
  CpuTimer& timer = sample_on_timer(s, parts);
  timer.clock = kClock;
  timer.spelling = s.spelling;
  return {};
}

EventView view(const Resolved&) { return EventView{}; }

// A lone CPU graph keeps the classic "samples" line.
std::string summary(const Resolved&, const Outcome& o) {
  return summary_line(o, "%llu%s", static_cast<unsigned long long>(o.records), o.label == "samples" ? "" : " samples");
}

}  // namespace

extern const Event kCpuClock = {
    .name = "cpu-clock",
    .alias = "cpu",
    .help = "CPU time from a software timer that works everywhere (the default, also spelt 'cpu')",
    .unit = "samples",
    .settings = kFrequency,
    .samples_cpu = true,
    .configure = configure<CpuTimer::Clock::CpuClock>,
    .view = view,
    .info = frequency_info,
    .summary = summary,
};

extern const Event kCycles = {
    .name = "cycles",
    .help = "CPU time from the hardware cycle counter (needs a PMU, absent in most VMs)",
    .unit = "samples",
    .settings = kFrequency,
    .samples_cpu = true,
    .served = false,
    .configure = configure<CpuTimer::Clock::Cycles>,
    .view = view,
    .info = frequency_info,
    .summary = summary,
};

}  // namespace ember::events
