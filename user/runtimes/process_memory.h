// Reading a runtime's objects from another process's memory.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace ember::runtimes {

// Reads `size` bytes at `address` of a process into `out`; false if it cannot.
using ReadMemory = std::function<bool(uint64_t address, void* out, size_t size)>;

// Reads from process `pid` (process_vm_readv: no stop, no ptrace).
inline bool read_process(pid_t pid, uint64_t address, void* out, size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

inline ReadMemory process_reader(pid_t pid) {
  return [pid](uint64_t address, void* out, size_t size) { return read_process(pid, address, out, size); };
}

}  // namespace ember::runtimes
