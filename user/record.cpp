#include "user/record.h"

#include <fcntl.h>
#include <elf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "flamegraph/output.h"
#include "symbolizer/symbolizer.h"
#include "user/cgroup.h"
#include "user/collector.h"
#include "user/host.h"
#include "user/java.h"
#include "user/java_attach.h"
#include "user/java_profiles.h"
#include "user/jvm.h"
#include "user/sampler.h"
#include "user/unwinder.h"

namespace ember {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_sent = 0;  // by kill(), not by the terminal

void on_stop_signal(int sig, siginfo_t* info, void*) {
  g_stop_signal = sig;
  g_stop_sent = info->si_code == SI_USER || info->si_code == SI_QUEUE;
}

void install_stop_handlers() {
  struct sigaction sa{};
  sa.sa_sigaction = on_stop_signal;
  sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: poll() returns at once
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "ember: %s\n", message.c_str());
  return 1;
}

// The name ember's child carries until it execs the command: the
// collector leaves its records out (they are ember's, not the command's).
constexpr char kBeforeExecName[] = "ember-pre-exec";

// A command started stopped at a pipe, so it runs only once sampling does.
struct Child {
  pid_t pid = -1;
  int go_fd = -1;    // write a byte to let it exec
  int error_fd = -1;  // carries errno if exec fails; closed by a good exec
};

// `env`: variables to set in the command's environment ("NAME=value").
std::expected<Child, std::string> spawn_held(const std::vector<std::string>& command,
                                             const std::vector<std::string>& env) {
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) != 0) return std::unexpected(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close(go[0]);
    close(go[1]);
    return std::unexpected(std::string("pipe: ") + std::strerror(e));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {go[0], go[1], err[0], err[1]}) close(fd);
    return std::unexpected(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    char byte;
    prctl(PR_SET_NAME, kBeforeExecName);
    close(go[1]);
    close(err[0]);
    if (read(go[0], &byte, 1) != 1) _exit(127);  // ember gave up before starting it
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    execvp(argv[0], argv.data());
    int e = errno;
    (void)!write(err[1], &e, sizeof e);
    _exit(127);
  }
  close(go[0]);
  close(err[1]);
  return Child{pid, go[1], err[0]};
}

// waitpid that outlasts signals (a second Ctrl-C must not lose the status).
int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// What the -e list asks the kernel for, and the graphs it makes.
struct EventPlan {
  bool cpu = false;              // perf-event sampling (for a CPU graph, or for wall)
  SampleEvent cpu_event = SampleEvent::CpuClock;
  bool offcpu = false;           // sched_switch records
  bool wall = false;
  bool malloc = false;           // uprobes on the C allocator
  bool java_alloc = false;       // the agent's allocation samples
  bool java_lock = false;        // the agent's monitor contention
  std::vector<EventView> views;  // one graph per event, in the order given
};

std::expected<EventPlan, std::string> plan_events(const std::vector<std::string>& names, uint32_t frequency,
                                                  uint64_t min_block_ns, bool live) {
  EventPlan plan;
  std::string cpu_name;
  for (const std::string& name : names) {
    EventView view;
    view.name = name;
    if (name == "cpu-clock" || name == "cpu" || name == "cycles") {
      if (!cpu_name.empty())
        return std::unexpected("-e " + cpu_name + " and -e " + name + ": one CPU-sampling event per recording");
      cpu_name = name;
      plan.cpu = true;
      plan.cpu_event = name == "cycles" ? SampleEvent::Cycles : SampleEvent::CpuClock;
    } else if (name == "offcpu") {
      plan.offcpu = true;
      view.unit = "ns";
      view.kinds = 1u << EMBER_KIND_BLOCKED;
      view.min_blocked_ns = min_block_ns;
    } else if (name == "wall") {
      plan.wall = plan.offcpu = true;
      view.unit = "ns";
      view.kinds = 1u << EMBER_KIND_CPU | 1u << EMBER_KIND_BLOCKED | 1u << EMBER_KIND_PREEMPTED;
      view.cpu_weight = 1'000'000'000ull / frequency;
    } else if (name == "lock") {
      // Native lock waits: time blocked in a futex wait on a mutex (glibc's
      // lock slow path). Waits on condition variables, read-write locks and
      // semaphores (glibc's __futex_abstimed_wait_common) are mostly idle
      // threads waiting for work: -e offcpu has them. Java monitors come
      // from the agent, with the monitor's class; HotSpot's own futex
      // waits under ObjectMonitor would count them twice.
      plan.offcpu = true;
      plan.java_lock = true;
      view.unit = "ns";
      view.kinds = 1u << EMBER_KIND_BLOCKED;
      view.min_blocked_ns = min_block_ns;
      view.kernel_frame_prefix = "futex_wait";
      view.excluded_frames = {"__futex_abstimed_wait_common", "ObjectMonitor::"};
    } else if (name == "alloc") {
      // From the JVMs' agents, not from BPF: no record kind feeds it.
      plan.java_alloc = true;
      view.unit = "bytes";
      view.kinds = 0;
      view.live_only = live;
    } else if (name == "malloc") {
      plan.malloc = true;
      view.unit = "bytes";
      view.kinds = 1u << EMBER_KIND_MALLOC;
      view.live_only = live;
    } else {
      std::string known;
      for (const RecordEventDoc& e : kRecordEvents) known += (known.empty() ? "" : ", ") + std::string(e.name);
      return std::unexpected("unknown event '" + name + "': ember record samples " + known);
    }
    if (std::any_of(plan.views.begin(), plan.views.end(), [&](const EventView& v) { return v.name == name; }))
      return std::unexpected("-e " + name + " is given twice");
    plan.views.push_back(view);
  }
  // Wall-clock time counts CPU time as the samples of a timer.
  if (plan.wall && !plan.cpu) plan.cpu = true;
  return plan;
}

// What the Java agent reports besides code, as its options.
std::string java_agent_events(const EventPlan& plan, const RecordOptions& o) {
  std::string options;
  if (plan.java_alloc) options += ",alloc=" + std::to_string(o.alloc_interval) + (o.live ? ",live" : "");
  if (plan.java_lock) options += ",lock";
  return options;
}

// The C library a process maps, as a path ember can open (through the
// process's root, for containers); empty if it maps none (a static binary).
std::string libc_of(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.ends_with("/libc.so.6") || path.find("/libc-2.") != std::string::npos)
      return proc_dir == "/proc/self" ? path : proc_dir + "/root" + path;
  }
  return {};
}

// Adds the library at `path` to `libraries` unless its file is there
// already: a uprobe goes on the file, not on a path, and one file probed
// twice (/proc/A/root/... and /proc/B/root/... of two processes sharing
// the host's root) would run the programs twice per call. The host's own
// path is kept where it names the same file, so that the probe does not
// depend on the process that showed it staying alive.
void add_library(std::vector<std::string>& libraries, const std::string& path) {
  struct stat file{}, host{}, listed{};
  if (stat(path.c_str(), &file) != 0) return;  // the process is gone
  for (const std::string& l : libraries)
    if (stat(l.c_str(), &listed) == 0 && listed.st_dev == file.st_dev && listed.st_ino == file.st_ino) return;
  size_t root = path.find("/root/");
  std::string host_path = path.starts_with("/proc/") && root != std::string::npos ? path.substr(root + 5) : path;
  bool same = stat(host_path.c_str(), &host) == 0 && host.st_dev == file.st_dev && host.st_ino == file.st_ino;
  libraries.push_back(same ? host_path : path);
}

// Where execvp finds `name`: itself if it has a slash, else the first
// executable of that name in $PATH; empty if none.
std::string find_command(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = std::min(dirs.find(':', start), dirs.size());
    std::string candidate = (end > start ? dirs.substr(start, end - start) : ".") + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

// Whether the 64-bit ELF executable at `path` is statically linked (no
// program interpreter, so no libc.so.6 to probe); nothing when it is not
// such a file (a script, a 32-bit binary) or cannot be read.
std::optional<bool> is_static_executable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
    return std::nullopt;
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return std::nullopt;
    if (ph.p_type == PT_INTERP) return false;
  }
  return true;
}

// Whether a thread of process `pid` (its main thread named as the process)
// has a name `comm` finds.
bool any_thread_matches(pid_t pid, const std::regex& comm) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "comm");
    std::string name;
    if (std::getline(in, name) && std::regex_search(name, comm)) return true;
  }
  return false;
}

// With several events, each graph gets its own file (out.html ->
// out.offcpu.html), except in pprof, which holds them all in one.
std::string output_for(const std::string& output, const std::string& event, size_t events) {
  if (events == 1 || flamegraph::format_for_path(output) == flamegraph::Format::Pprof) return output;
  for (std::string_view ext : {".html", ".folded", ".collapsed", ".txt"})
    if (output.ends_with(ext)) return output.substr(0, output.size() - ext.size()) + "." + event + std::string(ext);
  return output + "." + event;
}


// The process a thread belongs to (Tgid in /proc/TID/status; threads
// resolve there though unlisted), or 0 if there is no such thread.
pid_t thread_group_of(uint32_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  std::string key;
  pid_t tgid = 0;
  while (in >> key)
    if (key == "Tgid:") {
      in >> tgid;
      break;
    }
  return tgid;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
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

// Progress for a program driving ember (ember serve reads it from a pipe).
// Writes never block: a reader that falls behind misses lines, not samples.
class ProgressLines {
 public:
  explicit ProgressLines(int fd) : fd_(fd) {
    if (fd_ >= 0) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  void update(double elapsed, uint64_t samples, uint64_t lost) {
    if (fd_ < 0 || elapsed - last_ < 0.25) return;
    last_ = elapsed;
    char line[96];
    int n = std::snprintf(line, sizeof line, "%.2f %llu %llu\n", elapsed, static_cast<unsigned long long>(samples),
                          static_cast<unsigned long long>(lost));
    (void)!write(fd_, line, n);
  }

 private:
  int fd_;
  double last_ = -1;
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
  auto list = [](const std::vector<std::string>& paths, const char* why) {
    if (paths.empty()) return;
    std::string text;
    for (size_t i = 0; i < paths.size() && i < 5; ++i) text += (i ? ", " : "") + paths[i];
    if (paths.size() > 5) text += ", and " + std::to_string(paths.size() - 5) + " more";
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

}  // namespace

std::optional<uint64_t> parse_duration_ns(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  double scale = unit == "ns" ? 1 : unit == "us" || unit.empty() ? 1e3 : unit == "ms" ? 1e6 : unit == "s" ? 1e9 : -1;
  if (scale < 0 || !(value >= 0) || std::isinf(value)) return std::nullopt;
  return static_cast<uint64_t>(value * scale);
}

int run_record(const RecordOptions& o) {
  // Everything a user can get wrong is checked before anything is loaded.
  auto min_block = parse_duration_ns(o.min_block);
  if (!min_block) return fail("--min-block '" + o.min_block + "' is not a duration: give e.g. 500us, 2ms or 1s");
  auto plan = plan_events(o.events, std::max(o.frequency, 1u), *min_block, o.live);  // -F is checked below
  if (!plan) return fail(plan.error());
  if (o.live && !plan->malloc && !plan->java_alloc)
    return fail("--live applies to allocations: add -e malloc (C/C++) or -e alloc (Java)");
  for (EventView& v : plan->views) v.waker = o.waker && (v.name == "offcpu" || v.name == "lock");
  if (o.waker && std::none_of(plan->views.begin(), plan->views.end(), [](const EventView& v) { return v.waker; }))
    return fail("--waker applies to blocked threads: add -e offcpu (or -e lock)");
  if (plan->java_alloc && !o.java) return fail("-e alloc needs ember's Java agent: drop --no-java");
  if (o.alloc_interval == 0) return fail("--alloc-interval must be at least 1 byte");
  std::vector<std::string> outputs;
  for (const EventView& v : plan->views) outputs.push_back(output_for(o.output, v.name, plan->views.size()));
  for (const std::string& out : outputs)
    if (auto r = flamegraph::format_for_path(out); !r) return fail(r.error());
  if (!(o.duration >= 0) || std::isinf(o.duration)) return fail("duration must be a number of seconds >= 0");
  if (o.all && (!o.pids.empty() || !o.tids.empty() || !o.command.empty() || !o.cgroups.empty()))
    return fail("-a profiles every process: drop it, or drop -p, --tid, --cgroup and the command");
  if (!o.cgroups.empty() && (!o.pids.empty() || !o.tids.empty() || !o.command.empty()))
    return fail("--cgroup selects processes by their cgroup: drop -p, --tid and the command, or --cgroup "
                "(--comm narrows it)");
  if (o.command.empty() && !o.pids.empty() && !o.tids.empty())
    return fail("give either -p or --tid, not both");
  if (!o.command.empty() && (!o.pids.empty() || !o.tids.empty()))
    return fail("a command (after --) cannot be combined with -p or --tid");
  std::optional<std::regex> comm;
  if (!o.comm.empty()) {
    try {
      comm.emplace(o.comm, std::regex::extended);
    } catch (const std::regex_error& e) {
      return fail("--comm '" + o.comm + "' is not a valid regular expression: " + e.what());
    }
  }
  for (uint32_t pid : o.pids) {
    pid_t group = pid > 0 && pid <= INT32_MAX ? thread_group_of(pid) : 0;
    if (group == 0) return fail("no process with pid " + std::to_string(pid) + " (-p)");
    if (group != static_cast<pid_t>(pid))
      return fail("pid " + std::to_string(pid) + " is a thread of process " + std::to_string(group) +
                  ": use --tid " + std::to_string(pid) + ", or -p " + std::to_string(group));
  }
  for (uint32_t tid : o.tids)
    if (tid == 0 || tid > INT32_MAX || thread_group_of(tid) == 0)
      return fail("no thread with tid " + std::to_string(tid) + " (--tid)");
  auto cgroups = resolve_cgroups(o.cgroups);
  if (!cgroups) return fail(cgroups.error());

  HostFacts host = read_host_facts();
  if (auto r = check_frequency(o.frequency, host); !r) return fail(r.error());
  if (auto r = check_can_record(host); !r) return fail(r.error());
  for (const std::string& out : outputs)
    if (auto r = flamegraph::check_writable(out); !r) return fail(r.error());

  // From here on a stop request is honoured, even during JVM attach.
  install_stop_handlers();
  std::optional<JavaSession> java;
  if (o.java) {
    std::string agent = default_agent_path();
    if (access(agent.c_str(), R_OK) == 0)
      java.emplace(agent, java_agent_events(*plan, o), o.unwind != "fp");
    else
      std::fprintf(stderr,
                   "ember: warning: no Java agent at %s: Java frames will be unnamed; build it with `make` "
                   "(needs openjdk-17-jdk-headless), or pass --no-java to silence this\n",
                   agent.c_str());
  }
  std::optional<Child> child;
  if (!o.command.empty()) {
    std::vector<std::string> env;
    if (java) {
      const char* existing = getenv("JAVA_TOOL_OPTIONS");
      auto options = java->tool_options(existing ? existing : "", o.java_frame_pointers || o.unwind == "fp");
      if (!options) return fail("cannot prepare the Java agent for the command: " + options.error());
      env.push_back("JAVA_TOOL_OPTIONS=" + *options);
    }
    auto c = spawn_held(o.command, env);
    if (!c) return fail("cannot start the command: " + c.error());
    child = *c;
  }
  auto abandon_child = [&] {
    if (child) {
      close(child->go_fd);  // the child reads EOF and exits 127 without running
      waitpid(child->pid, nullptr, 0);
    }
  };

  SamplerConfig config;
  config.cpu = plan->cpu;
  config.event = plan->cpu_event;
  config.offcpu = plan->offcpu;
  config.offcpu_preempted = plan->wall;
  // Wall-clock time takes every block; the offcpu graph drops short ones itself.
  config.min_block_ns = plan->wall ? 0 : *min_block;
  config.offcpu_waker = o.waker;
  if (plan->malloc) {
    // The targets' own libc (they may live in containers); the host's for
    // everything else, a command included.
    std::vector<uint32_t> targets = o.pids;
    for (uint32_t tid : o.tids) targets.push_back(thread_group_of(tid));
    for (uint32_t pid : targets) {
      std::string libc = libc_of("/proc/" + std::to_string(pid));
      if (libc.empty())
        std::fprintf(stderr,
                     "ember: warning: process %u maps no libc.so.6 (a static binary, or its own allocator): "
                     "-e malloc cannot see its allocations\n",
                     pid);
      else
        add_library(config.malloc_libraries, libc);
    }
    // The cgroups' processes are not named one by one: no warning for
    // those without a libc (kernel threads in the root cgroup among them).
    for (pid_t pid : processes_in_cgroups(*cgroups))
      if (std::string libc = libc_of("/proc/" + std::to_string(pid)); !libc.empty())
        add_library(config.malloc_libraries, libc);
    if (!o.command.empty()) {
      std::string path = find_command(o.command[0]);
      if (is_static_executable(path).value_or(false))
        std::fprintf(stderr,
                     "ember: warning: %s is statically linked (no libc.so.6): -e malloc cannot see its "
                     "allocations, only those of the dynamically linked programs it starts\n",
                     path.c_str());
    }
    // Processes that start in an empty cgroup most likely use the host's.
    if (targets.empty() && config.malloc_libraries.empty())
      config.malloc_libraries.push_back(libc_of("/proc/self"));
    if (config.malloc_libraries.empty() || config.malloc_libraries.front().empty()) {
      abandon_child();
      return fail("-e malloc: none of the targets maps a shared libc.so.6, the allocator ember probes (static "
                  "binaries and other allocators, such as jemalloc linked in, are not seen): profile their CPU "
                  "time with -e cpu-clock, or relink them against glibc's malloc");
    }
    config.malloc_interval = o.alloc_interval;
    config.malloc_live = o.live;
  }
  config.frequency = o.frequency;
  config.kernel_walk_frames = std::min<uint32_t>(host.max_stack, EMBER_MAX_STACK_DEPTH);
  config.unwind = o.unwind == "fp" ? UnwindMode::Fp : o.unwind == "cfi" ? UnwindMode::Cfi : UnwindMode::Auto;
  config.unwind_memory_bytes = uint64_t(o.unwind_memory_mib) << 20;
  config.include_idle = o.idle;
  config.verbose = o.verbose;
  config.tids = o.tids;
  for (const CgroupTarget& c : *cgroups) config.cgroup_dirs.push_back(c.dir);
  if (child) {
    config.pids = {static_cast<uint32_t>(child->pid)};
    config.filter_pids = config.follow_forks = true;
  } else if (!o.pids.empty()) {
    config.pids = o.pids;
    config.filter_pids = true;
  }

  symbolizer::Options sopts;
  sopts.lines = o.lines;
  sopts.inlines = o.inlines;
  sopts.dwarf_memory_bytes = uint64_t(o.symbol_memory_mib) << 20;
  symbolizer::Symbolizer symbolizer(sopts);
  CollectorOptions copts;
  copts.thread_frames = o.thread_frames;
  copts.pid_frames = o.pid_frames;
  copts.kernel_only = o.kernel_only;
  copts.user_only = o.user_only;
  copts.comm = comm;
  if (child) copts.before_exec_name = kBeforeExecName;
  copts.max_depth = std::min<uint32_t>(host.max_stack, EMBER_MAX_STACK_DEPTH);
  copts.views = plan->views;
  Collector collector(copts, symbolizer);
  // Each process's tables go to the kernel as its mappings are read (at its
  // first sample); the named targets' before the first sample.
  std::unique_ptr<Unwinder> unwinder;
  config.before_sampling = [&](UnwindMode mode, const UnwindMaps& maps) -> std::expected<void, std::string> {
    auto u = Unwinder::open(maps, static_cast<uint32_t>(mode));
    if (!u) return std::unexpected(u.error());
    unwinder = std::move(*u);
    collector.on_snapshot([&](uint32_t pid) { unwinder->add_process(pid, symbolizer.mapped_files(pid)); });
    collector.on_copied_stack([&](uint32_t pid, std::span<const __u64> copy, __u64* out) {
      return unwinder->unwind_copy(pid, copy, out);
    });
    collector.on_jit_code([&](uint32_t pid, const std::vector<symbolizer::JitMap::Code>& code) {
      unwinder->set_jit_code(pid, code);
    });
    for (uint32_t pid : o.pids)
      if (symbolizer.snapshot_process(pid)) unwinder->add_process(pid, symbolizer.mapped_files(pid));
    return {};
  };
  CgroupTally cgroup_tally;
  auto sampler = Sampler::start(
      config,
      [&](const ember_sample& s) {
        collector.add(s);
        if (!cgroups->empty()) cgroup_tally.add(s.cgroup_id);
      },
      [&](const ember_mapping& m) { collector.add_exit_mapping(m); });
  // Kallsyms read after the programs load: it then names them too.
  if (sampler && !o.user_only) symbolizer.prefetch_kernel();
  if (!sampler) {
    abandon_child();
    return fail(sampler.error());
  }
  // Agents only once the kernel took every probe: an agent cannot be
  // unloaded, so none goes into a JVM for a recording that fails to start.
  if (java) {
    std::vector<pid_t> jvms;
    if (!o.java_attach.empty())
      jvms.assign(o.java_attach.begin(), o.java_attach.end());
    else if (!o.pids.empty())
      jvms.assign(o.pids.begin(), o.pids.end());
    else if (!o.tids.empty())
      for (uint32_t tid : o.tids) jvms.push_back(thread_group_of(tid));
    else if (!child)
      jvms = java::find_jvms();
    // --comm and --cgroup narrow the scope: a JVM none of whose threads
    // --comm names, or outside the cgroups, is out of it (unless named
    // with --java-attach).
    if (comm && o.java_attach.empty())
      std::erase_if(jvms, [&](pid_t pid) { return !any_thread_matches(pid, *comm); });
    if (!cgroups->empty() && o.java_attach.empty())
      std::erase_if(jvms, [&](pid_t pid) { return !process_in_cgroups(pid, *cgroups); });
    java->attach(jvms, !o.java_attach.empty(), collector, [] { return g_stop_signal != 0; });
    // Java events need a JVM: say so for each named target that is not one.
    if (plan->java_alloc)
      for (uint32_t pid : o.pids)
        if (!java::inspect_jvm(static_cast<pid_t>(pid)))
          std::fprintf(stderr,
                       "ember: warning: process %u is not a HotSpot JVM: -e alloc sees Java allocations only "
                       "(for C/C++ code: -e malloc)\n",
                       pid);
  }
  for (const std::string& w : (*sampler)->warnings()) std::fprintf(stderr, "ember: warning: %s\n", w.c_str());
  // The code the agents replayed as they attached: its frames reach the
  // unwinder before the first record.
  collector.update_jvms(false);
  (*sampler)->arm();

  std::optional<int> child_status;
  if (child) {
    char go = 1;
    (void)!write(child->go_fd, &go, 1);
    close(child->go_fd);
    int err = 0;
    if (read(child->error_fd, &err, sizeof err) == sizeof err) {
      wait_for(child->pid);
      return fail("cannot run '" + o.command[0] + "': " + std::strerror(err));
    }
    close(child->error_fd);
  }
  raise_file_limit();  // after the fork: the command keeps the limits it was given

  using Clock = std::chrono::steady_clock;
  auto started = Clock::now();
  uint64_t started_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - started).count(); };
  // Each JVM's heap, GCs and allocation rate over the recording, from its
  // hsperfdata, read at every turn of the loop so each GC is seen.
  struct Watched {
    std::optional<JvmWatch> watch;  // none: no hsperfdata (-XX:-UsePerfData)
    bool ended = false;             // the JVM exited: its summary stands
  };
  std::map<uint32_t, Watched> jvm_watches;
  auto watch_jvms = [&] {
    for (uint32_t pid : collector.jvm_pids())
      if (!jvm_watches.count(pid)) {
        auto w = JvmWatch::start(static_cast<pid_t>(pid));
        jvm_watches[pid].watch = w ? std::optional<JvmWatch>(std::move(*w)) : std::nullopt;
      }
    for (auto& [pid, w] : jvm_watches)
      if (w.watch && !w.ended && !w.watch->poll()) w.ended = true;
  };
  StatusLine status;
  ProgressLines progress(o.progress_fd);
  bool targets_gone = false;
  while (!g_stop_signal) {
    // With JVMs, their newly compiled code reaches the unwinder from here:
    // every 20 ms (javac, compiling all the time: 96% of stacks whole, 89%
    // at 100 ms, where new code ran on frame pointers until then).
    (*sampler)->poll(collector.jvm_pids().empty() ? 100 : 20);
    if (o.duration > 0 && elapsed() >= o.duration) break;
    if (child) {
      int st = 0;
      if (waitpid(child->pid, &st, WNOHANG) == child->pid) {
        child_status = st;
        break;
      }
    }
    const std::vector<uint32_t>& targets = o.pids.empty() ? o.tids : o.pids;
    if (!targets.empty() &&
        std::none_of(targets.begin(), targets.end(), [](uint32_t id) { return thread_group_of(id) != 0; })) {
      targets_gone = true;
      break;
    }
    if (java) java->find_started(collector);
    collector.update_jvms(false);
    collector.take_in_copies(false);
    watch_jvms();
    SamplerCounters c = (*sampler)->counters();
    status.update(elapsed(), c.seen, c.lost);
    if (o.progress_fd >= 0) progress.update(elapsed(), c.seen, c.lost);
  }
  double seconds = elapsed();
  (*sampler)->stop();
  (*sampler)->poll(0);  // what was queued before the stop
  status.clear();
  if (targets_gone) std::fprintf(stderr, "ember: every target (-p, --tid) has exited\n");
  // The terminal signals the whole process group: forward only what was
  // sent to ember alone, or the command would see it twice.
  if (child && !child_status && g_stop_signal && g_stop_sent) kill(child->pid, g_stop_signal);

  SamplerCounters counters = (*sampler)->counters();
  int cpus = (*sampler)->cpus();
  if (o.live) collector.keep_live_allocations((*sampler)->live_allocations());
  sampler->reset();
  // Detach first: with --live, the agents' last full GC reports the frees.
  if (java) {
    java->find_started(collector);
    java->detach();
  }
  collector.update_jvms(true);
  collector.take_in_copies(true);

  collector.refresh_processes();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", seconds);
  // One graph per event, each written whole or not at all.
  struct Graph {
    flamegraph::Profile profile;
    CollectorStats stats;
    std::expected<void, std::string> written;
  };
  std::vector<Graph> graphs;
  std::vector<std::string> java_notes;
  for (size_t v = 0; v < plan->views.size(); ++v) {
    const EventView& view = plan->views[v];
    flamegraph::Profile profile = collector.build(v);
    profile.start_unix_ns = started_unix_ns;
    profile.duration_ns = static_cast<uint64_t>(seconds * 1e9);
    const CollectorStats& stats = collector.stats();
    // Java allocations and monitor contention come from the agents.
    JavaProfileOptions jopts{view.live_only, o.thread_frames, o.pid_frames, java_native_namer(symbolizer)};
    for (const Collector::JavaStream& j : collector.java_streams()) {
      if (view.name != "alloc" && view.name != "lock") continue;
      JavaProfileKind kind = view.name == "alloc" ? JavaProfileKind::AllocBytes : JavaProfileKind::Lock;
      add_java_profile(*j.events, kind, {j.pid, j.name}, jopts, profile);
      // What the agent could not follow or lost: in the graph and the summary.
      for (auto& [key, value] : java_profile_info(*j.events, kind, jopts))
        java_notes.push_back("JVM " + std::to_string(j.pid) + " " + view.name + ": " + key + " " + value);
    }
    profile.info = {{"samples", std::to_string(stats.samples)},
                    {"lost", std::to_string(counters.lost)},
                    {"truncated", std::to_string(stats.truncated)},
                    {"unknown addresses", std::to_string(stats.unknown_addresses)},
                    {"duration", std::string(secs) + " s"},
                    {"cpus", std::to_string(cpus)},
                    {"host", host_name()}};
    if (view.kinds & (1u << EMBER_KIND_CPU))
      profile.info.insert(profile.info.begin() + 5, {"frequency", std::to_string(o.frequency) + " Hz"});
    if (view.name == "offcpu") profile.info.insert(profile.info.begin() + 5, {"min-block", o.min_block});
    if (view.unit == "samples") profile.period_ns = 1'000'000'000ull / o.frequency;
    flamegraph::HtmlOptions html;
    html.title = "ember — " + view.name + ", " + secs + " s, host " + host_name();
    bool shared = outputs.size() > 1 && outputs[1] == outputs[0];  // one pprof for all, written below
    auto written = shared ? std::expected<void, std::string>() : flamegraph::write_profile(profile, outputs[v], html);
    graphs.push_back({std::move(profile), stats, std::move(written)});
  }
  if (graphs.size() > 1 && outputs[1] == outputs[0]) {
    std::vector<const flamegraph::Profile*> all;
    for (const Graph& g : graphs) all.push_back(&g.profile);
    graphs.front().written = flamegraph::write_pprof(all, outputs[0]);
  }
  const CollectorStats& stats = graphs.front().stats;
  bool kernel_hidden = !o.user_only && symbolizer.kernel_symbols_hidden();

  for (const std::string& w : symbolizer.warnings()) std::fprintf(stderr, "ember: warning: %s\n", w.c_str());
  std::string events;
  for (const EventView& v : plan->views) events += (events.empty() ? "" : ", ") + v.name;
  if (plan->cpu)
    std::fprintf(stderr, "ember: recorded %s s on %d CPUs at %u Hz (%s)\n", secs, cpus, o.frequency, events.c_str());
  else
    std::fprintf(stderr, "ember: recorded %s s on %d CPUs (%s)\n", secs, cpus, events.c_str());
  for (size_t v = 0; v < graphs.size(); ++v) {
    const EventView& view = plan->views[v];
    const Graph& g = graphs[v];
    auto n = [](uint64_t x) { return static_cast<unsigned long long>(x); };
    // One CPU graph keeps the classic "samples" line.
    std::string label = graphs.size() == 1 && view.unit == "samples" ? "samples" : view.name;
    if (view.unit == "samples")
      std::fprintf(stderr, "  %-11s %llu%s\n", label.c_str(), n(g.stats.samples), label == "samples" ? "" : " samples");
    else if (view.name == "offcpu")
      std::fprintf(stderr, "  %-11s %.3f s off CPU in %llu blocks of at least %s\n", label.c_str(),
                   g.profile.total() / 1e9, n(g.stats.samples), o.min_block.c_str());
    else if (view.name == "lock")
      std::fprintf(stderr, "  %-11s %.3f s waiting for locks (mutexes, Java monitors), of at least %s each\n",
                   label.c_str(), g.profile.total() / 1e9, o.min_block.c_str());
    else if (view.name == "alloc")
      std::fprintf(stderr, "  %-11s %.1f MiB allocated by Java code, estimated from samples every %llu bytes%s\n",
                   label.c_str(), g.profile.total() / 1048576.0, n(o.alloc_interval),
                   o.live ? ", still alive at the end" : "");
    else if (view.name == "malloc")
      std::fprintf(stderr, "  %-11s %.1f MiB in %llu samples (one per %llu bytes allocated)%s\n", label.c_str(),
                   g.profile.total() / 1048576.0, n(g.stats.samples), n(o.alloc_interval),
                   o.live ? ", still allocated at the end" : "");
    else
      std::fprintf(stderr, "  %-11s %.3f s on and off CPU in %llu samples and blocks\n", label.c_str(),
                   g.profile.total() / 1e9, n(g.stats.samples));
    if (graphs.size() > 1 || view.unit != "samples")
      std::fprintf(stderr, "  %-11s %llu addresses not symbolized (in %llu records)%s\n", "unknown",
                   n(g.stats.unknown_addresses), n(g.stats.unknown_samples),
                   kernel_hidden ? "; kernel frames unnamed, see the warning above" : "");
  }
  std::fprintf(stderr, "  lost        %llu  (ring buffer full)\n", static_cast<unsigned long long>(counters.lost));
  if (counters.scratch_busy)
    std::fprintf(stderr, "              %llu  (records not built: programs nested deeper than their buffers on a CPU)\n",
                 static_cast<unsigned long long>(counters.scratch_busy));
  if (unwinder)
    std::fprintf(stderr,
                 "  truncated   %llu  (stacks at the depth limit: %u kernel frames, raise "
                 "kernel.perf_event_max_stack; %d user frames)\n",
                 static_cast<unsigned long long>(stats.truncated), copts.max_depth, EMBER_MAX_STACK_DEPTH);
  else
    std::fprintf(stderr, "  truncated   %llu  (stacks at the %u-frame limit; raise kernel.perf_event_max_stack)\n",
                 static_cast<unsigned long long>(stats.truncated), copts.max_depth);
  if (graphs.size() == 1 && plan->views.front().unit == "samples")
    std::fprintf(stderr, "  unknown     %llu  addresses not symbolized (in %llu samples)%s\n",
                 static_cast<unsigned long long>(stats.unknown_addresses),
                 static_cast<unsigned long long>(stats.unknown_samples),
                 kernel_hidden ? "; kernel frames unnamed, see the warning above" : "");
  if (plan->offcpu)
    std::fprintf(stderr, "  untracked   %llu  (switches off CPU not recorded: the off-CPU table was full)\n",
                 static_cast<unsigned long long>(counters.offcpu_untracked));
  for (size_t v = 0; v < graphs.size(); ++v)
    if (plan->views[v].waker)
      std::fprintf(stderr,
                   "  waker       %s: %llu blocks woken by threads, %llu by interrupts, %llu without a waker "
                   "(no wakeup seen, or the kernel could not store its stacks: %llu times)\n",
                   plan->views[v].name.c_str(), static_cast<unsigned long long>(graphs[v].stats.woken_by_thread),
                   static_cast<unsigned long long>(graphs[v].stats.woken_by_interrupt),
                   static_cast<unsigned long long>(graphs[v].stats.waker_unseen),
                   static_cast<unsigned long long>(counters.waker_untracked));
  if (o.live)
    std::fprintf(stderr, "  untracked   %llu  (sampled allocations not tracked to their free: the table was full)\n",
                 static_cast<unsigned long long>(counters.malloc_untracked));
  std::fprintf(stderr, "  exits       %llu processes symbolized from their exit-time mappings, %llu mappings lost\n",
               static_cast<unsigned long long>(stats.exited_processes),
               static_cast<unsigned long long>(counters.mappings_lost));
  std::fprintf(stderr, "  unfollowed  %llu  (child processes not profiled: target map full)\n",
               static_cast<unsigned long long>(counters.targets_full));
  if (stats.jvms)
    std::fprintf(stderr,
                 "  java        %llu JVMs, %llu JIT frames named, %llu of %llu interpreted frames named, "
                 "%llu stacks cut at JIT code, %llu code-map lines unreadable\n",
                 static_cast<unsigned long long>(stats.jvms), static_cast<unsigned long long>(stats.jit_frames),
                 static_cast<unsigned long long>(stats.interpreted_frames - stats.unnamed_interpreted_frames),
                 static_cast<unsigned long long>(stats.interpreted_frames),
                 static_cast<unsigned long long>(stats.broken_java_stacks),
                 static_cast<unsigned long long>(stats.bad_jit_map_lines));
  for (const auto& [pid, w] : jvm_watches)
    if (w.watch) std::fprintf(stderr, "  jvm %-7u %s\n", pid, w.watch->summary().c_str());
  for (const std::string& note : java_notes) std::fprintf(stderr, "  java        %s\n", note.c_str());
  for (const Collector::JavaStream& j : collector.java_streams())
    if (unwinder && !j.frames_unavailable.empty())
      std::fprintf(stderr,
                   "ember: warning: JVM %u: ember's agent cannot read this JVM's frame layout (its VMStructs lack "
                   "%s): its stacks stop at the first JIT-compiled frame; restart it with "
                   "-XX:+PreserveFramePointer\n",
                   j.pid, j.frames_unavailable.c_str());
    else if (unwinder && !j.interpreter_methods_unavailable.empty())
      std::fprintf(stderr,
                   "ember: warning: JVM %u: ember's agent cannot tell which method an interpreted frame runs (%s): "
                   "those frames are shown as Interpreter\n",
                   j.pid, j.interpreter_methods_unavailable.c_str());
  if (comm)
    std::fprintf(stderr, "  filtered    %llu  (samples not matching --comm)\n",
                 static_cast<unsigned long long>(stats.comm_filtered));
  if (auto mount = cgroup2_mount(); mount && !cgroups->empty())
    for (const std::string& line : cgroup_tally.summary(*mount, 10)) std::fprintf(stderr, "  cgroup      %s\n", line.c_str());
  if (!o.idle && plan->cpu)
    std::fprintf(stderr, "  idle        %llu  (idle CPUs, not shown; --idle to include)\n",
                 static_cast<unsigned long long>(counters.idle));
  if (unwinder) print_unwinding(o.unwind, unwinder->stats(), collector.unwind_tallies(), counters.unwind_unsupported);

  for (size_t v = 0; v < graphs.size(); ++v) {
    if (!graphs[v].written) {
      if (child && !child_status) wait_for(child->pid);
      return fail(graphs[v].written.error());
    }
    if (v > 0 && outputs[v] == outputs[0]) continue;
    std::fprintf(stderr, "ember: wrote %s (%zu stacks)\n", outputs[v].c_str(), graphs[v].profile.stacks().size());
  }
  // -d may end the recording before the command: it still runs to its end.
  if (child && !child_status) {
    std::fprintf(stderr, "ember: waiting for '%s' (pid %d) to exit\n", o.command[0].c_str(), child->pid);
    child_status = wait_for(child->pid);
  }
  return child_status ? exit_code_of(*child_status) : 0;
}

}  // namespace ember
