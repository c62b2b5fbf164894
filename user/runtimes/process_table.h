// A runtime's table of processes in the kernel (python_processes,
// v8_processes: tgid -> the walker's layout for it).
#pragma once

#include <bpf/bpf.h>

#include <cstdint>
#include <memory>

namespace ember::runtimes {

// The walkers keep each CPU's last lookup until the generation counter
// (the BPF global runtimes_generation) moves: every change bumps it, after
// the change, so that a lookup made since sees it. Both go with the
// sampler (a session's last window is cut after it): then nothing is
// written.
class ProcessTable {
 public:
  ProcessTable(int fd, std::weak_ptr<uint32_t> generation) : fd_(fd), generation_(std::move(generation)) {}

  // The sampler is gone: a process found now would never be walked.
  bool closed() const { return generation_.expired(); }

  bool put(uint32_t pid, const void* entry) {
    std::shared_ptr<uint32_t> generation = generation_.lock();
    if (!generation) return false;
    bool put = bpf_map_update_elem(fd_, &pid, entry, BPF_ANY) == 0;
    __atomic_add_fetch(generation.get(), 1, __ATOMIC_RELEASE);
    return put;
  }
  void erase(uint32_t pid) {
    std::shared_ptr<uint32_t> generation = generation_.lock();
    if (!generation) return;
    bpf_map_delete_elem(fd_, &pid);
    __atomic_add_fetch(generation.get(), 1, __ATOMIC_RELEASE);
  }

 private:
  int fd_;
  std::weak_ptr<uint32_t> generation_;
};

}  // namespace ember::runtimes
