#include "user/java/jvm.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "flamegraph/output.h"
#include "user/java/java_attach.h"

namespace ember {

int fail(const std::string& message) {
  std::fprintf(stderr, "ember: %s\n", message.c_str());
  return 1;
}

std::string utc_text(time_t t) {
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string utc_now() { return utc_text(time(nullptr)); }

std::expected<void, std::string> check_attachable(pid_t pid, std::string_view what) {
  // The attach layer's own message also offers -agentpath, which is for
  // recordings: these modes ask the JVM itself.
  if (java::jvm_flag(pid, "DisableAttachMechanism") == true)
    return std::unexpected("JVM " + std::to_string(pid) + " runs with -XX:+DisableAttachMechanism: " +
                           std::string(what) + " needs to attach to it; restart it without that flag");
  return {};
}

namespace {
std::atomic<bool> g_stop{false};
void on_stop(int) { g_stop = true; }
}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop.load(); }

std::expected<std::string, std::string> read_saved(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// A heap word on a 64-bit JVM: the unit of the sun.gc.tlab counters
// (HotSpot labels them bytes, but adds sizes in words: JDK 17
// threadLocalAllocBuffer.cpp, ThreadLocalAllocBuffer::fill).
constexpr int64_t kHeapWordSize = 8;
constexpr double kMiB = 1024.0 * 1024.0;
// How often `ember jvm` reads the counters between two lines: often enough
// to see each GC on its own, so that each eden emptied is known exactly
// (young GCs come every 100 ms or more in all but tiny heaps). A reading
// costs ~40 µs (32 KiB read and parsed): 0.4% of a CPU.
constexpr auto kPollPeriod = std::chrono::milliseconds(10);
// Heap inspection stops the JVM for a walk of the whole heap: seconds on
// large heaps.
constexpr int kHistogramTimeoutMs = 120'000;

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string jvm_gone(pid_t pid) { return "JVM " + std::to_string(pid) + " exited"; }

// The display name of HotSpot's GC policy (sun.gc.policy.name).
std::string gc_name(std::string_view policy) {
  if (policy == "GarbageFirst") return "G1";
  if (policy == "ParScav:MSC") return "Parallel";
  if (policy == "Copy:MSC") return "Serial";
  if (policy == "ParNew:CMS") return "CMS";
  return std::string(policy);
}

// Why a JVM has no hsperfdata file ember can find, with the fix.
std::string no_hsperfdata(pid_t pid, const std::string& lookup_error) {
  std::string jvm = "JVM " + std::to_string(pid);
  std::string histo = " (ember jvm PID --histo works without them)";
  if (java::jvm_flag(pid, "UsePerfData") == false)
    return jvm + " runs with -XX:-UsePerfData: it keeps no performance counters; restart it without that flag" + histo;
  if (java::jvm_flag(pid, "PerfDisableSharedMem") == true)
    return jvm + " runs with -XX:+PerfDisableSharedMem: its counters are not in a file; restart it without that flag" +
           histo;
  return lookup_error +
         ": the JVM could not create it (its /tmp was not writable when it started, or its user has no name in "
         "its /etc/passwd), or something deleted it since (a /tmp cleaner); restart the JVM with a writable /tmp";
}

struct Source {
  hsperf::File file;
  JvmTelemetry first;
};

// Reads until the counters are whole: the JVM may be starting (its file not
// yet marked accessible) or in a GC pause. Up to `patience` seconds.
std::expected<JvmTelemetry, std::string> read_whole(hsperf::File& file, pid_t pid, double patience) {
  double deadline = monotonic_seconds() + patience;
  std::string last_error;
  for (;;) {
    double now = monotonic_seconds();
    auto snap = file.read();
    if (snap && snap->accessible) {
      JvmTelemetry t = telemetry_from(*snap, pid, now);
      if (!t.in_gc() || now >= deadline) return t;
    } else {
      last_error = snap ? file.path() + ": the JVM has not finished creating its counters" : snap.error();
    }
    if (java::has_exited(pid)) return std::unexpected(jvm_gone(pid));
    if (now >= deadline && !last_error.empty()) return std::unexpected(last_error);
    std::this_thread::sleep_for(kPollPeriod);
  }
}

std::expected<Source, std::string> open_source(pid_t pid, double patience = 1.0) {
  auto jvm = java::inspect_jvm(pid);
  if (!jvm) return std::unexpected(jvm.error());
  auto path = hsperf::find_file(*jvm);
  if (!path) return std::unexpected(no_hsperfdata(pid, path.error()));
  auto file = hsperf::File::open(*path);
  if (!file) return std::unexpected(file.error());
  auto first = read_whole(*file, pid, patience);
  if (!first) return std::unexpected(first.error());
  return Source{std::move(*file), std::move(*first)};
}

// "12.0/40.0": used and committed MiB.
std::string used_of(const JvmSpace& s) {
  if (!s.known()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f/%.1f", s.used / kMiB, s.committed >= 0 ? s.committed / kMiB : 0.0);
  return buf;
}

std::string gcs_of(const JvmTelemetry& t, GcRole role) {
  if (!t.has_role(role)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld %.3fs", static_cast<long long>(t.gc_count(role)), t.gc_seconds(role));
  return buf;
}

double all_gc_seconds(const JvmTelemetry& t) {
  return t.gc_seconds(GcRole::young) + t.gc_seconds(GcRole::full) + t.gc_seconds(GcRole::other);
}

// MiB/s, "~" before it when estimated, "-" when unknown.
std::string rate_of(const JvmAllocation& a, double seconds) {
  if (!a.known || seconds <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%.1f", a.estimated_gcs ? "~" : "", a.bytes / kMiB / seconds);
  return buf;
}

std::string clock_now() {
  time_t now = time(nullptr);
  struct tm tm {};
  localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

bool has_other(const JvmTelemetry& t) { return t.has_role(GcRole::other); }

// Columns of `ember jvm`'s lines, the same for the header and the values.
constexpr const char* kColumns = "%-8s  %-13s  %-13s  %-15s  %-13s  %-15s  %-15s  ";
constexpr const char* kOtherColumn = "%-15s  ";
constexpr const char* kLastColumns = "%5s  %10s\n";

void print_header(const JvmTelemetry& t) {
  std::printf(kColumns, "time", "eden MB", "survivors MB", "old MB", "metaspace MB", "young GCs", "full GCs");
  if (has_other(t)) std::printf(kOtherColumn, "other pauses");
  std::printf(kLastColumns, "GC%", "alloc MB/s");
  std::fflush(stdout);
}

void print_line(const JvmTelemetry& from, const JvmTelemetry& to, const JvmAllocation& allocation) {
  double wall = to.read_at - from.read_at;
  double gc_share = wall > 0 ? 100 * (all_gc_seconds(to) - all_gc_seconds(from)) / wall : 0;
  char share[16];
  std::snprintf(share, sizeof share, "%.1f", std::clamp(gc_share, 0.0, 100.0));
  std::printf(kColumns, clock_now().c_str(), used_of(to.eden).c_str(), used_of(to.survivors).c_str(),
              used_of(to.old).c_str(), used_of(to.metaspace).c_str(), gcs_of(to, GcRole::young).c_str(),
              gcs_of(to, GcRole::full).c_str());
  if (has_other(to)) std::printf(kOtherColumn, gcs_of(to, GcRole::other).c_str());
  std::printf(kLastColumns, share, rate_of(allocation, to.time() - from.time()).c_str());
  std::fflush(stdout);
}

// What was allocated between two cumulative figures.
JvmAllocation since(const JvmAllocation& now, const JvmAllocation& base) {
  return {now.known, now.bytes - base.bytes, now.gcs - base.gcs, now.estimated_gcs - base.estimated_gcs};
}

int run_live(const JvmOptions& o) {
  if (!(o.interval > 0)) return fail("--interval must be more than 0 seconds");
  auto watch = JvmWatch::start(o.pid, 1.0);
  if (!watch) return fail(watch.error());
  const JvmTelemetry& first = watch->first();
  std::fprintf(stderr, "ember: JVM %d (%s), %s GC, counters from %s\n", o.pid,
               first.main_class.empty() ? "?" : first.main_class.c_str(), first.gc.c_str(), watch->path().c_str());
  print_header(first);

  using Clock = std::chrono::steady_clock;
  auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval));
  auto next = Clock::now() + interval;
  JvmTelemetry line_start = first;
  JvmAllocation line_base = watch->allocated();
  for (uint64_t printed = 0; o.count == 0 || printed < o.count;) {
    std::this_thread::sleep_until(std::min(next, Clock::now() + kPollPeriod));
    if (auto polled = watch->poll(); !polled) return fail(polled.error());
    if (Clock::now() < next) continue;
    if (java::has_exited(o.pid)) return fail(jvm_gone(o.pid));
    print_line(line_start, watch->last(), since(watch->allocated(), line_base));
    line_start = watch->last();
    line_base = watch->allocated();
    ++printed;
    next += interval;
    if (next < Clock::now()) next = Clock::now() + interval;  // suspended, or a slow terminal
  }
  return 0;
}


std::string signed_number(int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+lld", static_cast<long long>(v));
  return buf;
}

// The comment lines at the top of a saved histogram, without their '#'.
std::string first_comment(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (!line.starts_with('#')) return "";
  line.remove_prefix(1);
  while (line.starts_with(' ')) line.remove_prefix(1);
  constexpr std::string_view kOurs = "ember class histogram: ";
  if (line.starts_with(kOurs)) line.remove_prefix(kOurs.size());
  return std::string(line);
}

}  // namespace

std::expected<ClassHistogram, std::string> class_histogram(pid_t pid, bool live) {
  // JDK 17's inspectheap: arg0 "-live" (a full GC first) or "-all"; an
  // empty arg0 means -live. arg1: a file for the JVM to write to (none:
  // the reply); arg2: parallel threads (empty: HotSpot's default, 3/8 of
  // the CPUs). JDK 8 and 11 read arg0 only.
  std::string args[] = {live ? "-live" : "-all"};
  std::string jvm_name = "JVM " + std::to_string(pid);
  auto reply = java::attach_command(pid, "inspectheap", args, kHistogramTimeoutMs);
  if (!reply) return std::unexpected(reply.error());
  if (reply->code != 0) {
    std::string why = reply->output.substr(0, reply->output.find('\n'));
    return std::unexpected(jvm_name + " refused the class histogram (code " + std::to_string(reply->code) + ")" +
                           (why.empty() ? "" : ": " + why));
  }
  return parse_histogram(reply->output, jvm_name + "'s class histogram");
}

namespace {

int run_histo(const JvmOptions& o) {
  // The saved histogram first: a bad file should not cost a heap walk.
  std::optional<ClassHistogram> before;
  std::string before_label;
  if (!o.diff.empty()) {
    auto text = read_saved(o.diff);
    if (!text) return fail(text.error());
    auto parsed = parse_histogram(*text, o.diff);
    if (!parsed) return fail(parsed.error());
    before = std::move(*parsed);
    before_label = first_comment(*text);
  }

  auto jvm = java::inspect_jvm(o.pid);
  if (!jvm) return fail(jvm.error());
  if (auto a = check_attachable(o.pid, "--histo"); !a) return fail(a.error());
  auto now = class_histogram(o.pid, o.live);
  if (!now) return fail(now.error());
  std::string objects = o.live ? "live objects" : "all objects";

  if (before) {
    auto deltas = diff_histograms(*before, *now);
    std::printf("JVM %d, %s, change since %s%s: %s instances, %s bytes\n", o.pid, objects.c_str(), o.diff.c_str(),
                before_label.empty() ? "" : (" (" + before_label + ")").c_str(),
                signed_number(now->instances() - before->instances()).c_str(),
                signed_number(now->bytes() - before->bytes()).c_str());
    std::printf("%14s  %14s  %14s  %12s  %s\n", "bytes +/-", "instances +/-", "bytes", "instances", "class");
    for (size_t i = 0; i < deltas.size() && i < o.top; ++i) {
      const ClassDelta& d = deltas[i];
      std::printf("%14s  %14s  %14lld  %12lld  %s\n", signed_number(d.d_bytes).c_str(),
                  signed_number(d.d_instances).c_str(), static_cast<long long>(d.bytes),
                  static_cast<long long>(d.instances), d.name.c_str());
    }
    if (deltas.size() > o.top) std::printf("(%zu more classes changed)\n", deltas.size() - o.top);
  } else {
    std::printf("JVM %d, %s: %zu classes, %lld instances, %lld bytes\n", o.pid, objects.c_str(), now->classes.size(),
                static_cast<long long>(now->instances()), static_cast<long long>(now->bytes()));
    std::printf("%5s  %12s  %14s  %s\n", "rank", "instances", "bytes", "class");
    for (size_t i = 0; i < now->classes.size() && i < o.top; ++i) {
      const ClassCount& c = now->classes[i];
      std::printf("%5zu  %12lld  %14lld  %s\n", i + 1, static_cast<long long>(c.instances),
                  static_cast<long long>(c.bytes), c.name.c_str());
    }
  }
  if (!o.save.empty()) {
    std::string comment = "JVM " + std::to_string(o.pid) + ", " + objects + ", " + utc_now();
    if (auto w = flamegraph::write_atomically(o.save, histogram_text(*now, comment)); !w) return fail(w.error());
    std::fprintf(stderr, "ember: saved the histogram to %s\n", o.save.c_str());
  }
  return 0;
}

// "N young GCs (T s)" for the summary.
std::string gc_phrase(const JvmTelemetry& a, const JvmTelemetry& b, GcRole role, std::string_view what) {
  int64_t n = b.gc_count(role) - a.gc_count(role);
  char buf[128];
  if (n == 0) {
    std::snprintf(buf, sizeof buf, "no %.*s", static_cast<int>(what.size()), what.data());
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%lld %.*s%s (%.3f s)", static_cast<long long>(n), static_cast<int>(what.size()),
                what.data(), n == 1 ? "" : "s", b.gc_seconds(role) - a.gc_seconds(role));
  return buf;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A non-negative decimal integer field, the rest of `s` after it.
std::optional<int64_t> take_number(std::string_view& s) {
  s = trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || v < 0 || end == s.data()) return std::nullopt;
  if (end != s.data() + s.size() && *end != ' ' && *end != '\t') return std::nullopt;
  s.remove_prefix(static_cast<size_t>(end - s.data()));
  return v;
}

std::string summarize(const JvmTelemetry& a, const JvmTelemetry& b, const JvmAllocation& alloc) {
  std::string out =
      "JVM " + std::to_string(b.pid) + " (" + (b.main_class.empty() ? "?" : b.main_class) + ", " + b.gc + "): ";
  char buf[512];
  JvmSpace heap = b.heap();
  if (heap.known()) {
    std::snprintf(buf, sizeof buf, "heap %.1f MB used of %.1f MB committed", heap.used / kMiB, heap.committed / kMiB);
    out += buf;
    if (b.eden.known()) {
      std::snprintf(buf, sizeof buf, " (eden %.1f, survivors %.1f, old %.1f MB)", b.eden.used / kMiB,
                    std::max<int64_t>(b.survivors.used, 0) / kMiB, std::max<int64_t>(b.old.used, 0) / kMiB);
      out += buf;
    }
  } else {
    out += "heap size unknown";
  }
  if (b.metaspace.known()) {
    std::snprintf(buf, sizeof buf, ", metaspace %.1f MB", b.metaspace.used / kMiB);
    out += buf;
  }
  double wall = b.read_at - a.read_at;
  std::snprintf(buf, sizeof buf, ". In %.1f s: ", wall);
  out += buf;
  std::vector<std::string> gcs;
  if (b.has_role(GcRole::young)) gcs.push_back(gc_phrase(a, b, GcRole::young, "young GC"));
  if (b.has_role(GcRole::full)) gcs.push_back(gc_phrase(a, b, GcRole::full, "full GC"));
  if (b.has_role(GcRole::other)) gcs.push_back(gc_phrase(a, b, GcRole::other, "other GC pause"));
  for (size_t i = 0; i < gcs.size(); ++i) out += (i ? ", " : "") + gcs[i];
  double paused = all_gc_seconds(b) - all_gc_seconds(a);
  std::snprintf(buf, sizeof buf, "%s%.1f%% of the time in GC pauses; ", gcs.empty() ? "" : ", ",
                wall > 0 ? std::clamp(100 * paused / wall, 0.0, 100.0) : 0.0);
  out += buf;
  double span = b.time() - a.time();
  if (!alloc.known) {
    out += "allocation rate unknown (no eden counters with this GC).";
  } else if (span <= 0) {
    out += "allocation rate unknown (the counters did not change between the two readings).";
  } else {
    const char* approx = alloc.estimated_gcs ? "~" : "";
    std::snprintf(buf, sizeof buf, "%s%.1f MB allocated, %s%.1f MB/s", approx, alloc.bytes / kMiB, approx,
                  alloc.bytes / kMiB / span);
    out += buf;
    if (alloc.estimated_gcs) {
      std::snprintf(buf, sizeof buf, " (estimated for %lld of the %lld GCs, which ember did not see one by one)",
                    static_cast<long long>(alloc.estimated_gcs), static_cast<long long>(alloc.gcs));
      out += buf;
    }
    out += ".";
  }
  return out;
}

}  // namespace

bool JvmTelemetry::in_gc() const {
  for (const JvmCollector& c : collectors)
    if (c.last_entry > c.last_exit) return true;
  return false;
}

JvmSpace JvmTelemetry::heap() const {
  JvmSpace h;
  for (const JvmSpace* s : {&eden, &survivors, &old}) {
    if (!s->known()) continue;
    h.used = std::max<int64_t>(h.used, 0) + s->used;
    h.committed = std::max<int64_t>(h.committed, 0) + std::max<int64_t>(s->committed, 0);
  }
  return h;
}

int64_t JvmTelemetry::gc_count(GcRole role) const {
  int64_t n = 0;
  for (const JvmCollector& c : collectors)
    if (c.role == role) n += c.count;
  return n;
}

double JvmTelemetry::gc_seconds(GcRole role) const {
  int64_t ticks = 0;
  for (const JvmCollector& c : collectors)
    if (c.role == role) ticks += c.ticks;
  return frequency > 0 ? static_cast<double>(ticks) / static_cast<double>(frequency) : 0;
}

bool JvmTelemetry::has_role(GcRole role) const {
  return std::any_of(collectors.begin(), collectors.end(), [&](const JvmCollector& c) { return c.role == role; });
}

double JvmTelemetry::time() const {
  // Sampled counters were last true at the last sample, or at the end of
  // the last GC, which updates them too (both on the JVM's clock). G1's
  // eden and old counters are true when read.
  if (!sampled_spaces || frequency <= 0) return read_at;
  int64_t at = ticks;
  for (const JvmCollector& c : collectors) at = std::max(at, c.last_exit);
  return static_cast<double>(at) / static_cast<double>(frequency);
}

JvmAllocation& JvmAllocation::operator+=(const JvmAllocation& other) {
  known = known && other.known;
  bytes += other.bytes;
  gcs += other.gcs;
  estimated_gcs += other.estimated_gcs;
  return *this;
}

JvmTelemetry telemetry_from(const hsperf::Snapshot& s, pid_t pid, double read_at) {
  JvmTelemetry t;
  t.pid = pid;
  t.read_at = read_at;
  if (const std::string* cmd = s.text("sun.rt.javaCommand")) t.main_class = cmd->substr(0, cmd->find(' '));
  const std::string* policy = s.text("sun.gc.policy.name");
  t.gc = gc_name(policy ? *policy : "");
  t.frequency = s.number("sun.os.hrt.frequency").value_or(0);
  t.ticks = s.number("sun.os.hrt.ticks").value_or(0);
  t.safepoint_ticks = s.number("sun.rt.safepointTime").value_or(-1);
  t.sampled_spaces = t.gc != "G1";

  auto space = [&](const std::string& prefix) {
    JvmSpace sp;
    sp.used = s.number(prefix + ".used").value_or(-1);
    sp.committed = s.number(prefix + ".capacity").value_or(-1);
    return sp;
  };
  // Generational collectors (G1, Parallel, Serial) name generation 0's
  // spaces eden, s0, s1 (G1 keeps its survivors in s1, s0 empty) and
  // generation 1's space "old" (G1: "space"); ZGC and Shenandoah have only
  // generation 1, the whole heap.
  const std::string* space0 = s.text("sun.gc.generation.0.space.0.name");
  bool generational = space0 && *space0 == "eden";
  if (generational) {
    t.eden = space("sun.gc.generation.0.space.0");
    for (const char* sv : {"sun.gc.generation.0.space.1", "sun.gc.generation.0.space.2"}) {
      JvmSpace sp = space(sv);
      if (!sp.known()) continue;
      t.survivors.used = std::max<int64_t>(t.survivors.used, 0) + sp.used;
      t.survivors.committed = std::max<int64_t>(t.survivors.committed, 0) + std::max<int64_t>(sp.committed, 0);
    }
  }
  t.old = space("sun.gc.generation.1.space.0");
  t.metaspace.used = s.number("sun.gc.metaspace.used").value_or(-1);
  t.metaspace.committed = s.number("sun.gc.metaspace.capacity").value_or(-1);

  for (int i = 0;; ++i) {
    std::string prefix = "sun.gc.collector." + std::to_string(i);
    auto count = s.number(prefix + ".invocations");
    if (!count) {
      if (i < 4) continue;  // ZGC numbers its only collector 2
      break;
    }
    JvmCollector c;
    const std::string* name = s.text(prefix + ".name");
    c.name = name ? *name : prefix;
    c.count = *count;
    c.ticks = s.number(prefix + ".time").value_or(0);
    c.last_entry = s.number(prefix + ".lastEntryTime").value_or(0);
    c.last_exit = s.number(prefix + ".lastExitTime").value_or(0);
    // Generational heaps number their young collector 0 and their full one
    // 1 (CMS's 1 is its concurrent cycles); further ones are pauses of
    // concurrent cycles (G1's remark and cleanup).
    if (generational && i == 0)
      c.role = GcRole::young;
    else if (generational && i == 1 && c.name != "CMS")
      c.role = GcRole::full;
    else if (!generational && c.name.find("full") != std::string::npos)
      c.role = GcRole::full;
    else
      c.role = GcRole::other;
    t.collectors.push_back(std::move(c));
  }

  t.tlab.alloc = s.number("sun.gc.tlab.alloc").value_or(-1);
  t.tlab.fills = s.number("sun.gc.tlab.fills").value_or(-1);
  t.tlab.gc_waste = s.number("sun.gc.tlab.gcWaste").value_or(-1);
  t.tlab.refill_waste = s.number("sun.gc.tlab.refillWaste").value_or(-1);
  t.tlab.slow_alloc = s.number("sun.gc.tlab.slowAlloc").value_or(-1);
  t.tlab.threads = s.number("sun.gc.tlab.allocThreads").value_or(-1);
  return t;
}

std::expected<JvmTelemetry, std::string> read_telemetry(pid_t pid) {
  auto source = open_source(pid);
  if (!source) return std::unexpected(source.error());
  return std::move(source->first);
}

std::optional<JvmTelemetry> read_jvm_telemetry(pid_t pid) {
  auto t = read_telemetry(pid);
  if (!t) return std::nullopt;
  return std::move(*t);
}

bool mid_gc(const JvmTelemetry& before, const JvmTelemetry& after) {
  if (after.in_gc()) return true;
  // A pause counts itself before it stamps its entry time.
  for (const JvmCollector& b : after.collectors)
    for (const JvmCollector& a : before.collectors)
      if (a.name == b.name && b.count > a.count && b.last_entry == a.last_entry) return true;
  return false;
}

JvmAllocation allocated_between(const JvmTelemetry& a, const JvmTelemetry& b) {
  JvmAllocation r;
  if (!a.eden.known() || !b.eden.known()) return r;
  auto epoch_ending = [](const JvmTelemetry& t) { return t.gc_count(GcRole::young) + t.gc_count(GcRole::full); };
  int64_t gcs = epoch_ending(b) - epoch_ending(a);
  if (gcs < 0) return r;  // not the same JVM
  r.known = true;
  r.gcs = gcs;
  if (gcs == 0) {
    // Eden and old only grow between GCs, old by objects allocated there
    // directly. (G1 may shrink old when a concurrent cycle frees regions.)
    r.bytes = std::max<int64_t>(0, b.eden.used - a.eden.used) + std::max<int64_t>(0, b.old.used - a.old.used);
    return r;
  }
  // A young GC followed by a full one in the same pause (Parallel's "full
  // follows scavenge", a promotion failure) ends a single epoch: no thread
  // ran in between to allocate.
  int64_t epochs = gcs;
  if (gcs == 2 && b.gc_count(GcRole::young) - a.gc_count(GcRole::young) == 1) {
    auto last = [&](GcRole role) {
      for (const JvmCollector& c : b.collectors)
        if (c.role == role) return c;
      return JvmCollector{};
    };
    JvmCollector young = last(GcRole::young), full = last(GcRole::full);
    int64_t gap = std::max(full.last_entry - young.last_exit, young.last_entry - full.last_exit);
    if (b.frequency > 0 && gap >= 0 && gap < b.frequency / 1000) epochs = 1;
  }
  // The TLABs of the epoch that ended at the last GC. HotSpot publishes
  // none for an epoch without TLABs (a GC right after another): then the
  // figures are those of the epoch before. A steady workload repeats them
  // too (G1 hands out the same TLABs epoch after epoch), but then eden held
  // about as much before the GC.
  int64_t seen = b.tlab.alloc > 0 ? b.tlab.alloc * kHeapWordSize : -1;
  if (b.tlab == a.tlab && a.eden.used < seen / 2) seen = -1;
  int64_t first_eden;  // eden when the first GC began
  int64_t other_eden;  // each further epoch's
  if (epochs == 1) {
    first_eden = std::max(seen, a.eden.used);
    other_eden = 0;
    if (seen < 0) r.estimated_gcs = 1;
  } else {
    // Epochs not seen are taken to be like the last one, or eden's size.
    int64_t like = seen >= 0 ? seen : std::max<int64_t>(b.eden.committed, a.eden.committed);
    first_eden = std::max(like, a.eden.used);
    other_eden = like;
    r.estimated_gcs = seen >= 0 ? epochs - 1 : epochs;
  }
  r.bytes = (first_eden - a.eden.used) + (epochs - 1) * other_eden + b.eden.used;
  return r;
}

std::string summarize_jvm(const JvmTelemetry& a, const JvmTelemetry& b) {
  return summarize(a, b, allocated_between(a, b));
}

JvmWatch::JvmWatch(hsperf::File file, JvmTelemetry first)
    : file_(std::move(file)), first_(first), last_(std::move(first)), allocated_{.known = first_.eden.known()} {}

std::expected<JvmWatch, std::string> JvmWatch::start(pid_t pid, double patience) {
  auto source = open_source(pid, patience);
  if (!source) return std::unexpected(source.error());
  return JvmWatch(std::move(source->file), std::move(source->first));
}

std::expected<void, std::string> JvmWatch::poll() {
  auto snap = file_.read();
  if (snap && snap->accessible) {
    failing_since_ = 0;
    JvmTelemetry now = telemetry_from(*snap, first_.pid, monotonic_seconds());
    if (!mid_gc(last_, now)) {
      allocated_ += allocated_between(last_, now);
      last_ = std::move(now);
    }
    return {};
  }
  if (java::has_exited(first_.pid)) return std::unexpected(jvm_gone(first_.pid));
  double now = monotonic_seconds();
  if (!failing_since_) failing_since_ = now;
  if (now - failing_since_ <= 2) return {};
  return std::unexpected(snap ? file_.path() + ": the JVM marked its counters inaccessible" : snap.error());
}

std::string JvmWatch::summary() const { return summarize(first_, last_, allocated_); }

int64_t ClassHistogram::instances() const {
  int64_t n = 0;
  for (const ClassCount& c : classes) n += c.instances;
  return n;
}

int64_t ClassHistogram::bytes() const {
  int64_t n = 0;
  for (const ClassCount& c : classes) n += c.bytes;
  return n;
}

std::expected<ClassHistogram, std::string> parse_histogram(std::string_view text, std::string_view source) {
  std::map<std::string, ClassCount, std::less<>> by_name;
  size_t line_no = 0;
  bool any = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == text.npos ? text.size() : nl + 1);
    ++line_no;
    // Comments, HotSpot's header and rule, and its "Total" line.
    if (line.empty() || line.starts_with('#') || line.starts_with("num ") || line.starts_with("---") ||
        line.starts_with("Total "))
      continue;
    std::string_view rest = line;
    // HotSpot's rows start with "RANK:".
    size_t colon = rest.find(':');
    if (colon != rest.npos && colon > 0 &&
        std::all_of(rest.begin(), rest.begin() + static_cast<long>(colon), [](char c) { return c >= '0' && c <= '9'; }))
      rest.remove_prefix(colon + 1);
    auto instances = take_number(rest);
    auto bytes = instances ? take_number(rest) : std::nullopt;
    std::string_view name = trim(rest);
    // "NAME (MODULE)", HotSpot's since JDK 9: the module is not part of the name.
    if (name.ends_with(')')) {
      size_t open = name.rfind(" (");
      if (open != name.npos) name = trim(name.substr(0, open));
    }
    if (!instances || !bytes || name.empty() || name.find_first_of(" \t") != name.npos) {
      std::string shown(line.substr(0, 80));
      return std::unexpected(std::string(source) + ":" + std::to_string(line_no) +
                             ": not a class histogram row (INSTANCES BYTES CLASS): '" + shown + "'");
    }
    auto [it, added] = by_name.try_emplace(std::string(name), ClassCount{std::string(name), 0, 0});
    it->second.instances += *instances;
    it->second.bytes += *bytes;
    any = true;
  }
  if (!any) return std::unexpected(std::string(source) + ": no class histogram rows in it");
  ClassHistogram h;
  for (auto& [name, count] : by_name) h.classes.push_back(std::move(count));
  std::stable_sort(h.classes.begin(), h.classes.end(),
                   [](const ClassCount& x, const ClassCount& y) { return x.bytes > y.bytes; });
  return h;
}

std::string histogram_text(const ClassHistogram& h, std::string_view comment) {
  std::string out = "# ember class histogram: " + std::string(comment) + "\n# instances bytes class\n";
  char buf[64];
  for (const ClassCount& c : h.classes) {
    std::snprintf(buf, sizeof buf, "%lld %lld ", static_cast<long long>(c.instances), static_cast<long long>(c.bytes));
    out += buf + c.name + "\n";
  }
  return out;
}

std::vector<ClassDelta> diff_histograms(const ClassHistogram& before, const ClassHistogram& now) {
  std::map<std::string_view, ClassDelta> by_name;
  for (const ClassCount& c : now.classes) {
    ClassDelta& d = by_name[c.name];
    d.name = c.name;
    d.instances += c.instances;
    d.bytes += c.bytes;
    d.d_instances += c.instances;
    d.d_bytes += c.bytes;
  }
  for (const ClassCount& c : before.classes) {
    ClassDelta& d = by_name[c.name];
    d.name = c.name;
    d.d_instances -= c.instances;
    d.d_bytes -= c.bytes;
  }
  std::vector<ClassDelta> out;
  for (auto& [name, d] : by_name)
    if (d.d_instances != 0 || d.d_bytes != 0) out.push_back(std::move(d));
  // By size of the change, either way: a class that freed 100 MB matters
  // as much as one that took 100 MB, and -n must not hide it. Gains first
  // on a tie; then by instances, the same way.
  auto magnitude = [](int64_t v) { return v < 0 ? -static_cast<uint64_t>(v) : static_cast<uint64_t>(v); };
  std::stable_sort(out.begin(), out.end(), [&](const ClassDelta& x, const ClassDelta& y) {
    if (magnitude(x.d_bytes) != magnitude(y.d_bytes)) return magnitude(x.d_bytes) > magnitude(y.d_bytes);
    if (x.d_bytes != y.d_bytes) return x.d_bytes > y.d_bytes;
    if (magnitude(x.d_instances) != magnitude(y.d_instances))
      return magnitude(x.d_instances) > magnitude(y.d_instances);
    return x.d_instances > y.d_instances;
  });
  return out;
}

int run_jvm(const JvmOptions& options) {
  if (options.leaks) return run_leaks(options);
  if (options.heap) return run_heap(options);
  if (!options.track.empty()) return run_track(options);
  if (options.histo && !options.output.empty()) return fail("-o goes with --heap or --track, not --histo");
  if (options.histo) return run_histo(options);
  if (!options.save.empty() || !options.diff.empty() || options.live || !options.output.empty())
    return fail("--save and --diff go with --histo or --heap, --live with --histo or --track, -o with --heap or --track");
  return run_live(options);
}

}  // namespace ember
