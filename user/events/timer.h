// What the events sampled by the perf-event timer (cpu-clock, cycles,
// wall) share: the timer, their kernel part.
#pragma once

#include <vector>

#include "user/events/event.h"

namespace ember::events {

// A perf event on every online CPU, ticking at `frequency` Hz, runs
// bpf/cpu.bpf.c's program, which records the running task's stacks.
class CpuTimer : public KernelPart {
 public:
  enum class Clock { CpuClock, Cycles };  // the software timer, or the hardware cycle counter
  Clock clock = Clock::CpuClock;
  uint32_t frequency = 99;
  Spelling spelling = Spelling::Option;  // how its refusal names the other event

  std::expected<void, std::string> prepare(profile_bpf& skel, std::vector<std::string>& warnings) override;
  std::expected<void, std::string> attach(profile_bpf& skel, std::vector<std::string>& warnings) override;
  // Every CPU's ticks, each record with both stacks full.
  uint64_t ring_bytes(int cpus) const override;
};

// The timer runs at -F on every CPU.
inline CpuTimer& sample_on_timer(const Resolved& s, KernelParts& parts) {
  CpuTimer& timer = kernel_part<CpuTimer>(parts);
  timer.frequency = static_cast<uint32_t>(s.settings.frequency);
  return timer;
}

inline std::vector<std::pair<std::string, std::string>> frequency_info(const Resolved& s) {
  return {{"frequency", std::to_string(s.settings.frequency) + " Hz"}};
}

}  // namespace ember::events
