// Appends code-map and Java-event lines to the file the collector tails
// (format in agent/protocol.h). Thread-safe; bounded memory; no Java heap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <pthread.h>

#include "agent/prologue.h"
#include "agent/protocol.h"

namespace ember::agent {

// Key -> small id, open addressing, grown up to a bound. Not thread-safe
// (the writer's lock guards it). 0 is never a key; id 0 means "table full".
// No destructor, on purpose: the table lives as long as the process, and
// freeing it from exit() could pull it from under a daemon thread that is
// still inside a JVMTI callback.
class IdTable {
 public:
  explicit constexpr IdTable(size_t max_ids) : max_ids_(max_ids) {}
  IdTable(const IdTable&) = delete;
  IdTable& operator=(const IdTable&) = delete;
  uint32_t find_or_add(uint64_t key, bool* is_new);
  void clear();  // ids restart at 1

 private:
  struct Slot {
    uint64_t key;
    uint32_t id;
  };
  size_t max_ids_;
  Slot* slots_ = nullptr;
  size_t capacity_ = 0, count_ = 0;
  uint32_t next_id_ = 1;
};

class JitMapWriter {
 public:
  // Trivially destructible (see IdTable): VMDeath and Agent_OnUnload close it.
  // A file goes on in the next past `file_bytes` (see protocol::kContinued).
  explicit constexpr JitMapWriter(uint64_t file_bytes = protocol::kFileBytes) : file_bytes_limit_(file_bytes) {}
  JitMapWriter(const JitMapWriter&) = delete;
  JitMapWriter& operator=(const JitMapWriter&) = delete;

  // Starts a new file (it must not exist), with the header line. False on error.
  bool open(const char* path, int pid);
  void close();
  bool is_open();  // with the lock, or as a hint without
  // Bumped by every open(): a thread compares it with the one it last
  // named itself in, to write its T line once per stream. Read without the lock.
  uint32_t generation() const { return generation_.load(std::memory_order_acquire); }

  // Events. Names are written once per method id (see method_id()).
  // `replayed`: code that was there before the stream began (time 0).
  void compiled_load(uint64_t start, uint64_t size, uint32_t method, bool replayed);
  void inline_frames(uint64_t pc_offset, const uint32_t* methods, int count);  // innermost first
  // After the L or S line of the code at `start`: its frame geometry.
  // `complete`: bytes from start, -1 when never complete (or unknown);
  // `steps`: how the prologue builds the frame before that, in order.
  void frame(uint64_t start, int32_t frame_words, int32_t complete, const FrameStep* steps = nullptr, int count = 0);
  void compiled_unload(uint64_t start);
  // True the first time in a stream for `method` (a jmethodID): its P line
  // is yet to be written.
  bool claim_method_pointer(const void* method);
  // A P line: interpreted frames holding the Method* `pointer` run `method` (an id).
  void method_pointer(uint64_t pointer, uint32_t method);
  void stub(uint64_t start, uint64_t size, const char* name, bool replayed);
  // Ends one event group (a method load with its inline records): flushes.
  void commit();
  // Ends a Java event (A, C, F lines): flushes only when the buffer is half
  // full or the last flush is 100 ms old, so a sample costs no system call
  // (alloc and lock events come thousands of times a second; code loads
  // are rarer and the collector needs them at once). close() flushes the rest.
  void commit_lazy();

  // Java events (agent options alloc, live, lock). Frames are method ids,
  // innermost first; `truncated`: deeper frames were cut at the depth limit.
  void option(const char* key, const char* value);
  void thread_name(uint32_t tid, const char* name);
  // `native`: the allocation's native frames (call-site addresses,
  // innermost first) when it was made by native code; none (0) otherwise.
  void alloc(uint64_t time_ns, uint32_t tid, uint64_t size, uint32_t klass, uint64_t sample, const uint32_t* frames,
             int count, bool truncated, const uint64_t* native = nullptr, int native_count = 0);
  void freed(uint64_t sample);
  void held(uint32_t index, uint64_t sample);
  void contended(uint64_t time_ns, uint32_t tid, uint64_t wait_ns, uint32_t klass, const uint32_t* frames, int count,
                 bool truncated);
  void counter(const char* name, uint64_t value);

  // Caller holds the lock around one event group so groups never interleave.
  void lock() { pthread_mutex_lock(&mutex_); }
  void unlock() { pthread_mutex_unlock(&mutex_); }

  // The id for `key` (a jmethodID), and whether it is new (then the caller
  // names it with define_method()). 0 when the table is full.
  uint32_t method_id(const void* key, bool* is_new);
  void define_method(uint32_t id, const char* name);
  // The same for classes, keyed by a hash of the class name (names, not
  // jclass handles, are what stays stable across events).
  uint32_t class_id(uint64_t name_hash, bool* is_new);
  void define_class(uint32_t id, const char* name);

  // Bytes that could not be written (disk full, file gone): dropped rather
  // than stalling the JVM.
  uint64_t write_errors() const { return write_errors_; }

 private:
  void append(const char* data, size_t n);
  void appendf(const char* format, ...) __attribute__((format(printf, 2, 3)));
  void append_frames(char* line, size_t& n, size_t size, const uint32_t* frames, int count, bool truncated);
  void flush();
  // Past protocol::kFileBytes, at the end of an event group: goes on in a
  // new file (an R line ends this one).
  void continue_if_full();

  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  int fd_ = -1;
  char path_[4096] = {};     // the stream's first file
  uint32_t files_ = 0;       // files the stream went on in
  uint64_t file_bytes_ = 0;  // written to the current one
  uint64_t file_bytes_limit_;
  std::atomic<uint32_t> generation_{0};
  char buffer_[1 << 16];
  size_t used_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t write_errors_ = 0;
  // 2M methods is far beyond any real JVM (a large service has ~100k); the
  // table stays under 64 MiB. Classes: a large service loads ~50k.
  IdTable methods_{size_t{1} << 21};
  IdTable method_pointers_{size_t{1} << 21};  // the jmethodIDs given a P line
  IdTable classes_{size_t{1} << 20};
};

}  // namespace ember::agent
