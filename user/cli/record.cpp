#include "user/cli/record.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "flamegraph/output.h"
#include "user/events/timer.h"
#include "user/host/host.h"
#include "user/session/cgroup.h"
#include "user/session/record_channel.h"
#include "user/session/session.h"

namespace ember {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_sent = 0;  // by kill(), not by the terminal

// SIGINT, SIGTERM and SIGHUP (the terminal gone) stop the recording, which
// is then written. A second Ctrl-C on the terminal quits without writing
// (the user will not wait for a slow debuginfod, say); the same signals
// sent by a program change nothing (supervisors send SIGTERM twice, and
// ember serve's recorder gets a parent-death SIGINT after its stop). The
// terminal's SIGINT is the one the kernel sends (SI_KERNEL); kill() and a
// parent-death signal are SI_USER.
void on_stop_signal(int sig, siginfo_t* info, void*) {
  if (g_stop_signal) {
    if (sig == SIGINT && info->si_code == SI_KERNEL) {
      // Outputs are written whole or not at all (write_atomically): nothing
      // half-written is left, and the kernel drops ember's programs with
      // its file descriptors.
      static const char msg[] = "\nember: Ctrl-C again: quitting without writing\n";
      (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
      _exit(130);
    }
    return;
  }
  g_stop_signal = sig;
  g_stop_sent = info->si_code == SI_USER || info->si_code == SI_QUEUE;
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

void install_stop_handlers() {
  struct sigaction sa{};
  sa.sa_sigaction = on_stop_signal;
  sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: poll() returns at once
  sigemptyset(&sa.sa_mask);
  for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
  // Outputs are files: a closed pipe on stderr (ember record 2>&1 | head)
  // must not end the recording before they are written.
  signal(SIGPIPE, SIG_IGN);
}

int print_error(const std::string& message) {
  std::fprintf(stderr, "ember: %s\n", message.c_str());
  return 1;
}

// With several events, each graph gets its own file (out.html ->
// out.offcpu.html), except in pprof and OTLP, which hold them all in one.
std::string output_for(const std::string& output, const std::string& event, size_t events) {
  auto format = flamegraph::format_for_path(output);
  if (events == 1 || (format && flamegraph::holds_every_event(*format))) return output;
  return flamegraph::with_part(output, event);
}


class StatusLine {
 public:
  StatusLine() : enabled_(isatty(STDERR_FILENO)) {}
  void update(double elapsed, uint64_t samples, uint64_t lost) {
    if (!enabled_ || elapsed - last_ < 1.0) return;
    double rate = (samples - last_samples_) / (elapsed - last_);
    last_ = elapsed;
    last_samples_ = samples;
    std::fprintf(stderr, "\r\033[Kember: recording %.0f s  %.0f samples/s  %llu lost", elapsed, rate,
                 static_cast<unsigned long long>(lost));
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_ && last_ > 0) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
  double last_ = 0;
  uint64_t last_samples_ = 0;
};

// Why user stacks stopped short of their thread's root, in words.
const char* stop_words(int stop) {
  switch (stop) {
    case EMBER_STOP_FP_END: return "frame-pointer chain ended";
    case EMBER_STOP_NO_TABLE: return "code without CFI";
    case EMBER_STOP_UNMAPPED: return "code mapped since the process's tables were made";
    case EMBER_STOP_UNSUPPORTED: return "CFI the unwinder cannot apply";
    case EMBER_STOP_BAD_READ: return "stack memory unreadable";
    case EMBER_STOP_DEPTH: return "depth limit";
    case EMBER_STOP_BAD_FRAME: return "bad frame";
    case EMBER_STOP_NOT_LOADED: return "before its tables were loaded";
    default: return "other";
  }
}

// The unwinding report: the tables, then for the processes with the most
// user stacks, the share that reached the thread's root and why the others stopped.
void print_unwinding(const std::string& mode, const UnwinderStats& u, const std::vector<Collector::UnwindTally>& tallies,
                     uint64_t unsupported_frames) {
  auto mib = [](uint64_t rows) { return rows * sizeof(ember_unwind_row) / 1048576.0; };
  std::fprintf(stderr, "  unwinding   %s: tables of %llu binaries, %.1f of %.0f MiB (--unwind-memory), built in %.0f ms\n",
               mode.c_str(), static_cast<unsigned long long>(u.tables), mib(u.rows), mib(u.rows_capacity), u.build_ms);
  auto list = [](const BinaryList& paths, const char* why) {
    if (paths.empty()) return;
    std::string text;
    for (size_t i = 0; i < paths.first.size() && i < 5; ++i) text += (i ? ", " : "") + paths.first[i];
    if (paths.count > 5) text += ", and " + std::to_string(paths.count - 5) + " more";
    std::fprintf(stderr, "              frame pointers only (%s): %s\n", why, text.c_str());
  };
  list(u.over_cap, "their tables are past --unwind-memory: raise it");
  list(u.without_cfi, "no usable CFI");
  list(u.unreadable, "unreadable");
  if (u.processes_left_out || u.mappings_left_out || unsupported_frames)
    std::fprintf(stderr,
                 "              %llu processes left to frame pointers (table full), %llu mappings past %d per "
                 "process, %llu frames with CFI the unwinder cannot apply\n",
                 static_cast<unsigned long long>(u.processes_left_out),
                 static_cast<unsigned long long>(u.mappings_left_out), EMBER_UNWIND_MAPPINGS,
                 static_cast<unsigned long long>(unsupported_frames));
  size_t shown = 0;
  for (const Collector::UnwindTally& t : tallies) {
    if (t.stacks == 0 || shown == 10) break;
    if (shown++ == 0) std::fprintf(stderr, "  stacks      reaching their thread's root, by process (most stacks first):\n");
    std::string who = t.name + " (" + std::to_string(t.pid) + ")";
    std::string why;
    for (int stop = 0; stop < EMBER_STOP_KINDS; ++stop)
      if (stop != EMBER_STOP_ROOT && t.stops[stop])
        why += (why.empty() ? "; stopped: " : ", ") + std::to_string(t.stops[stop]) + " " + stop_words(stop);
    std::fprintf(stderr, "    %-24s %5.1f%% of %llu%s\n", who.c_str(), 100.0 * t.stops[EMBER_STOP_ROOT] / t.stacks,
                 static_cast<unsigned long long>(t.stacks), why.c_str());
  }
}



// The files of window `n` (1, 2, ...: out.0001.html), or of the whole
// recording (n 0).
std::vector<std::string> window_files(const std::vector<std::string>& outputs, unsigned n) {
  if (n == 0) return outputs;
  char part[16];
  std::snprintf(part, sizeof part, "%04u", n);
  std::vector<std::string> files;
  for (const std::string& out : outputs) files.push_back(flamegraph::with_part(out, part));
  return files;
}

// Writes a window's graphs to `files` (one per graph), each whole or not
// at all; in pprof and OTLP, one file holds them all.
std::vector<std::expected<void, std::string>> write_window(const Window& window, const std::vector<std::string>& files) {
  bool shared = files.size() > 1 && files[1] == files[0];
  std::vector<std::expected<void, std::string>> written;
  for (size_t v = 0; v < window.graphs.size(); ++v) {
    // A live graph spans the recording so far, not the window.
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", window.graphs[v].profile.duration_ns / 1e9);
    flamegraph::HtmlOptions html;
    html.title = "ember — " + window.graphs[v].view.name + ", " + secs + " s, host " + host_name();
    written.push_back(shared ? std::expected<void, std::string>()
                             : flamegraph::write_profile(window.graphs[v].profile, files[v], html));
  }
  if (shared) {
    std::vector<const flamegraph::Profile*> all;
    for (const WindowGraph& g : window.graphs) all.push_back(&g.profile);
    written.front() = flamegraph::write_profiles(all, files[0]);
  }
  return written;
}

// --window: cuts window `n` while recording goes on, writes it and says so
// in one line (after what the symbolizer warned of).
std::expected<void, std::string> cut_window(Session& session, const std::vector<std::string>& outputs, unsigned n,
                                            const std::function<void(const std::string&)>& warn) {
  Window window = session.cut(false);
  for (const std::string& warning : window.symbol_warnings) warn(warning);
  std::vector<std::string> files = window_files(outputs, n);
  std::vector<std::expected<void, std::string>> written = write_window(window, files);
  for (const auto& w : written)
    if (!w) return std::unexpected("window " + std::to_string(n) + ": " + w.error());
  // Each graph's weight in its unit (Java allocations come from the agents,
  // not as records).
  std::string weights;
  for (const WindowGraph& g : window.graphs) {
    char weight[96];
    double total = static_cast<double>(g.profile.total());
    if (g.view.unit == "ns")
      std::snprintf(weight, sizeof weight, "%s %.3f s", g.view.name.c_str(), total / 1e9);
    else if (g.view.unit == "bytes")
      std::snprintf(weight, sizeof weight, "%s %.1f MiB%s", g.view.name.c_str(), total / 1048576.0,
                    g.view.live_only ? " live" : "");
    else
      std::snprintf(weight, sizeof weight, "%s %.0f samples", g.view.name.c_str(), total);
    weights += (weights.empty() ? "" : ", ") + std::string(weight);
  }
  // Every file written (one per event, or one pprof for all).
  std::string wrote;
  for (size_t i = 0; i < files.size(); ++i)
    if (std::find(files.begin(), files.begin() + i, files[i]) == files.begin() + i)
      wrote += (wrote.empty() ? "" : ", ") + files[i];
  std::fprintf(stderr, "ember: window %u: %.1f s, %s, %llu lost; wrote %s\n", n, window.seconds, weights.c_str(),
               static_cast<unsigned long long>(window.counters.lost), wrote.c_str());
  return {};
}

// The processes whose runtime ember cannot read (by pid: why), 10 at most,
// on summary lines of `label`; `then`: what their frames are instead.
void print_refused(const char* label, const std::map<uint32_t, std::string>& refused, const char* then) {
  size_t told = 0;
  for (const auto& [pid, why] : refused)
    if (told++ < 10) std::fprintf(stderr, "  %-11s process %u: %s: %s\n", label, pid, why.c_str(), then);
  if (refused.size() > 10) std::fprintf(stderr, "  %-11s ... and %zu more such processes\n", label, refused.size() - 10);
}

// The summary of a recording, after its graphs were written.
void print_summary(const Window& w, Session& session, const std::function<void(const std::string&)>& warn) {
  auto n = [](uint64_t x) { return static_cast<unsigned long long>(x); };
  const SessionConfig& c = session.config();
  const SamplerCounters& counters = w.counters;
  const CollectorStats& stats = w.graphs.front().stats;
  bool kernel_hidden = session.kernel_symbols_hidden();
  bool samples_cpu = find_part<events::CpuTimer>(session.plan().parts) != nullptr;
  for (const std::string& warning : w.symbol_warnings) warn(warning);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", w.seconds);
  std::string names;
  for (const WindowGraph& g : w.graphs) names += (names.empty() ? "" : ", ") + g.view.name;
  if (samples_cpu)
    std::fprintf(stderr, "ember: recorded %s s on %d CPUs at %llu Hz (%s)\n", secs, session.cpus(),
                 n(c.settings.frequency), names.c_str());
  else
    std::fprintf(stderr, "ember: recorded %s s on %d CPUs (%s)\n", secs, session.cpus(), names.c_str());
  // A lone CPU graph keeps the classic "samples" and "unknown" lines.
  bool lone_cpu = w.graphs.size() == 1 && w.graphs.front().view.unit == "samples";
  events::Resolved resolved = session.plan().resolved(c.settings);
  for (const WindowGraph& g : w.graphs) {
    std::string label = lone_cpu ? "samples" : g.view.name;
    std::string line = g.event->summary(resolved, {label, static_cast<double>(g.profile.total()), g.stats.samples});
    std::fprintf(stderr, "%s\n", line.c_str());
    if (!lone_cpu)
      std::fprintf(stderr, "  %-11s %llu addresses not symbolized (in %llu records)%s\n", "unknown",
                   n(g.stats.unknown_addresses), n(g.stats.unknown_samples),
                   kernel_hidden ? "; kernel frames unnamed, see the warning above" : "");
  }
  std::fprintf(stderr, "  lost        %llu  (ring buffer full)\n", n(counters.lost));
  if (counters.scratch_busy)
    std::fprintf(stderr, "              %llu  (records not built: programs nested deeper than their buffers on a CPU)\n",
                 n(counters.scratch_busy));
  if (session.unwinder())
    std::fprintf(stderr,
                 "  truncated   %llu  (stacks at the depth limit: %u kernel frames, raise "
                 "kernel.perf_event_max_stack; %d user frames)\n",
                 n(stats.truncated), session.max_depth(), EMBER_MAX_STACK_DEPTH);
  else
    std::fprintf(stderr, "  truncated   %llu  (stacks at the %u-frame limit; raise kernel.perf_event_max_stack)\n",
                 n(stats.truncated), session.max_depth());
  if (lone_cpu)
    std::fprintf(stderr, "  unknown     %llu  addresses not symbolized (in %llu samples)%s\n", n(stats.unknown_addresses),
                 n(stats.unknown_samples), kernel_hidden ? "; kernel frames unnamed, see the warning above" : "");
  if (std::any_of(w.graphs.begin(), w.graphs.end(),
                  [](const WindowGraph& g) { return g.view.kinds & 1u << EMBER_KIND_BLOCKED; }))
    std::fprintf(stderr, "  untracked   %llu  (switches off CPU not recorded: the off-CPU table was full)\n",
                 n(counters.offcpu_untracked));
  if (counters.offcpu_unseen_ends)
    std::fprintf(stderr, "              %llu  (blocks whose end the kernel's switch tracepoint did not show: sized from CPU time)\n",
                 n(counters.offcpu_unseen_ends));
  for (const WindowGraph& g : w.graphs)
    if (g.view.waker)
      std::fprintf(stderr,
                   "  waker       %s: %llu blocks woken by threads, %llu by interrupts, %llu without a waker "
                   "(no wakeup seen, or the kernel could not store its stacks: %llu times)\n",
                   g.view.name.c_str(), n(g.stats.woken_by_thread), n(g.stats.woken_by_interrupt),
                   n(g.stats.waker_unseen), n(counters.waker_untracked));
  if (c.settings.live)
    std::fprintf(stderr, "  untracked   %llu  (sampled allocations not tracked to their free: the table was full)\n",
                 n(counters.malloc_untracked));
  std::fprintf(stderr, "  exits       %llu processes symbolized from their exit-time mappings, %llu mappings lost\n",
               n(stats.exited_processes), n(counters.mappings_lost));
  std::fprintf(stderr, "  unfollowed  %llu  (child processes not profiled: target map full)\n", n(counters.targets_full));
  if (stats.jvms)
    std::fprintf(stderr,
                 "  java        %llu JVMs, %llu JIT frames named, %llu of %llu interpreted frames named, "
                 "%llu stacks cut at JIT code, %llu code-map lines unreadable, %llu streams cut short (a next "
                 "file missing from the JVM's /tmp/ember-* directory)\n",
                 n(stats.jvms), n(stats.jit_frames), n(stats.interpreted_frames - stats.unnamed_interpreted_frames),
                 n(stats.interpreted_frames), n(stats.broken_java_stacks), n(stats.bad_jit_map_lines),
                 n(stats.java_streams_cut));
  for (const auto& [pid, summary] : session.jvm_summaries())
    std::fprintf(stderr, "  jvm %-7u %s\n", pid, summary.c_str());
  for (const std::string& note : w.java_notes) std::fprintf(stderr, "  java        %s\n", note.c_str());
  if (const runtimes::PythonFrames* python = session.python();
      python && (python->stats().processes || !python->stats().refused.empty())) {
    const runtimes::PythonFrames::Stats& s = python->stats();
    std::fprintf(stderr,
                 "  python      %llu processes, %llu frames named, %llu unnamed (code object unreadable); stacks "
                 "whose chain was cut: %llu at an unreadable frame, %llu where the eval loop's native frame was "
                 "not met\n",
                 n(s.processes), n(s.frames), n(s.unnamed), n(counters.python_unread), n(counters.python_unplaced));
    print_refused("python", s.refused, "its eval loop's frames stay native");
  }
  if (const runtimes::V8Frames* v8 = session.v8(); v8 && (v8->stats().processes || !v8->stats().refused.empty())) {
    const runtimes::V8Frames::Stats& s = v8->stats();
    std::fprintf(stderr, "  js          %llu processes, %llu functions named, %llu unnamed (function unreadable)\n",
                 n(s.processes), n(s.frames), n(s.unnamed));
    if (session.config().lines) {
      std::string without;
      for (const auto& [why, count] : s.unlined) without += ", " + std::to_string(count) + " " + why;
      std::fprintf(stderr, "  js          --lines: %llu frames with their line; without%s\n", n(s.lines),
                   without.empty() ? ": none" : without.c_str());
    }
    print_refused("js", s.unpositioned, "its frames have no line");
    print_refused("js", s.refused, "its frames stay V8's code");
  }
  for (const Collector::JavaStream& j : session.java_streams())
    if (session.unwinder() && !j.frames_unavailable.empty())
      warn("JVM " + std::to_string(j.pid) + ": ember's agent cannot read this JVM's frame layout (its VMStructs lack " +
           j.frames_unavailable + "): its stacks stop at the first JIT-compiled frame; restart it with " +
           "-XX:+PreserveFramePointer");
    else if (session.unwinder() && !j.interpreter_methods_unavailable.empty())
      warn("JVM " + std::to_string(j.pid) + ": ember's agent cannot tell which method an interpreted frame runs (" +
           j.interpreter_methods_unavailable + "): those frames are shown as Interpreter");
  if (!c.comm.empty())
    std::fprintf(stderr, "  filtered    %llu  (samples not matching --comm)\n", n(stats.comm_filtered));
  if (auto mount = cgroup2_mount(); mount && !c.cgroups.empty())
    for (const std::string& line : w.cgroups.summary(*mount, 10)) std::fprintf(stderr, "  cgroup      %s\n", line.c_str());
  if (!c.idle && samples_cpu)
    std::fprintf(stderr, "  idle        %llu  (idle CPUs, not shown; --idle to include)\n", n(counters.idle));
  if (session.unwinder())
    print_unwinding(c.unwind, session.unwinder()->stats(), w.unwind_tallies, counters.unwind_unsupported);
}

// What the user can get wrong in the targets, checked before anything is
// loaded.
std::expected<void, std::string> check_targets(const RecordOptions& o) {
  const SessionConfig& c = o.session;
  if (!(o.duration >= 0) || std::isinf(o.duration))
    return std::unexpected("duration must be a number of seconds >= 0");
  if (o.all && (!c.pids.empty() || !c.tids.empty() || !c.command.empty() || !c.cgroups.empty()))
    return std::unexpected("-a profiles every process: drop it, or drop -p, --tid, --cgroup and the command");
  if (!c.cgroups.empty() && (!c.pids.empty() || !c.tids.empty() || !c.command.empty()))
    return std::unexpected(
        "--cgroup selects processes by their cgroup: drop -p, --tid and the command, or --cgroup (--comm narrows "
        "it)");
  if (c.command.empty() && !c.pids.empty() && !c.tids.empty())
    return std::unexpected("give either -p or --tid, not both");
  if (!c.command.empty() && (!c.pids.empty() || !c.tids.empty()))
    return std::unexpected("a command (after --) cannot be combined with -p or --tid");
  for (uint32_t pid : c.pids) {
    pid_t group = pid > 0 && pid <= INT32_MAX ? thread_group_of(pid) : 0;
    if (group == 0) return std::unexpected("no process with pid " + std::to_string(pid) + " (-p)");
    if (group != static_cast<pid_t>(pid))
      return std::unexpected("pid " + std::to_string(pid) + " is a thread of process " + std::to_string(group) +
                             ": use --tid " + std::to_string(pid) + ", or -p " + std::to_string(group));
  }
  for (uint32_t tid : c.tids)
    if (tid == 0 || tid > INT32_MAX || thread_group_of(tid) == 0)
      return std::unexpected("no thread with tid " + std::to_string(tid) + " (--tid)");
  return {};
}

// Why a recording ended.
enum class Ended { Signal, Duration, Command, Targets };

// Records until a stop signal, the duration, the command's exit or the
// targets' (-p, --tid), writing each --window meanwhile; `windows`: how
// many were written.
Ended record_until_done(Session& session, const RecordOptions& o, const std::vector<std::string>& outputs,
                        record_channel::Writer& channel, const std::function<void(const std::string&)>& warn,
                        unsigned& windows) {
  using Clock = std::chrono::steady_clock;
  auto began = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - began).count(); };
  StatusLine status;
  // Windows end on a fixed cadence (--window, 2*--window, ...), not a
  // window after the last cut: cutting takes time, which would add up.
  double window_ends = o.window;
  const std::vector<uint32_t>& targets = o.session.pids.empty() ? o.session.tids : o.session.pids;
  Ended ended = Ended::Signal;
  while (!g_stop_signal) {
    // With JVMs, their newly compiled code reaches the unwinder from here:
    // every 20 ms (javac, compiling all the time: 96% of stacks whole, 89%
    // at 100 ms, where new code ran on frame pointers until then).
    session.poll(session.java_streams().empty() ? 100 : 20);
    if (o.duration > 0 && elapsed() >= o.duration) {
      ended = Ended::Duration;
      break;
    }
    if (session.command() && session.command()->exited()) {
      ended = Ended::Command;
      break;
    }
    if (!targets.empty() &&
        std::none_of(targets.begin(), targets.end(), [](uint32_t id) { return thread_group_of(id) != 0; })) {
      ended = Ended::Targets;
      break;
    }
    if (o.window > 0 && elapsed() >= window_ends) {
      if (auto done = cut_window(session, outputs, ++windows, warn); !done) {
        status.clear();
        warn(done.error());
      }
      while (window_ends <= elapsed()) window_ends += o.window;  // boundaries a slow cut passed
    }
    SamplerCounters counters = session.counters();
    status.update(elapsed(), counters.seen, counters.lost);
    channel.progress(elapsed(), counters.seen, counters.lost);
  }
  status.clear();
  return ended;
}

}  // namespace

int run_record(const RecordOptions& o) {
  using record_channel::Message;
  record_channel::Writer channel(o.progress_fd);
  auto fail = [&](const std::string& message) {
    channel.send({.kind = Message::Kind::Error, .text = message});
    return print_error(message);
  };
  auto warn = [&](const std::string& message) {
    channel.send({.kind = Message::Kind::Warning, .text = message});
    std::fprintf(stderr, "ember: warning: %s\n", message.c_str());
  };
  // Everything a user can get wrong is checked before anything is loaded.
  const SessionConfig& c = o.session;
  std::vector<std::string> outputs;
  for (const std::string& event : c.events) outputs.push_back(output_for(o.output, event, c.events.size()));
  if (auto ok = check_targets(o); !ok) return fail(ok.error());
  std::vector<std::string> warnings;
  auto created = Session::create(c, warnings);
  for (const std::string& w : warnings) warn(w);
  if (!created) return fail(created.error());
  Session& session = **created;
  for (const std::string& out : outputs)
    if (auto r = flamegraph::format_for_path(out); !r) return fail(r.error());
  for (const std::string& out : outputs)
    if (auto r = flamegraph::check_writable(out); !r) return fail(r.error());

  // From here on a stop request is honoured, even during JVM attach.
  install_stop_handlers();
  if (auto started = session.start([] { return g_stop_signal != 0; }); !started) return fail(started.error());
  for (const std::string& w : session.warnings()) warn(w);
  if (auto armed = session.arm(); !armed) return fail(armed.error());
  raise_file_limit();  // after the fork: the command keeps the limits it was given

  unsigned windows = 0;  // written so far (--window)
  Ended ended = record_until_done(session, o, outputs, channel, warn, windows);
  if (ended == Ended::Targets) std::fprintf(stderr, "ember: every target (-p, --tid) has exited\n");
  // A signal may have come as the loop ended for another reason: it is
  // told, and forwarded, all the same.
  if (g_stop_signal)
    std::fprintf(stderr, "ember: SIG%s: stopping, writing what was recorded%s\n", sigabbrev_np(g_stop_signal),
                 g_stop_signal == SIGINT && !g_stop_sent ? " (Ctrl-C again quits without writing)" : "");
  // The terminal signals the whole process group: forward only what was
  // sent to ember alone, or the command would see it twice.
  HeldCommand* command = session.command();
  if (command && ended != Ended::Command && g_stop_signal && g_stop_sent) kill(command->pid(), g_stop_signal);

  Window window = session.cut(true);
  std::vector<std::string> files = window_files(outputs, o.window > 0 ? windows + 1 : 0);
  std::vector<std::expected<void, std::string>> written = write_window(window, files);
  print_summary(window, session, warn);
  for (size_t v = 0; v < window.graphs.size(); ++v) {
    if (!written[v]) {
      if (command) command->wait();
      return fail(written[v].error());
    }
    if (v > 0 && files[v] == files[0]) continue;
    std::fprintf(stderr, "ember: wrote %s (%zu stacks)\n", files[v].c_str(), window.graphs[v].profile.stacks().size());
  }
  files.erase(std::unique(files.begin(), files.end()), files.end());
  channel.send({.kind = Message::Kind::Done,
                .seconds = window.seconds,
                .samples = window.graphs.front().stats.samples,
                .lost = window.counters.lost,
                .outputs = files});
  // The session's memory goes back with the process: freeing it piece by
  // piece took 0.3 s after a whole host's 30 s at 999 Hz (a dozen JVMs'
  // code maps, 78,000 addresses' names). Kept reachable, for leak checkers.
  session.close();
  static Session* const kept = created->release();
  (void)kept;
  if (!command) return 0;
  // -d may end the recording before the command: it still runs to its end.
  if (ended != Ended::Command)
    std::fprintf(stderr, "ember: waiting for '%s' (pid %d) to exit\n", c.command[0].c_str(), command->pid());
  return exit_code_of(command->wait());
}

}  // namespace ember
