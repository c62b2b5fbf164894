// CPU time, sampled by a perf-event timer on every CPU: the software
// cpu-clock everywhere, or the hardware cycle counter where there is a PMU.
#include "user/events/event.h"

namespace ember::events {
namespace {

template <SampleEvent kEvent>
std::expected<void, std::string> configure(const Resolved& s, const Scope&, SamplerConfig& config,
                                           std::vector<std::string>&) {
  config.cpu = true;
  config.event = kEvent;
  config.frequency = static_cast<uint32_t>(s.settings.frequency);
  return {};
}

EventView view(const Resolved&) { return EventView{}; }

std::vector<std::pair<std::string, std::string>> info(const Resolved& s) {
  return {{"frequency", std::to_string(s.settings.frequency) + " Hz"}};
}

// A lone CPU graph keeps the classic "samples" line.
std::string summary(const Resolved&, const Outcome& o) {
  char line[160];
  std::snprintf(line, sizeof line, "  %-11.*s %llu%s", static_cast<int>(o.label.size()), o.label.data(),
                static_cast<unsigned long long>(o.records), o.label == "samples" ? "" : " samples");
  return line;
}

}  // namespace

extern const Event kCpuClock = {
    .name = "cpu-clock",
    .alias = "cpu",
    .help = "CPU time from a software timer that works everywhere (the default, also spelt 'cpu')",
    .unit = "samples",
    .settings = kFrequency,
    .samples_cpu = true,
    .configure = configure<SampleEvent::CpuClock>,
    .view = view,
    .info = info,
    .summary = summary,
};

extern const Event kCycles = {
    .name = "cycles",
    .help = "CPU time from the hardware cycle counter (needs a PMU, absent in most VMs)",
    .unit = "samples",
    .settings = kFrequency,
    .samples_cpu = true,
    .served = false,
    .configure = configure<SampleEvent::Cycles>,
    .view = view,
    .info = info,
    .summary = summary,
};

}  // namespace ember::events
