#include "user/events/blocks.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "profile.skel.h"

namespace ember::events {
namespace {

// Room in the off-CPU tables (preallocated, about 2 KiB an entry): twice
// the threads the host has now (/proc/loadavg's "running/total"), for
// those yet to start, within bounds. A thread beyond it is not recorded,
// and counted (the summary's "untracked").
uint32_t blocking_threads() {
  unsigned running = 0, total = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "re")) {
    if (std::fscanf(f, "%*f %*f %*f %u/%u", &running, &total) != 2) total = 0;
    std::fclose(f);
  }
  return std::clamp<uint32_t>(2 * total + 1024, 4096, 32768);
}

}  // namespace

std::expected<void, std::string> SchedSwitch::prepare(profile_bpf& skel, std::vector<std::string>&) {
  skel.rodata->offcpu_preempted = preempted;
  skel.rodata->min_block_ns = min_block_ns;
  skel.rodata->offcpu_waker = waker;
  skel.rodata->tell_lock_waits = lock_waits;
  uint32_t threads = blocking_threads();
  bpf_program__set_autoload(skel.progs.ember_switch, true);
  bpf_program__set_autoload(skel.progs.ember_offcpu_exit, true);
  bpf_map__set_autocreate(skel.maps.offcpu_start, true);
  bpf_map__set_max_entries(skel.maps.offcpu_start, threads);
  if (waker) {
    bpf_program__set_autoload(skel.progs.ember_waking, true);
    bpf_map__set_autocreate(skel.maps.waker_stacks, true);
    bpf_map__set_max_entries(skel.maps.waker_stacks, threads);
  }
  return {};
}

std::expected<void, std::string> SchedSwitch::attach(profile_bpf& skel, std::vector<std::string>&) {
  // Before the first entry is made: none outlives its thread.
  if (!keep(bpf_program__attach(skel.progs.ember_offcpu_exit)))
    return std::unexpected("-e offcpu/wall/lock: cannot attach to the sched_process_exit tracepoint: " +
                           errno_text(errno));
  if (!keep(bpf_program__attach(skel.progs.ember_switch)))
    return std::unexpected("-e offcpu/wall/lock: cannot attach to the sched_switch tracepoint: " + errno_text(errno) +
                           " (the kernel needs BTF-typed tracepoints, Linux 5.5+)");
  if (waker && !keep(bpf_program__attach(skel.progs.ember_waking)))
    return std::unexpected("--waker: cannot attach to the sched_waking tracepoint: " + errno_text(errno) +
                           " (record without --waker)");
  return {};
}

}  // namespace ember::events
