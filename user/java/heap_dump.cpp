#include "user/java/heap_dump.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "user/java/agent_dir.h"
#include "user/java/java_attach.h"
#include "user/java/jvm.h"

namespace ember {
namespace {

// The attach command returns when the dump is written: minutes on a big heap.
constexpr int kHeapDumpTimeoutMs = 600'000;
constexpr char kDumpName[] = "heap.hprof";

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

MappedFile::MappedFile(int fd) {
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    size_ = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<const char*>(p);
  }
  close(fd);
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<char*>(data_), size_);
}

std::string_view MappedFile::view() const { return data_ ? std::string_view(data_, size_) : std::string_view(); }

void MappedFile::done_with(size_t offset) const {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (data_ && offset >= page) madvise(const_cast<char*>(data_), offset / page * page, MADV_DONTNEED);
}

heap::HeapLayout heap_layout(pid_t pid) {
  heap::HeapLayout l;
  auto flag = [pid](const char* name) { return java::printflag(pid, name); };
  if (flag("UseCompressedOops") == "false") l.reference = 8;
  if (flag("UseCompactObjectHeaders") == "true") {  // JDK 24 on: the class pointer is in the mark word
    l.header = 8;
    l.array_header = 12;
  } else if (flag("UseCompressedClassPointers") == "false") {
    l.header = 16;
    l.array_header = 20;
  }
  if (auto a = flag("ObjectAlignmentInBytes")) l.alignment = static_cast<uint32_t>(std::max(8L, std::atol(a->c_str())));
  // java.lang.Class objects hold fields HotSpot injects, which the dump
  // does not list (javaClasses.hpp: the Klass* and array Klass*, the
  // object's size, its count of static references; the protection domain,
  // signers and source file as references).
  l.mirror_extra = 2 * 8 + 2 * 4 + 3 * l.reference;
  return l;
}

std::expected<int64_t, std::string> check_dump_size(pid_t pid, bool force, std::string_view what) {
  std::string jvm_name = "JVM " + std::to_string(pid);
  auto telemetry = read_telemetry(pid);
  int64_t used = telemetry ? telemetry->heap().used : -1;
  if (force) return used;
  if (used < 0)
    return std::unexpected("the heap size of " + jvm_name + " is unknown (" +
                           (telemetry ? std::string("its collector publishes no heap counters") : telemetry.error()) +
                           "): add --force to dump it all the same");
  if (used > kHeapDumpCap)
    return std::unexpected(jvm_name + " has " + mib(used) + " of heap in use, above " + std::string(what) +
                           "'s limit of " + mib(kHeapDumpCap) +
                           ": the dump pauses the JVM for seconds and writes a file about as big as its live objects "
                           "in its /tmp; add --force to dump it all the same");
  return used;
}

std::expected<HeapDump, std::string> dump_heap(pid_t pid, bool force, std::string_view what) {
  auto jvm = java::inspect_jvm(pid);
  if (!jvm) return std::unexpected(jvm.error());
  if (auto a = check_attachable(pid, what); !a) return std::unexpected(a.error());
  std::string jvm_name = "JVM " + std::to_string(pid);
  HeapDump dump;
  auto used = check_dump_size(pid, force, what);
  if (!used) return std::unexpected(used.error());
  dump.used = *used;
  // What a killed ember left behind goes first.
  sweep_agent_dirs(jvm->own_mount_ns ? jvm->root : "");
  auto dir = AgentDir::create(jvm->own_mount_ns ? jvm->root : "", jvm->uid, jvm->gid);
  if (!dir) return std::unexpected(jvm_name + ": " + dir.error());

  std::fprintf(stderr, "ember: dumping the heap of %s (%s in use): the JVM is paused for a full GC and the dump\n",
               jvm_name.c_str(), dump.used >= 0 ? mib(dump.used).c_str() : "size unknown");
  // The pause is the JVM's own time at safepoints across the dump; the
  // command's time where the JVM publishes no counters.
  auto ahead = read_telemetry(pid);
  auto asked = std::chrono::steady_clock::now();
  std::vector<std::string> args{dir->path() + "/" + kDumpName, "-live"};
  auto dumped = java::attach_command(pid, "dumpheap", args, kHeapDumpTimeoutMs);
  dump.pause = std::chrono::steady_clock::now() - asked;
  if (!dumped) {
    if (java::has_exited(pid)) return std::unexpected(jvm_name + " exited during the dump; nothing of it is left in its /tmp");
    return std::unexpected(dumped.error());
  }
  // HotSpot answers 0 whether the dump was made or not; its words tell,
  // the reason last ("Dump file is incomplete: No space left on device").
  if (dumped->code != 0 || dumped->output.find("Heap dump file created") == std::string::npos) {
    std::string_view said = dumped->output;
    while (said.ends_with('\n')) said.remove_suffix(1);
    return std::unexpected(jvm_name + " did not dump its heap: " + std::string(said.substr(said.rfind('\n') + 1)));
  }
  if (auto after = read_telemetry(pid);
      ahead && after && ahead->safepoint_ticks >= 0 && after->safepoint_ticks >= ahead->safepoint_ticks &&
      after->frequency > 0) {
    dump.pause = std::chrono::nanoseconds(static_cast<int64_t>(
        static_cast<double>(after->safepoint_ticks - ahead->safepoint_ticks) * 1e9 / static_cast<double>(after->frequency)));
    dump.pause_at_most = false;
  }
  int fd = dir->open_file(kDumpName);
  if (fd < 0) return std::unexpected(jvm_name + " wrote no heap dump: " + dumped->output);
  // Mapped, the dump needs no name: a killed ember leaves it nowhere.
  dump.file = std::make_unique<MappedFile>(fd);
  dir->remove_file(kDumpName);
  return dump;
}

}  // namespace ember
