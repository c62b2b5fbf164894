#include "agent/jitmap_writer.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/protocol.h"

namespace ember::agent {
namespace {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of bpf_ktime_get_ns()
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

size_t slot_of(uint64_t key, size_t capacity) {
  uint64_t h = key * 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h >> 20) & (capacity - 1);
}

constexpr uint64_t kLazyFlushNs = 100'000'000;

// Decimal digits of v at out; returns the count. No locale, no printf.
size_t put_u64(char* out, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

// Lower-case hex digits of v at out; returns the count.
size_t put_hex(char* out, uint64_t v) {
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  for (size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

}  // namespace

void IdTable::clear() {
  std::free(slots_);
  slots_ = nullptr;
  capacity_ = count_ = 0;
  next_id_ = 1;
}

uint32_t IdTable::find_or_add(uint64_t key, bool* is_new) {
  *is_new = false;
  if (key == 0) key = 1;  // 0 marks an empty slot
  if (count_ * 2 >= capacity_) {  // keep the load factor under 1/2
    size_t grown = capacity_ ? capacity_ * 2 : 4096;
    if (grown / 2 > max_ids_) {
      // Full: known keys still resolve, new ones get 0.
      if (!slots_) return 0;
      for (size_t j = slot_of(key, capacity_); slots_[j].key; j = (j + 1) & (capacity_ - 1))
        if (slots_[j].key == key) return slots_[j].id;
      return 0;
    }
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

bool JitMapWriter::open(const char* path, int pid) {
  close();
  // A new file only, readable by the JVM's user alone: never through a
  // link or over a file someone placed there.
  fd_ = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) return false;
  std::snprintf(path_, sizeof path_, "%s", path);
  files_ = 0;
  file_bytes_ = 0;
  // Ids restart with the file: the reader learns names from this file only.
  methods_.clear();
  method_pointers_.clear();
  classes_.clear();
  write_errors_ = 0;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  appendf("%s pid %d\n", protocol::kHeader, pid);
  flush();
  return true;
}

void JitMapWriter::close() {
  if (fd_ < 0) return;
  flush();
  ::close(fd_);
  fd_ = -1;
}

bool JitMapWriter::is_open() { return __atomic_load_n(&fd_, __ATOMIC_RELAXED) >= 0; }

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
    if (n <= 0) {  // disk full: drop rather than stall the JVM
      write_errors_ += used_ - done;
      break;
    }
    done += static_cast<size_t>(n);
  }
  file_bytes_ += done;
  used_ = 0;
  last_flush_ns_ = monotonic_ns();
}

void JitMapWriter::continue_if_full() {
  if (fd_ < 0 || file_bytes_ < file_bytes_limit_) return;
  char next[sizeof path_ + 16];
  std::snprintf(next, sizeof next, "%s.%u", path_, files_ + 1);
  int fd = ::open(next, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;  // this file grows on; tried again at the next group
  const char* name = std::strrchr(next, '/');
  appendf("%c %s\n", protocol::kContinued, name ? name + 1 : next);
  flush();
  ::close(fd_);
  fd_ = fd;
  ++files_;
  file_bytes_ = 0;
}

void JitMapWriter::commit() {
  flush();
  continue_if_full();
}

void JitMapWriter::commit_lazy() {
  if (used_ < sizeof buffer_ / 2 && monotonic_ns() - last_flush_ns_ < kLazyFlushNs) return;
  flush();
  continue_if_full();
}

void JitMapWriter::compiled_load(uint64_t start, uint64_t size, uint32_t method, bool replayed) {
  appendf("%c %llu %llx %llx %u\n", protocol::kLoad, replayed ? 0ull : (unsigned long long)monotonic_ns(), (unsigned long long)start,
          (unsigned long long)size, method);
}

void JitMapWriter::inline_frames(uint64_t pc_offset, const uint32_t* methods, int count) {
  char line[4096];
  int n = std::snprintf(line, sizeof line, "%c %llx", protocol::kInline, (unsigned long long)pc_offset);
  for (int i = 0; i < count && n < static_cast<int>(sizeof line) - 16; ++i)
    n += std::snprintf(line + n, sizeof line - n, "%c%u", i == 0 ? ' ' : ',', methods[i]);
  line[n++] = '\n';
  append(line, static_cast<size_t>(n));
}

void JitMapWriter::frame(uint64_t start, int32_t frame_words, int32_t complete, const FrameStep* steps, int count) {
  appendf("%c %llx %d %d", protocol::kFrame, (unsigned long long)start, frame_words, complete);
  for (int i = 0; i < count; ++i) appendf(" %u:%d:%d", steps[i].offset, steps[i].cfa_words, steps[i].fp_slot);
  append("\n", 1);
}

void JitMapWriter::compiled_unload(uint64_t start) {
  appendf("%c %llu %llx\n", protocol::kUnload, (unsigned long long)monotonic_ns(), (unsigned long long)start);
}

bool JitMapWriter::claim_method_pointer(const void* method) {
  bool is_new = false;
  return method_pointers_.find_or_add(reinterpret_cast<uintptr_t>(method), &is_new) && is_new;
}

void JitMapWriter::method_pointer(uint64_t pointer, uint32_t method) {
  appendf("%c %llx %u\n", protocol::kMethodPointer, (unsigned long long)pointer, method);
}

void JitMapWriter::stub(uint64_t start, uint64_t size, const char* name, bool replayed) {
  appendf("%c %llu %llx %llx %s\n", protocol::kStub, replayed ? 0ull : (unsigned long long)monotonic_ns(), (unsigned long long)start,
          (unsigned long long)size, name);
}

void JitMapWriter::define_method(uint32_t id, const char* name) { appendf("%c %u %s\n", protocol::kMethod, id, name); }

uint32_t JitMapWriter::method_id(const void* key, bool* is_new) {
  return methods_.find_or_add(reinterpret_cast<uintptr_t>(key), is_new);
}

uint32_t JitMapWriter::class_id(uint64_t name_hash, bool* is_new) { return classes_.find_or_add(name_hash, is_new); }

void JitMapWriter::define_class(uint32_t id, const char* name) { appendf("%c %u %s\n", protocol::kClass, id, name); }

void JitMapWriter::option(const char* key, const char* value) { appendf("%c %s %s\n", protocol::kOption, key, value); }

void JitMapWriter::thread_name(uint32_t tid, const char* name) {
  char clean[256];
  size_t n = 0;
  for (; name[n] && n + 1 < sizeof clean; ++n) clean[n] = name[n] == '\n' || name[n] == '\r' ? ' ' : name[n];
  clean[n] = '\0';
  appendf("%c %u %s\n", protocol::kThread, tid, clean);
}

// " 12,7,3" or " -" (no Java frames); ",+" after the last one when the
// stack was cut at the depth limit. Ids take at most 10 digits.
void JitMapWriter::append_frames(char* line, size_t& n, size_t size, const uint32_t* frames, int count,
                                 bool truncated) {
  line[n++] = ' ';
  if (count == 0 && !truncated) {
    line[n++] = '-';
  }
  for (int i = 0; i < count && n + 16 < size; ++i) {
    if (i) line[n++] = ',';
    n += put_u64(line + n, frames[i]);
  }
  if (truncated && n + 4 < size) {
    if (count) line[n++] = ',';
    line[n++] = '+';
  }
  line[n++] = '\n';
}

void JitMapWriter::alloc(uint64_t time_ns, uint32_t tid, uint64_t size, uint32_t klass, uint64_t sample,
                         const uint32_t* frames, int count, bool truncated, const uint64_t* native,
                         int native_count) {
  // 5 numbers, <= 128 frames of <= 11 bytes, <= 32 native frames of <= 17
  static_assert(protocol::kMaxJavaFrames <= 128 && protocol::kMaxNativeFrames <= 32);
  char line[2560];
  size_t n = 0;
  line[n++] = protocol::kAlloc;
  for (uint64_t v : {time_ns, uint64_t{tid}, size, uint64_t{klass}, sample}) {
    line[n++] = ' ';
    n += put_u64(line + n, v);
  }
  append_frames(line, n, sizeof line, frames, count, truncated);
  if (native_count > 0) {  // " 7f01c2a3b4c5,7f01c2a3b000" over the newline
    --n;
    for (int i = 0; i < native_count && n + 20 < sizeof line; ++i) {
      line[n++] = i ? ',' : ' ';
      n += put_hex(line + n, native[i]);
    }
    line[n++] = '\n';
  }
  append(line, n);
}

void JitMapWriter::freed(uint64_t sample) {
  char line[64];
  size_t n = 0;
  line[n++] = protocol::kFree;
  for (uint64_t v : {monotonic_ns(), sample}) {
    line[n++] = ' ';
    n += put_u64(line + n, v);
  }
  line[n++] = '\n';
  append(line, n);
}

void JitMapWriter::held(uint32_t index, uint64_t sample) {
  char line[64];
  size_t n = 0;
  line[n++] = protocol::kHeld;
  for (uint64_t v : {uint64_t{index}, sample}) {
    line[n++] = ' ';
    n += put_u64(line + n, v);
  }
  line[n++] = '\n';
  append(line, n);
}

void JitMapWriter::contended(uint64_t time_ns, uint32_t tid, uint64_t wait_ns, uint32_t klass,
                             const uint32_t* frames, int count, bool truncated) {
  char line[2048];
  size_t n = 0;
  line[n++] = protocol::kContended;
  for (uint64_t v : {time_ns, uint64_t{tid}, wait_ns, uint64_t{klass}}) {
    line[n++] = ' ';
    n += put_u64(line + n, v);
  }
  append_frames(line, n, sizeof line, frames, count, truncated);
  append(line, n);
}

void JitMapWriter::counter(const char* name, uint64_t value) {
  appendf("%c %llu %s %llu\n", protocol::kCounter, (unsigned long long)monotonic_ns(), name, (unsigned long long)value);
}

}  // namespace ember::agent
