#include "agent/jitmap_writer.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember::agent {
namespace {

// 2M methods is far beyond any real JVM (a large service has ~100k); the
// table stays under 32 MiB.
constexpr size_t kMaxMethods = size_t{1} << 21;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of bpf_ktime_get_ns()
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

size_t slot_of(const void* key, size_t capacity) {
  uint64_t h = reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h >> 20) & (capacity - 1);
}

}  // namespace

JitMapWriter::~JitMapWriter() {
  close();
  std::free(slots_);
}

bool JitMapWriter::open(const char* path, int pid) {
  close();
  fd_ = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  // Ids restart with the file: the reader learns names from this file only.
  std::free(slots_);
  slots_ = nullptr;
  capacity_ = count_ = 0;
  next_id_ = 1;
  appendf("# ember-jitmap 1 pid %d\n", pid);
  flush();
  return true;
}

void JitMapWriter::close() {
  if (fd_ < 0) return;
  flush();
  ::close(fd_);
  fd_ = -1;
}

bool JitMapWriter::is_open() { return fd_ >= 0; }

void JitMapWriter::append(const char* data, size_t n) {
  if (fd_ < 0) return;
  if (used_ + n > sizeof buffer_) flush();
  if (n > sizeof buffer_) n = sizeof buffer_;  // a single line never is
  std::memcpy(buffer_ + used_, data, n);
  used_ += n;
}

void JitMapWriter::appendf(const char* format, ...) {
  char line[4096];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (n < 0) return;
  if (static_cast<size_t>(n) >= sizeof line) {  // a monstrous name: cut, keep the newline
    n = sizeof line - 1;
    line[n - 1] = '\n';
  }
  append(line, static_cast<size_t>(n));
}

void JitMapWriter::flush() {
  size_t done = 0;
  while (fd_ >= 0 && done < used_) {
    ssize_t n = ::write(fd_, buffer_ + done, used_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // disk full: drop rather than stall the JVM
    done += static_cast<size_t>(n);
  }
  used_ = 0;
}

void JitMapWriter::commit() { flush(); }

void JitMapWriter::compiled_load(uint64_t start, uint64_t size, uint32_t method) {
  appendf("L %llu %llx %llx %u\n", (unsigned long long)monotonic_ns(), (unsigned long long)start,
          (unsigned long long)size, method);
}

void JitMapWriter::inline_frames(uint64_t pc_offset, const uint32_t* methods, int count) {
  char line[4096];
  int n = std::snprintf(line, sizeof line, "I %llx", (unsigned long long)pc_offset);
  for (int i = 0; i < count && n < static_cast<int>(sizeof line) - 16; ++i)
    n += std::snprintf(line + n, sizeof line - n, "%c%u", i == 0 ? ' ' : ',', methods[i]);
  line[n++] = '\n';
  append(line, static_cast<size_t>(n));
}

void JitMapWriter::compiled_unload(uint64_t start) {
  appendf("U %llu %llx\n", (unsigned long long)monotonic_ns(), (unsigned long long)start);
}

void JitMapWriter::stub(uint64_t start, uint64_t size, const char* name) {
  appendf("S %llu %llx %llx %s\n", (unsigned long long)monotonic_ns(), (unsigned long long)start,
          (unsigned long long)size, name);
}

void JitMapWriter::define_method(uint32_t id, const char* name) { appendf("M %u %s\n", id, name); }

uint32_t JitMapWriter::method_id(const void* key, bool* is_new) {
  *is_new = false;
  if (count_ * 2 >= capacity_) {  // keep the load factor under 1/2
    size_t grown = capacity_ ? capacity_ * 2 : 4096;
    if (grown / 2 > kMaxMethods) return 0;
    Slot* fresh = static_cast<Slot*>(std::calloc(grown, sizeof(Slot)));
    if (!fresh) return 0;
    for (size_t i = 0; i < capacity_; ++i) {
      if (!slots_[i].key) continue;
      size_t j = slot_of(slots_[i].key, grown);
      while (fresh[j].key) j = (j + 1) & (grown - 1);
      fresh[j] = slots_[i];
    }
    std::free(slots_);
    slots_ = fresh;
    capacity_ = grown;
  }
  size_t j = slot_of(key, capacity_);
  while (slots_[j].key) {
    if (slots_[j].key == key) return slots_[j].id;
    j = (j + 1) & (capacity_ - 1);
  }
  slots_[j] = {key, next_id_++};
  ++count_;
  *is_new = true;
  return slots_[j].id;
}

}  // namespace ember::agent
