#include "agent/method_pointers.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ember::agent {
namespace {

// `size` bytes at `address` of this process; false when they cannot be read.
bool read_bytes(uintptr_t address, void* out, size_t size) {
  iovec local{out, size}, remote{reinterpret_cast<void*>(address), size};
  return address && process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

bool read_pointer(uintptr_t address, uintptr_t* out) {
  return read_bytes(address, out, sizeof *out) && *out;
}

}  // namespace

bool MethodPointers::discover(const VmStructs& vm, char* missing, size_t size) {
  ready_ = false;
  // frame_x86.hpp lays the interpreter's slots below rbp as a chain: sender
  // sp, last sp, then the Method*. HotSpot exports the first two only; the
  // Method* is the next one down (so async-profiler and the OpenTelemetry
  // profiler read it, at rbp - 3 words, on every JDK since 9). On aarch64
  // it exports neither, and frame_aarch64.hpp has kept the same chain below
  // x29 since the port (JDK 8 to 25).
  int64_t last_sp = 0;
  if (!vm.int_constant("frame::interpreter_frame_last_sp_offset", &last_sp)) {
#if defined(__aarch64__)
    last_sp = -2;
#else
    std::snprintf(missing, size, "frame::interpreter_frame_last_sp_offset");
    return false;
#endif
  }
  if (last_sp >= 0 || last_sp < -64) {
    std::snprintf(missing, size, "frame::interpreter_frame_last_sp_offset");
    return false;
  }
  if (!need(vm, "Method", "_constMethod", FieldKind::Pointer, &const_method_, missing, size) ||
      !need(vm, "ConstMethod", "_constants", FieldKind::Pointer, &constants_, missing, size) ||
      !need(vm, "ConstMethod", "_method_idnum", FieldKind::Integer, &idnum_, missing, size) ||
      !need(vm, "ConstantPool", "_pool_holder", FieldKind::Pointer, &pool_holder_, missing, size) ||
      !need(vm, "InstanceKlass", "_methods_jmethod_ids", FieldKind::Pointer, &jmethod_ids_, missing, size))
    return false;
  frame_slot_ = static_cast<int32_t>(last_sp - 1);
  ready_ = true;
  return true;
}

uintptr_t MethodPointers::method_of(const void* method) const {
  uintptr_t id = reinterpret_cast<uintptr_t>(method), m, cm, pool, holder, cache;
  if (!ready_ || !read_pointer(id, &m) || !read_pointer(m + const_method_.offset, &cm)) return 0;
  // The ConstMethod's two fields in one read.
  uint64_t from = std::min(constants_.offset, idnum_.offset);
  uint64_t to = std::max(constants_.offset + sizeof(void*), idnum_.offset + idnum_.size);
  uint8_t fields[256];
  if (to - from > sizeof fields || !read_bytes(cm + from, fields, to - from)) return 0;
  uint64_t idnum = 0;
  std::memcpy(&pool, fields + (constants_.offset - from), sizeof pool);
  std::memcpy(&idnum, fields + (idnum_.offset - from), idnum_.size);  // little-endian
  if (!pool || !read_pointer(pool + pool_holder_.offset, &holder) ||
      !read_pointer(holder + jmethod_ids_.offset, &cache))
    return 0;
  // The cache: its length, then the jmethodID of each idnum
  // (instanceKlass.cpp); both words in one call.
  uint64_t length = 0, cached = 0;
  iovec local[2] = {{&length, sizeof length}, {&cached, sizeof cached}};
  iovec remote[2] = {{reinterpret_cast<void*>(cache), sizeof length},
                     {reinterpret_cast<void*>(cache + (idnum + 1) * sizeof(void*)), sizeof cached}};
  if (process_vm_readv(getpid(), local, 2, remote, 2, 0) != 2 * sizeof(uint64_t)) return 0;
  return idnum < length && cached == id ? m : 0;
}

}  // namespace ember::agent
