// A JVM's heap dumped for ember to read (`ember jvm --heap`, `--leaks`):
// written by the JVM (HotSpot's `dumpheap -live`: a full GC, then the dump
// at the same safepoint) in a directory of ember's in its /tmp, mapped,
// its name removed at once (nothing is left if ember is killed).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include "user/heap/heap_graph.h"

namespace ember {

// A file mapped for reading, unmapped with it.
class MappedFile {
 public:
  explicit MappedFile(int fd);  // takes the descriptor
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view view() const;
  // Lets go of the pages before `offset` (they stay in the page cache, and
  // are mapped again if read again).
  void done_with(size_t offset) const;

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

struct HeapDump {
  std::unique_ptr<MappedFile> file;
  // How long the dump stopped the JVM, its GC included: the JVM's own time
  // at safepoints across it, or, without its counters, the command's whole
  // time (at_most).
  std::chrono::nanoseconds pause{0};
  bool pause_at_most = true;
  int64_t used = -1;  // bytes of heap in use before, -1 unknown
};

// Whether JVM `pid`'s heap may be dumped: not with more than kHeapDumpCap
// in use, or an unknown amount, unless `force`. The bytes in use (-1:
// unknown), or why not; `what` names the option ("--heap").
std::expected<int64_t, std::string> check_dump_size(pid_t pid, bool force, std::string_view what);

// Dumps JVM `pid`'s heap, or says why not: it has more than kHeapDumpCap in
// use, or an unknown amount, without `force`; attach is off; the JVM
// exited, or could not write the dump. `what` names the option ("--heap").
std::expected<HeapDump, std::string> dump_heap(pid_t pid, bool force, std::string_view what);

// How the JVM lays out its objects, from its flags: the dump does not say.
heap::HeapLayout heap_layout(pid_t pid);

}  // namespace ember
