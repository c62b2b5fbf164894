// `ember jvm PID --heap`: the JVM dumps its heap (HPROF, user/heap/hprof.h)
// and ember works out what keeps its memory alive (user/heap/heap_report.h).
#include <malloc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "flamegraph/input.h"
#include "flamegraph/output.h"
#include "symbolizer/proc_maps.h"
#include "user/heap/heap_graph.h"
#include "user/heap/heap_report.h"
#include "user/java/heap_dump.h"
#include "user/java/java_profiles.h"
#include "user/java/jvm.h"

namespace ember {
namespace {

// What a saved snapshot's first comment says, without its '#' and our prefix.
std::string snapshot_comment(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  constexpr std::string_view kOurs = "# ember heap snapshot: ";
  return line.starts_with(kOurs) ? std::string(line.substr(kOurs.size())) : "";
}

// Whether `recording` (read from `path`) is of JVM `pid` as it runs now:
// its "jvms" note lists the JVMs it recorded, each with when it started
// (a pid is given again after its process exits). Folded stacks keep no
// notes: taken as this JVM's, with a word on stderr.
std::expected<void, std::string> recorded_this_jvm(const flamegraph::Profile& recording, const std::string& path,
                                                   pid_t pid) {
  const std::string* jvms = recording.info_value("jvms");
  if (!jvms) {
    std::fprintf(stderr, "ember: %s does not say which JVM it recorded (folded stacks keep no notes): taken as JVM %d's\n",
                 path.c_str(), static_cast<int>(pid));
    return {};
  }
  const std::string id = std::to_string(pid);
  std::optional<std::string> then = jvm_started_in_note(*jvms, static_cast<uint32_t>(pid));
  if (!then)
    return std::unexpected(path + " is a recording of JVM " + *jvms + ", not of JVM " + id +
                           ": record this one with ember record -p " + id + " -e alloc --live");
  std::string now = symbolizer::process_start_text(static_cast<uint32_t>(pid));
  if (then->empty() || now.empty() || now == *then) return {};
  return std::unexpected("JVM " + id + " restarted since " + path + " was recorded (the JVM recorded started at " +
                         utc_text(std::atoll(then->c_str())) + ", this one at " + utc_text(std::atoll(now.c_str())) +
                         "): its objects are not the ones recorded; record it again with ember record -p " + id +
                         " -e alloc --live");
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
    if (auto same = recorded_this_jvm(*alloc, o.alloc, o.pid); !same) return fail(same.error());
  }
  if (!o.save.empty())
    if (auto w = flamegraph::check_writable(o.save); !w) return fail(w.error());
  if (!o.output.empty()) {
    if (auto f = flamegraph::format_for_path(o.output); !f) return fail(f.error());
    if (auto w = flamegraph::check_writable(o.output); !w) return fail(w.error());
  }
  std::string jvm_name = "JVM " + std::to_string(o.pid);
  auto telemetry = read_telemetry(o.pid);
  auto dumped = dump_heap(o.pid, o.force, "--heap");
  if (!dumped) return fail(dumped.error());
  const MappedFile& dump = *dumped->file;
  // The analysis allocates and frees arrays of tens or hundreds of MB in
  // stages. Each gets a mapping of its own, returned to the system when
  // freed: glibc would otherwise raise its threshold to the first freed
  // one's size and serve the next from its heap, which keeps their pages
  // (215 MiB of peak memory against 185, measured at 5 M objects).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  auto start = std::chrono::steady_clock::now();
  // The dump is read in passes, each holding a window of it.
  auto done_with = [&dump](size_t offset) { dump.done_with(offset); };
  auto graph = heap::read_heap_graph(dump.view(), heap_layout(o.pid), done_with);
  if (!graph) return fail(jvm_name + ": " + graph.error());
  auto analyzed = heap::analyze_heap(*graph, dump.view(), std::min<size_t>(o.top, 50), done_with);
  if (!analyzed) return fail(jvm_name + ": " + analyzed.error());
  heap::HeapAnalysis& analysis = *analyzed;
  analysis.pause_ns = static_cast<uint64_t>(dumped->pause.count());
  analysis.pause_at_most = dumped->pause_at_most;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // The dump is mapped, not read: the pages of its window count in the peak.
  std::fprintf(stderr, "ember: the dump (%.1f MiB, %llu objects) read and analysed in %.2f s; ember's peak memory %ld MiB\n",
               static_cast<double>(dump.view().size()) / (1 << 20), static_cast<unsigned long long>(graph->objects()),
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
