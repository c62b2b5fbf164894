// What the events sampled by the perf-event timer (cpu-clock, cycles,
// wall) share.
#pragma once

#include "user/events/event.h"

namespace ember::events {

// The timer runs at -F on every CPU.
inline void sample_on_timer(const Resolved& s, SamplerConfig& config) {
  config.cpu = true;
  config.frequency = static_cast<uint32_t>(s.settings.frequency);
}

inline std::vector<std::pair<std::string, std::string>> frequency_info(const Resolved& s) {
  return {{"frequency", std::to_string(s.settings.frequency) + " Hz"}};
}

}  // namespace ember::events
