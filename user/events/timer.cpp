#include "user/events/timer.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <cerrno>

#include "profile.skel.h"

namespace ember::events {
namespace {

int open_perf_event(CpuTimer::Clock clock, uint32_t frequency, int cpu) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  if (clock == CpuTimer::Clock::Cycles) {
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
  } else {
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
  }
  attr.freq = 1;
  attr.sample_freq = frequency;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

std::expected<void, std::string> CpuTimer::prepare(profile_bpf& skel, std::vector<std::string>&) {
  bpf_program__set_autoload(skel.progs.ember_sample, true);
  return {};
}

uint64_t CpuTimer::ring_bytes(int cpus) const { return records_bytes(frequency, cpus); }

std::expected<void, std::string> CpuTimer::attach(profile_bpf& skel, std::vector<std::string>&) {
  int ncpus = libbpf_num_possible_cpus(), attached = 0;
  for (int cpu = 0; cpu < ncpus; ++cpu) {
    int fd = open_perf_event(clock, frequency, cpu);
    if (fd < 0) {
      int err = errno;
      if (err == ENODEV) continue;  // possible but offline CPU
      if (clock == Clock::Cycles && (err == ENOENT || err == EOPNOTSUPP))
        return std::unexpected(
            "event 'cycles' is not available: this machine has no hardware PMU (common in VMs); use " +
            event_named("cpu-clock", spelling));
      if (err == EACCES || err == EPERM)
        return std::unexpected("perf_event_open refused (" + errno_text(err) +
                               "): run as root, or lower kernel.perf_event_paranoid");
      return std::unexpected("perf_event_open on CPU " + std::to_string(cpu) + " failed: " + errno_text(err));
    }
    // The link owns the event's fd from here: destroying it closes the fd.
    if (!keep(bpf_program__attach_perf_event(skel.progs.ember_sample, fd))) {
      int err = errno;
      close(fd);
      return std::unexpected("cannot attach to the perf event on CPU " + std::to_string(cpu) + ": " +
                             errno_text(err));
    }
    ++attached;
  }
  if (!attached) return std::unexpected("no online CPU to sample");
  return {};
}

}  // namespace ember::events
