// `ember jvm`: live heap, GC and allocation figures of a JVM from its
// hsperfdata counters (no agent, no attach), and class histograms over
// HotSpot's attach protocol with a diff against a saved one.
#pragma once

#include <sys/types.h>

#include <ctime>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "user/java/hsperf.h"

namespace ember {

struct JvmOptions {
  pid_t pid = 0;
  double interval = 1;  // seconds between lines
  uint64_t count = 0;   // lines to print; 0: until Ctrl-C or the JVM exits
  bool histo = false;   // a class histogram instead of the live lines
  bool live = false;    // histogram of reachable objects only (HotSpot runs a full GC first)
  std::string save;     // write the histogram here
  std::string diff;     // print the change since this saved histogram
  size_t top = 20;      // rows of the histogram or the diff
  bool heap = false;    // dump the heap: retained sizes, what holds them (user/java/jvm_heap.cpp)
  std::string output;   // with heap: the dominator tree as a flamegraph (.html, .folded, .pb.gz)
  bool force = false;   // with heap: dump one above kHeapDumpCap, or of unknown size
  std::string alloc;    // with heap: a recording of `record -e alloc --live` of the JVM, for allocation sites
  std::string track;    // a regex: instances and bytes of the matching classes over time (user/java/jvm_track.cpp)
  double every = 10;    // with track: seconds between histograms
  double duration = 0;  // with track: seconds to track (0: until Ctrl-C or the JVM exits); with leaks: to follow (0: a minute)
  bool leaks = false;   // follow allocations, then join the old ones' sites with the heap (user/java/jvm_leaks.cpp)
  uint64_t min_age_ns = 0;           // with leaks: objects at least this old by the end (0: a quarter of the duration)
  uint64_t alloc_interval = 512 * 1024;  // with leaks: bytes between allocation samples
  double attach_timeout = 10;        // with leaks: seconds for the JVM's attach socket, and for the agent's load
};

// `ember jvm --heap` dumps heaps up to this much in use without --force: the
// JVM is paused for a full GC and the dump (about 0.6 s for 350 MB on 2
// cores: bench/heap.sh), and the dump, as big as the heap's live objects,
// is written in the JVM's /tmp (which may be memory) until ember has read it.
inline constexpr int64_t kHeapDumpCap = int64_t{2} << 30;

int run_jvm(const JvmOptions& options);
int run_heap(const JvmOptions& options);
int run_track(const JvmOptions& options);
int run_leaks(const JvmOptions& options);

// Shared by the modes of `ember jvm`: "ember: MESSAGE" on stderr, and 1
// (the exit status); a time, and the time now, as saved files and pages
// give it ("2026-11-27 01:52:26 UTC").
int fail(const std::string& message);
std::string utc_text(time_t t);
std::string utc_now();
// Fails for a JVM that refuses attach (-XX:+DisableAttachMechanism), naming
// the option that needs it (`what`: "--heap").
std::expected<void, std::string> check_attachable(pid_t pid, std::string_view what);
// Ctrl-C and SIGTERM end a mode that runs until told (--track, --leaks):
// after catch_stop_signals, stop_requested says whether one came.
void catch_stop_signals();
bool stop_requested();
// The text of a file saved for --diff, or why it cannot be read.
std::expected<std::string, std::string> read_saved(const std::string& path);


// Bytes; -1 where the JVM has no such counter (ZGC has no eden, ...).
struct JvmSpace {
  int64_t used = -1;
  int64_t committed = -1;
  bool known() const { return used >= 0; }
};

enum class GcRole { young, full, other };

struct JvmCollector {
  std::string name;  // "G1 young collection pauses"
  GcRole role = GcRole::other;
  int64_t count = 0;                      // invocations
  int64_t ticks = 0;                      // time in them, sun.os.hrt ticks
  int64_t last_entry = 0, last_exit = 0;  // ticks
};

// HotSpot's TLAB statistics, which it publishes at each GC for the span
// since the GC before (threadLocalAllocBuffer.cpp): sizes in heap words,
// -1 if the JVM has none.
struct JvmTlabEpoch {
  int64_t alloc = -1;  // sun.gc.tlab.alloc: words of TLABs handed out
  int64_t fills = -1, gc_waste = -1, refill_waste = -1, slow_alloc = -1, threads = -1;
  bool operator==(const JvmTlabEpoch&) const = default;
};

struct JvmTelemetry {
  pid_t pid = 0;
  std::string main_class;  // first word of sun.rt.javaCommand
  std::string gc;          // "G1", "Parallel", "Serial", or HotSpot's policy name
  int64_t frequency = 0;   // sun.os.hrt.frequency: ticks per second
  int64_t ticks = 0;       // sun.os.hrt.ticks: the JVM's last counter sample
  double read_at = 0;      // ember's CLOCK_MONOTONIC when read, seconds
  // Serial and Parallel sample their space counters (every 50 ms,
  // PerfDataSamplingInterval) and at each GC; G1 updates them as eden
  // regions fill and at each GC.
  bool sampled_spaces = false;
  JvmSpace eden, survivors, old, metaspace;
  std::vector<JvmCollector> collectors;
  JvmTlabEpoch tlab;
  int64_t safepoint_ticks = -1;  // sun.rt.safepointTime: time at safepoints since the JVM started

  // Some collector has entered and not yet left a pause: the counters are
  // half updated.
  bool in_gc() const;
  JvmSpace heap() const;  // eden + survivors + old
  int64_t gc_count(GcRole role) const;
  double gc_seconds(GcRole role) const;
  bool has_role(GcRole role) const;
  // When its heap counters were true, in seconds on the clock shared by
  // every telemetry of one JVM read by one ember.
  double time() const;
};

// The telemetry in a snapshot of the counters; `read_at` as given.
JvmTelemetry telemetry_from(const hsperf::Snapshot& snapshot, pid_t pid, double read_at);

// The counters of JVM `pid` now, waiting out a GC pause in progress (up to
// 0.5 s); the error says why not and what to do.
std::expected<JvmTelemetry, std::string> read_telemetry(pid_t pid);
// The same, nothing on failure: for `ember record`'s summary.
std::optional<JvmTelemetry> read_jvm_telemetry(pid_t pid);

// Bytes allocated between two readings of one JVM. Between GCs that is
// the growth of eden (plus that of the old generation: objects too large
// for eden, G1's humongous ones, go there directly). Each GC empties eden,
// so what eden held when the GC began is added: HotSpot keeps no counter of
// it, but publishes at each GC the sizes of the TLABs it handed out since
// the GC before (sun.gc.tlab.alloc), which fill eden; when `after` holds
// the epoch that ended at the only GC in between, the figure is exact to
// the TLAB (minus allocations outside TLABs, which are rare). With more
// GCs in between, the epochs not seen are estimated as the one seen
// (`estimated_gcs`). `known` is false for JVMs without an eden (ZGC,
// Shenandoah).
struct JvmAllocation {
  bool known = false;
  int64_t bytes = 0;
  int64_t gcs = 0;            // young and full GCs in between
  int64_t estimated_gcs = 0;  // GCs whose eden was estimated
  JvmAllocation& operator+=(const JvmAllocation& other);
};
JvmAllocation allocated_between(const JvmTelemetry& before, const JvmTelemetry& after);

// Whether `after` was read during a GC pause (its counters half updated),
// `before` being an earlier reading: such a reading is skipped.
bool mid_gc(const JvmTelemetry& before, const JvmTelemetry& after);

// One paragraph: heap now, GCs and GC time between the two, allocation
// rate. For `ember record`'s summary.
std::string summarize_jvm(const JvmTelemetry& before, const JvmTelemetry& after);

// Follows one JVM's counters. With poll() called often (every 10 to 100
// ms), each GC is seen on its own, so the allocation summed across them is
// exact where two readings far apart (summarize_jvm) can only estimate it.
class JvmWatch {
 public:
  // Opens the JVM's hsperfdata and reads it, waiting up to `patience`
  // seconds for a JVM still creating its counters (or in a GC pause).
  static std::expected<JvmWatch, std::string> start(pid_t pid, double patience);
  // Reads the counters once (~40 µs), passing over a reading taken in a GC
  // pause. An error once the JVM has exited, or if its file stayed
  // unreadable for 2 s.
  std::expected<void, std::string> poll();
  const JvmTelemetry& first() const { return first_; }
  const JvmTelemetry& last() const { return last_; }
  const JvmAllocation& allocated() const { return allocated_; }  // from first() to last()
  const std::string& path() const { return file_.path(); }
  // summarize_jvm(first(), last()), with allocated() for the allocation.
  std::string summary() const;

 private:
  JvmWatch(hsperf::File file, JvmTelemetry first);
  hsperf::File file_;
  JvmTelemetry first_, last_;
  JvmAllocation allocated_;
  double failing_since_ = 0;  // monotonic seconds of the first failed read of a run; 0: none
};

// A class histogram: instances and bytes per class name (classes of one
// name from several class loaders are summed), largest first.
struct ClassCount {
  std::string name;
  int64_t instances = 0;
  int64_t bytes = 0;
};
struct ClassHistogram {
  std::vector<ClassCount> classes;
  int64_t instances() const;
  int64_t bytes() const;
};

// Reads HotSpot's histogram table (what jmap -histo and `jcmd
// GC.class_histogram` print: " 1:  INSTANCES  BYTES  NAME (MODULE)") or
// ember's saved one ("INSTANCES BYTES NAME", '#' comments). `source` names
// the input in errors.
std::expected<ClassHistogram, std::string> parse_histogram(std::string_view text, std::string_view source);
// The class histogram of JVM `pid` over its attach protocol; `live`: of
// reachable objects only (HotSpot runs a full GC first).
std::expected<ClassHistogram, std::string> class_histogram(pid_t pid, bool live);

// ember's histogram file: a comment header, then "INSTANCES BYTES NAME".
std::string histogram_text(const ClassHistogram& histogram, std::string_view comment);

struct ClassDelta {
  std::string name;
  int64_t instances = 0, bytes = 0;      // now
  int64_t d_instances = 0, d_bytes = 0;  // now minus before
};
// Classes whose instances or bytes changed, the largest change of bytes
// first, gained or lost (the sign stays in d_bytes).
std::vector<ClassDelta> diff_histograms(const ClassHistogram& before, const ClassHistogram& now);

// Histograms of the classes a tracker follows, over time.
struct ClassTrack {
  std::vector<double> times;  // seconds since the first histogram
  struct Series {
    std::string name;
    std::vector<int64_t> instances, bytes;  // per time; 0 where the class had none
  };
  std::vector<Series> series;  // in the order first seen
  // Adds a histogram's classes that `keep` accepts, taken at `time`.
  template <class Keep>
  void add(double time, const ClassHistogram& histogram, Keep&& keep);
};
// Long CSV ("seconds,class,instances,bytes"), a row per class and time.
std::string track_csv(const ClassTrack& track);
// The tracker's page: a line chart per class (user/java/track.html).
// `facts`: JSON object of what the page says about the run.
std::string track_html(const ClassTrack& track, const std::string& title, const std::string& facts_json);

template <class Keep>
void ClassTrack::add(double time, const ClassHistogram& histogram, Keep&& keep) {
  times.push_back(time);
  for (Series& s : series) {
    s.instances.push_back(0);
    s.bytes.push_back(0);
  }
  for (const ClassCount& c : histogram.classes) {
    if (!keep(c.name)) continue;
    auto it = std::find_if(series.begin(), series.end(), [&](const Series& s) { return s.name == c.name; });
    if (it == series.end()) {
      series.push_back({c.name, std::vector<int64_t>(times.size(), 0), std::vector<int64_t>(times.size(), 0)});
      it = series.end() - 1;
    }
    it->instances.back() = c.instances;
    it->bytes.back() = c.bytes;
  }
}

}  // namespace ember
