// Appends code-map events to the file the collector tails (format in
// symbolizer/jit_map.h). Thread-safe; bounded memory; no Java heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <pthread.h>

namespace ember::agent {

class JitMapWriter {
 public:
  JitMapWriter() = default;
  ~JitMapWriter();
  JitMapWriter(const JitMapWriter&) = delete;
  JitMapWriter& operator=(const JitMapWriter&) = delete;

  // Starts a new file (truncating), with the header line. False on error.
  bool open(const char* path, int pid);
  void close();
  bool is_open();

  // Events. Names are written once per method id (see method_id()).
  void compiled_load(uint64_t start, uint64_t size, uint32_t method);
  void inline_frames(uint64_t pc_offset, const uint32_t* methods, int count);  // innermost first
  void compiled_unload(uint64_t start);
  void stub(uint64_t start, uint64_t size, const char* name);
  // Ends one event group (a method load with its inline records): flushes.
  void commit();

  // Caller holds the lock around one event group so groups never interleave.
  void lock() { pthread_mutex_lock(&mutex_); }
  void unlock() { pthread_mutex_unlock(&mutex_); }

  // The id for `key` (a jmethodID), and whether it is new (then the caller
  // names it with define_method()). 0 when the table is full.
  uint32_t method_id(const void* key, bool* is_new);
  void define_method(uint32_t id, const char* name);

 private:
  void append(const char* data, size_t n);
  void appendf(const char* format, ...) __attribute__((format(printf, 2, 3)));
  void flush();

  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  int fd_ = -1;
  char buffer_[1 << 16];
  size_t used_ = 0;
  // Open addressing, jmethodID -> id; grows to kMaxMethods, then stops interning.
  struct Slot {
    const void* key;
    uint32_t id;
  };
  Slot* slots_ = nullptr;
  size_t capacity_ = 0, count_ = 0;
  uint32_t next_id_ = 1;
};

}  // namespace ember::agent
