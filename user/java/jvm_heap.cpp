// `ember jvm PID --heap`: the agent walks the JVM's heap (agent/heap_walk.h)
// and ember works out what keeps its memory alive (user/java/heap_report.h).
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "agent/heap_stream.h"
#include "flamegraph/input.h"
#include "flamegraph/output.h"
#include "user/java/agent_dir.h"
#include "user/java/heap_graph.h"
#include "user/java/heap_report.h"
#include "user/java/java.h"
#include "user/java/java_attach.h"
#include "user/java/jvm.h"

namespace ember {
namespace {

// The attach command returns when the walk has: minutes on a big heap.
constexpr int kHeapWalkTimeoutMs = 600'000;
constexpr char kStreamName[] = "heap";

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// A file mapped for reading, unmapped with it.
class Mapped {
 public:
  explicit Mapped(int fd) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      size_ = static_cast<size_t>(st.st_size);
      void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      data_ = p == MAP_FAILED ? nullptr : static_cast<const char*>(p);
    }
    close(fd);
  }
  ~Mapped() {
    if (data_) munmap(const_cast<char*>(data_), size_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  std::string_view view() const { return data_ ? std::string_view(data_, size_) : std::string_view(); }
  // Lets go of the pages before `offset` (they stay in the page cache, and
  // are mapped again if read again).
  void done_with(size_t offset) const {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (data_ && offset >= page) madvise(const_cast<char*>(data_), offset / page * page, MADV_DONTNEED);
  }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// What a saved snapshot's first comment says, without its '#' and our prefix.
std::string snapshot_comment(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  constexpr std::string_view kOurs = "# ember heap snapshot: ";
  return line.starts_with(kOurs) ? std::string(line.substr(kOurs.size())) : "";
}

}  // namespace

int run_heap(const JvmOptions& o) {
  if (o.histo || o.live || !o.track.empty()) return fail("--heap goes without --histo, --live and --track");
  // Before any attach: the saved snapshot must read, the outputs be
  // writable, the heap not too big.
  std::optional<std::vector<heap::ClassSize>> before;
  std::string before_label;
  if (!o.diff.empty()) {
    auto text = read_saved(o.diff);
    if (!text) return fail(text.error());
    auto parsed = heap::parse_heap_snapshot(*text, o.diff);
    if (!parsed) return fail(parsed.error());
    before = std::move(*parsed);
    before_label = snapshot_comment(*text);
  }
  std::optional<flamegraph::Profile> alloc;
  if (!o.alloc.empty()) {
    auto read = flamegraph::read_profile(o.alloc);
    if (!read) return fail(o.alloc + ": " + read.error());
    alloc = std::move(read->profile);
  }
  if (!o.save.empty())
    if (auto w = flamegraph::check_writable(o.save); !w) return fail(w.error());
  if (!o.output.empty()) {
    if (auto f = flamegraph::format_for_path(o.output); !f) return fail(f.error());
    if (auto w = flamegraph::check_writable(o.output); !w) return fail(w.error());
  }
  auto jvm = java::inspect_jvm(o.pid);
  if (!jvm) return fail(jvm.error());
  if (auto a = check_attachable(o.pid, "--heap"); !a) return fail(a.error());
  std::string jvm_name = "JVM " + std::to_string(o.pid);
  auto telemetry = read_telemetry(o.pid);
  int64_t used = telemetry ? telemetry->heap().used : -1;
  if (!o.force) {
    if (used < 0)
      return fail("the heap size of " + jvm_name + " is unknown (" +
                  (telemetry ? std::string("its collector publishes no heap counters") : telemetry.error()) +
                  "): add --force to walk it all the same");
    if (used > kHeapWalkCap)
      return fail(jvm_name + " has " + mib(used) + " of heap in use, above --heap's limit of " + mib(kHeapWalkCap) +
                  ": the walk pauses the JVM for seconds and keeps a tag of ~60 bytes per object in it; add --force "
                  "to walk it all the same");
  }
  auto agent = agent_for(*jvm, default_agent_path());
  if (!agent) return fail(jvm_name + ": " + agent.error());
  // What a killed ember left behind goes first.
  sweep_agent_dirs(jvm->own_mount_ns ? jvm->root : "");
  auto dir = AgentDir::create(jvm->own_mount_ns ? jvm->root : "", jvm->uid, jvm->gid);
  if (!dir) return fail(jvm_name + ": " + dir.error());

  std::fprintf(stderr,
               "ember: walking the heap of %s (%s in use): the JVM is paused until the walk ends, and again while "
               "it frees the walk's tags\n",
               jvm_name.c_str(), used >= 0 ? mib(used).c_str() : "size unknown");
  std::string options = std::string(agent::heap_stream::kOption) + "=" + dir->path() + "/" + kStreamName;
  if (auto r = java::load_agent(o.pid, *agent, options, kHeapWalkTimeoutMs); !r) {
    if (java::has_exited(o.pid)) return fail(jvm_name + " exited during the walk; its agent directory is removed");
    return fail(r.error());
  }
  // HotSpot (JDK 25) frees a disposed JVMTI environment's tags at its next
  // safepoint, whatever brings it: 1.8-2.5 s more for 8 M objects. A thread
  // dump brings that safepoint now, where the walk's cost is reported,
  // rather than into the application's next GC. (JDK 17 frees them outside
  // safepoints: its thread dump takes milliseconds.)
  auto freeing = std::chrono::steady_clock::now();
  std::chrono::nanoseconds free_time{0};  // 0: not measured (the dump failed)
  if (java::attach_command(o.pid, "threaddump", {}, kHeapWalkTimeoutMs))
    free_time = std::chrono::steady_clock::now() - freeing;
  int fd = dir->open_file(kStreamName);
  if (fd < 0) return fail(jvm_name + ": its agent wrote no heap graph (the JVM's stderr says why)");
  Mapped stream(fd);
  // The analysis allocates and frees arrays of tens or hundreds of MB in
  // stages. Each gets a mapping of its own, returned to the system when
  // freed: glibc would otherwise raise its threshold to the first freed
  // one's size and serve the next from its heap, which keeps their pages
  // (215 MiB of peak memory against 185, measured at 5 M objects).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  auto start = std::chrono::steady_clock::now();
  // The stream is read in passes, each holding a window of it.
  auto done_with = [&stream](size_t offset) { stream.done_with(offset); };
  auto graph = heap::read_heap_graph(stream.view(), done_with);
  if (!graph) return fail(jvm_name + ": " + graph.error());
  auto analyzed = heap::analyze_heap(*graph, stream.view(), std::min<size_t>(o.top, 50), done_with);
  if (!analyzed) return fail(jvm_name + ": " + analyzed.error());
  heap::HeapAnalysis& analysis = *analyzed;
  analysis.free_ns = static_cast<uint64_t>(free_time.count());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // The graph stream is mapped, not read: the pages of its window count in the peak.
  std::fprintf(stderr, "ember: the graph (%.1f MiB, %llu objects) read and analysed in %.2f s; ember's peak memory %ld MiB\n",
               static_cast<double>(stream.view().size()) / (1 << 20), static_cast<unsigned long long>(graph->objects()),
               seconds, usage.ru_maxrss / 1024);
  std::string main_class = telemetry && !telemetry->main_class.empty() ? " (" + telemetry->main_class + ")" : "";
  std::printf("%s%s: ", jvm_name.c_str(), main_class.c_str());
  std::fputs(heap::heap_report(analysis, o.top).c_str(), stdout);
  if (alloc) std::fputs(heap::allocation_sites(analysis, *alloc, o.alloc, o.top).c_str(), stdout);
  if (before) {
    std::printf("\nChange since %s%s:\n", o.diff.c_str(), before_label.empty() ? "" : (" (" + before_label + ")").c_str());
    std::fputs(heap::heap_diff_report(heap::diff_heap_snapshots(*before, analysis.classes), o.top).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!o.save.empty()) {
    std::string comment = jvm_name + main_class + ", " + utc_now();
    if (auto w = flamegraph::write_atomically(o.save, heap::heap_snapshot_text(analysis.classes, comment)); !w)
      return fail(w.error());
    std::fprintf(stderr, "ember: saved the classes' sizes to %s\n", o.save.c_str());
  }
  if (!o.output.empty()) {
    analysis.profile.info = {{"JVM", std::to_string(o.pid) + main_class},
                             {"objects", std::to_string(analysis.objects)},
                             {"pause", std::to_string(analysis.pause_ns / 1000000) + " ms"}};
    flamegraph::HtmlOptions html;
    html.title = "Heap of " + jvm_name + main_class + ": retained bytes by dominator";
    if (auto w = flamegraph::write_profile(analysis.profile, o.output, html); !w) return fail(w.error());
    std::fprintf(stderr, "ember: wrote %s\n", o.output.c_str());
  }
  return 0;
}

}  // namespace ember
