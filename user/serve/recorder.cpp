#include "user/serve/recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "flamegraph/input.h"
#include "flamegraph/output.h"
#include "user/events/event.h"
#include "user/host/host.h"
#include "user/session/record_channel.h"

namespace ember {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Why ember record ended without a profile: what it said on the channel,
// or how it ended.
std::string failure_of(const std::string& error, int wait_status) {
  if (!error.empty()) return error;
  if (WIFSIGNALED(wait_status)) return std::string("ember record was killed by ") + strsignal(WTERMSIG(wait_status));
  return "ember record exited with status " + std::to_string(WEXITSTATUS(wait_status)) + " and wrote no profile";
}

// The event a request names, if serve offers it.
const events::Event* served_event(const std::string& name) {
  const events::Event* e = events::find(name);
  return e && e->served ? e : nullptr;
}

}  // namespace

std::string process_name(uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

const std::vector<std::string>& serve_events() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const events::Event* e : events::all())
      if (e->served) out.emplace_back(e->alias.empty() ? e->name : e->alias);
    return out;
  }();
  return names;
}

std::expected<void, std::string> check_request(const RecordRequest& r) {
  const events::Event* event = served_event(r.event);
  if (!event) return std::unexpected("unknown event '" + r.event + "'");
  if (r.pid && ::kill(static_cast<pid_t>(r.pid), 0) != 0 && errno == ESRCH)
    return std::unexpected("no process with pid " + std::to_string(r.pid));
  if (!(r.duration >= 0 && r.duration <= 7 * 86400)) return std::unexpected("duration must be 0 to 604800 seconds");
  // The settings given, checked by the event as record checks them (a
  // leading '-' would make min_block an option of ember record).
  if (!r.min_block.empty() && r.min_block.front() == '-')
    return std::unexpected("min_block '" + r.min_block + "' is not a duration: give e.g. 500us, 2ms or 1s");
  events::Scope scope;
  if (r.pid) scope.pids = {r.pid};
  std::vector<std::string> warnings;  // the recording says them
  auto plan = events::plan({r.event}, settings_of(r), scope, read_host_facts(), warnings, events::Spelling::Field);
  if (!plan) return std::unexpected(plan.error());
  return {};
}

events::Settings settings_of(const RecordRequest& r) {
  events::Settings s;
  if (r.frequency) s.frequency = r.frequency;
  if (r.interval) s.alloc_interval = r.interval;
  if (!r.min_block.empty()) s.min_block = r.min_block;
  return s;
}

std::vector<std::string> record_arguments(const RecordRequest& r, const std::string& pprof, int progress_fd) {
  const events::Event* event = served_event(r.event);
  uint32_t takes = event ? event->settings : 0;
  std::vector<std::string> args = {"record", "-e", event ? std::string(event->name) : r.event};
  if (r.pid)
    args.insert(args.end(), {"-p", std::to_string(r.pid)});
  else
    args.push_back("-a");
  if (r.frequency && takes & events::kFrequency) args.insert(args.end(), {"-F", std::to_string(r.frequency)});
  if (r.interval && takes & events::kAllocInterval) args.insert(args.end(), {"--alloc-interval", std::to_string(r.interval)});
  if (!r.min_block.empty() && takes & events::kMinBlock) args.insert(args.end(), {"--min-block", r.min_block});
  if (r.duration > 0) {
    char d[32];
    std::snprintf(d, sizeof d, "%g", r.duration);
    args.insert(args.end(), {"-d", d});
  }
  args.insert(args.end(), {"-o", pprof, "--progress-fd", std::to_string(progress_fd)});
  return args;
}

Recorder::Recorder(const ResultStore& store, std::string ember_path, std::function<std::string()> view)
    : store_(store), ember_path_(std::move(ember_path)), view_(std::move(view)) {
  // Descriptions left "running" by a server that was killed: their
  // recording ended with it.
  for (ResultInfo& r : store_.list())
    if (r.status == "running") {
      r.status = "failed";
      r.error = "the server stopped before this profile was written";
      (void)store_.save(r);
    }
}

Recorder::~Recorder() {
  request_stop();
  wait_idle();
  if (watcher_.joinable()) watcher_.join();
}

std::expected<std::string, Recorder::Refusal> Recorder::start(const RecordRequest& request) {
  std::unique_lock lock(mutex_);
  if (status_.state != RecorderStatus::State::Idle)
    return std::unexpected(Refusal{StartError::Busy, "a profile is running (id " + status_.result.id +
                                                         "): stop it before starting another"});
  if (auto ok = check_request(request); !ok) return std::unexpected(Refusal{StartError::Invalid, ok.error()});

  ResultInfo result;
  result.id = store_.new_id();
  result.created_ms = now_ms();
  result.event = request.event;
  result.target = request.pid ? "pid" + std::to_string(request.pid) : "host";
  result.target_name = request.pid ? process_name(request.pid) : "whole host";
  result.base = result_base_name(result.created_ms, result.id, result.event, result.target);
  result.status = "running";
  if (auto saved = store_.save(result); !saved) return std::unexpected(Refusal{StartError::Failed, saved.error()});

  // Everything the child needs is made before fork: between fork and exec
  // only async-signal-safe calls are allowed (this process has threads).
  int progress[2];
  if (::pipe2(progress, O_CLOEXEC) != 0)
    return std::unexpected(Refusal{StartError::Failed, std::string("pipe: ") + std::strerror(errno)});
  constexpr int kProgressFd = 3;
  std::vector<std::string> args = record_arguments(request, store_.path(result.base + ".pb.gz"), kProgressFd);
  args.insert(args.begin(), ember_path_);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int log = ::open(store_.path(result.base + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0 || null_fd < 0) {
    int err = errno;
    for (int fd : {progress[0], progress[1], log, null_fd})
      if (fd >= 0) ::close(fd);
    return std::unexpected(Refusal{StartError::Failed, std::string("cannot write the log: ") + std::strerror(err)});
  }

  if (watcher_.joinable()) watcher_.join();  // the previous profile's, finished
  // The fork happens on the watcher thread: the child's parent-death
  // signal follows the thread that forked, which must outlive the child.
  pid_t forked = -1;
  int fork_errno = 0;
  bool done = false;
  std::condition_variable forked_cv;
  pid_t parent = ::getpid();
  watcher_ = std::thread([&, result] {
    pid_t pid = ::fork();
    int err = errno;
    if (pid == 0) {
      ::setpgid(0, 0);  // the terminal's Ctrl-C reaches the server, which stops this cleanly
      ::prctl(PR_SET_PDEATHSIG, SIGINT);
      if (::getppid() != parent) _exit(1);
      ::dup2(null_fd, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::dup2(progress[1], kProgressFd);  // dup2 clears close-on-exec
      // Nothing else of the server's: cpp-httplib 0.11 accepts connections
      // without close-on-exec, so the recording held the client connections
      // open at the fork for as long as it ran, past a SIGKILL of the server
      // too, leaving those clients waiting instead of seeing a reset.
      if (::close_range(kProgressFd + 1, ~0U, 0) != 0) {  // Linux < 5.9
        struct rlimit files {};
        rlim_t end = ::getrlimit(RLIMIT_NOFILE, &files) == 0 ? std::min<rlim_t>(files.rlim_cur, 1 << 20) : 1024;
        for (rlim_t fd = kProgressFd + 1; fd < end; ++fd) ::close(static_cast<int>(fd));
      }
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGINT, SIGPIPE, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
      // A stop (SIGTERM) reaching ember record before it has set its
      // handlers would kill it, and a Stop right after Start (one in three
      // on a test machine) lose the result: ignored until then (ember
      // record sets its own handler), and sent again with its first
      // progress line. The parent-death SIGINT still ends it at any time.
      struct sigaction ign {};
      ign.sa_handler = SIG_IGN;
      ::sigaction(SIGTERM, &ign, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execv(argv[0], argv.data());
      static const char msg[] = "ember: cannot run ember record\n";
      (void)!::write(2, msg, sizeof msg - 1);
      _exit(127);
    }
    int read_end = progress[0];
    {
      // Notified under the lock: once start() sees `done` it returns and
      // forked_cv, on its stack, is gone.
      std::lock_guard g(mutex_);
      forked = pid;
      fork_errno = err;
      done = true;
      forked_cv.notify_all();
    }
    if (pid > 0) follow(pid, read_end, result);
  });
  forked_cv.wait(lock, [&] { return done; });
  for (int fd : {progress[1], log, null_fd}) ::close(fd);
  if (forked < 0) {
    ::close(progress[0]);
    watcher_.join();
    result.status = "failed";
    result.error = std::string("fork: ") + std::strerror(fork_errno);
    (void)store_.save(result);
    return std::unexpected(Refusal{StartError::Failed, result.error});
  }
  child_ = forked;
  status_ = RecorderStatus{RecorderStatus::State::Running, result, request, 0, 0, 0};
  return result.id;
}

void Recorder::follow(pid_t child, int progress_fd, ResultInfo result) {
  // JSON lines (record_channel.h) until ember record exits and the pipe closes.
  std::string pending, error;
  char buf[4096];
  bool resent = false;  // the stop, once ember record is sure to take it
  for (ssize_t n; (n = ::read(progress_fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pending.append(buf, n);
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      auto message = record_channel::decode(std::string_view(pending).substr(0, end));
      if (!message) continue;
      using Kind = record_channel::Message::Kind;
      if (message->kind == Kind::Error) error = message->text;
      if (message->kind != Kind::Progress) continue;
      std::lock_guard g(mutex_);
      status_.elapsed = message->seconds;
      status_.samples = message->samples;
      status_.lost = message->lost;
      if (status_.state == RecorderStatus::State::Stopping && !resent) {
        ::kill(child, SIGTERM);  // not reaped yet: still ember record
        resent = true;
      }
    }
  }
  ::close(progress_fd);
  int wait_status = 0;
  while (::waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
  }
  finish(result, wait_status, error);
  std::lock_guard g(mutex_);
  child_ = 0;
  last_ = result;
  status_ = RecorderStatus{};
  idle_.notify_all();
}

void Recorder::finish(ResultInfo& result, int wait_status, const std::string& error) {
  auto failed = [&](std::string why) {
    result.status = "failed";
    result.error = std::move(why);
    (void)store_.save(result);
  };
  std::string pprof = store_.path(result.base + ".pb.gz");
  if (::access(pprof.c_str(), F_OK) != 0) return failed(failure_of(error, wait_status));
  auto read = flamegraph::read_profile(pprof);
  if (!read) return failed(read.error());
  const flamegraph::Profile& profile = read->profile;
  result.unit = profile.unit;
  result.total = profile.total();
  result.seconds = profile.duration_ns / 1e9;
  if (const std::string* samples = profile.info_value("samples")) result.samples = std::strtoull(samples->c_str(), nullptr, 10);
  flamegraph::HtmlOptions html;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", result.seconds);
  html.title = "ember — " + result.event + ", " +
               (result.target == "host" ? std::string("whole host")
                                        : result.target_name + " (" + result.target.substr(3) + ")") +
               ", " + secs + " s";
  html.view = view_ ? view_() : "";
  auto written = flamegraph::write_profile(profile, store_.path(result.base + ".html"), html);
  if (written) written = flamegraph::write_profile(profile, store_.path(result.base + ".folded"));
  if (!written) return failed(written.error());
  result.status = "ok";
  (void)store_.save(result);
}

bool Recorder::request_stop() {
  std::lock_guard g(mutex_);
  if (status_.state == RecorderStatus::State::Idle) return false;
  if (child_ > 0) ::kill(child_, SIGTERM);  // ignored until ember record can stop cleanly: see start()
  status_.state = RecorderStatus::State::Stopping;
  return true;
}

std::optional<ResultInfo> Recorder::wait_result(const std::string& id, double timeout_s) {
  std::unique_lock lock(mutex_);
  auto ended = [&] { return last_ && last_->id == id; };
  idle_.wait_for(lock, std::chrono::duration<double>(timeout_s), ended);
  return ended() ? last_ : std::nullopt;
}

RecorderStatus Recorder::status() const {
  std::lock_guard g(mutex_);
  return status_;
}

void Recorder::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return status_.state == RecorderStatus::State::Idle; });
}

}  // namespace ember
