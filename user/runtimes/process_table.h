// A runtime's table of processes in the kernel (python_processes,
// v8_processes: tgid -> the walker's layout for it).
#pragma once

#include <bpf/bpf.h>

#include <cstdint>

namespace ember::runtimes {

// The walkers keep each CPU's last lookup until the generation counter
// (the BPF global runtimes_generation) moves: every change bumps it, after
// the change, so that a lookup made since sees it.
class ProcessTable {
 public:
  ProcessTable(int fd, uint32_t* generation) : fd_(fd), generation_(generation) {}

  bool put(uint32_t pid, const void* entry) {
    bool put = bpf_map_update_elem(fd_, &pid, entry, BPF_ANY) == 0;
    bump();
    return put;
  }
  void erase(uint32_t pid) {
    bpf_map_delete_elem(fd_, &pid);
    bump();
  }

 private:
  void bump() { __atomic_add_fetch(generation_, 1, __ATOMIC_RELEASE); }

  int fd_;
  uint32_t* generation_;
};

}  // namespace ember::runtimes
