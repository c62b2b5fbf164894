#include "user/java/java.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "agent/protocol.h"
#include "user/java/java_attach.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// Whether JIT frames carry frame pointers: -XX:+PreserveFramePointer.
bool preserves_frame_pointer(pid_t pid) { return java::printflag(pid, "PreserveFramePointer") == "true"; }

// The files a JVM's stream goes on in, in its agent directory `dir`,
// held (with its lease) while the stream is read.
StreamFiles stream_files(std::shared_ptr<const AgentDir> dir) {
  return [dir = std::move(dir)](const std::string& read, const std::string& next) {
    int fd = dir->open_file(next);
    if (fd >= 0) dir->remove_file(read);
    return fd;
  };
}

}  // namespace

std::string JavaSession::agent_options(const std::string& out) const {
  namespace protocol = agent::protocol;
  return std::string(protocol::args::kOut) + "=" + out + "," + protocol::args::kLease + events_;
}

std::expected<std::string, std::string> agent_for(const java::JvmProcess& jvm, const std::string& agent) {
  if (!jvm.own_mount_ns) return agent;
  return place_agent_library(jvm.root, agent);
}

std::string default_agent_path() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "libember-agent.so").string();
}

JavaSession::JavaSession(std::string agent_path, std::string events, bool unwinds_jit, int attach_timeout_ms,
                         std::string timeout_knob, std::string without_agent)
    : agent_path_(std::move(agent_path)),
      events_(std::move(events)),
      unwinds_jit_(unwinds_jit),
      attach_timeout_ms_(attach_timeout_ms),
      timeout_knob_(std::move(timeout_knob)),
      without_agent_(std::move(without_agent)) {
  // What a killed ember left in this /tmp (a container's: see attach).
  sweep_agent_dirs("");
}

JavaSession::~JavaSession() { detach(); }

std::optional<JavaSession::Agent> JavaSession::load(pid_t pid, bool named, int attempt, int attempts) {
  auto jvm = java::inspect_jvm(pid);
  if (!jvm) {
    if (named) std::fprintf(stderr, "ember: --java-attach: %s\n", jvm.error().c_str());
    return std::nullopt;
  }
  auto agent = agent_for(*jvm, agent_path_);
  if (!agent) {
    std::fprintf(stderr, "ember: JVM %d: %s; %s\n", pid, agent.error().c_str(), without_agent_.c_str());
    return std::nullopt;
  }
  // What a killed ember left in the container's /tmp goes first.
  if (jvm->own_mount_ns) sweep_agent_dirs(jvm->root);
  auto dir = AgentDir::create(jvm->own_mount_ns ? jvm->root : "", jvm->uid, jvm->gid);
  if (!dir) {
    std::fprintf(stderr, "ember: JVM %d: %s; %s\n", pid, dir.error().c_str(), without_agent_.c_str());
    return std::nullopt;
  }
  std::string map = dir->path() + "/" + std::to_string(jvm->ns_pid) + ".jitmap";
  auto began = std::chrono::steady_clock::now();
  int timeout_ms = attach_timeout_ms_ << (attempt - 1);
  if (auto r = java::load_agent(pid, *agent, agent_options(map), timeout_ms); !r) {
    // One found on the host that has exited since is not worth a line: a
    // host where short JVMs come and go would get one for each.
    if (named || !java::has_exited(pid)) {
      // A JVM that is only slow (a large one loading the agent, or one
      // starting, on a busy host) is tried again with a longer wait, and
      // gets named frames.
      bool timed_out = std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(timeout_ms);
      if (timed_out && attempt < attempts) {
        std::lock_guard lock(mutex_);
        retries_.push_back({pid, attempt + 1, std::chrono::steady_clock::now() + kRetryAfter});
        return std::nullopt;
      }
      std::string tries = attempt > 1 ? " (" + std::to_string(attempt) + " tries)" : "";
      std::fprintf(stderr, "ember: JVM %d: %s%s; %s%s\n", pid, r.error().c_str(), tries.c_str(), without_agent_.c_str(),
                   timed_out ? (" (if it is only slow, wait longer with " + timeout_knob_ + ")").c_str() : "");
    }
    return std::nullopt;
  }
  // The agent is loaded from now on: stop it at the end, whatever follows.
  {
    std::lock_guard lock(mutex_);
    attached_.push_back({pid, *agent});
  }
  std::string name = std::to_string(jvm->ns_pid) + ".jitmap";
  int fd = dir->open_file(name);
  auto held = std::make_shared<const AgentDir>(std::move(*dir));
  if (fd < 0) {
    std::fprintf(stderr,
                 "ember: JVM %d: its agent made no code map (its stderr says why); %s\n", pid, without_agent_.c_str());
    return std::nullopt;
  }
  bool fp = preserves_frame_pointer(pid);
  if (!fp && !unwinds_jit_)
    std::fprintf(stderr,
                 "ember: JVM %d runs without -XX:+PreserveFramePointer: stacks stop at the first JIT-compiled "
                 "frame; restart it with -XX:+PreserveFramePointer for whole Java stacks\n",
                 pid);
  return Agent{pid, fd, name, stream_files(std::move(held)), fp};
}

std::vector<JavaSession::Agent> JavaSession::attach(const std::vector<pid_t>& pids, bool named,
                                                    const std::function<bool()>& stop) {
  std::vector<Agent> agents;
  for (pid_t pid : pids) {
    if (stop()) break;
    if (auto agent = load(pid, named)) agents.push_back(std::move(*agent));
  }
  return agents;
}

void JavaSession::attach_later(const std::vector<pid_t>& pids) {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  to_attach_.insert(to_attach_.end(), pids.begin(), pids.end());
  if (!attacher_.joinable()) attacher_ = std::thread([this] { attach_loop(); });
  wake_.notify_one();
}

void JavaSession::attach_loop() {
  for (;;) {
    pid_t pid;
    int attempt = 1;
    {
      std::unique_lock lock(mutex_);
      for (;;) {
        if (stopping_) return;
        if (!to_attach_.empty()) {
          pid = to_attach_.front();
          to_attach_.pop_front();
          break;
        }
        auto due = std::min_element(retries_.begin(), retries_.end(),
                                    [](const Retry& a, const Retry& b) { return a.at < b.at; });
        if (due != retries_.end() && due->at <= std::chrono::steady_clock::now()) {
          pid = due->pid;
          attempt = due->attempt;
          retries_.erase(due);
          break;
        }
        if (due != retries_.end())
          wake_.wait_until(lock, due->at);
        else
          wake_.wait(lock);
      }
    }
    if (auto l = load(pid, false, attempt, kAttachAttempts)) {
      std::lock_guard lock(mutex_);
      loaded_.push_back(std::move(*l));
    }
  }
}

std::vector<JavaSession::Agent> JavaSession::take_attached() {
  std::lock_guard lock(mutex_);
  return std::exchange(loaded_, {});
}

std::expected<std::string, std::string> JavaSession::tool_options(const std::string& existing,
                                                                    bool add_frame_pointers) {
  auto dir = AgentDir::create("", geteuid(), getegid());
  if (!dir) return std::unexpected(dir.error());
  started_dir_ = std::make_shared<const AgentDir>(std::move(*dir));
  started_frame_pointers_ = add_frame_pointers;
  std::string opts = "-agentpath:" + agent_path_ + "=" + agent_options(started_dir_->path() + "/{pid}.jitmap");
  if (add_frame_pointers) opts += " -XX:+PreserveFramePointer";
  return existing.empty() ? opts : existing + " " + opts;
}

std::vector<JavaSession::Agent> JavaSession::find_started(const std::vector<uint32_t>& known) {
  std::vector<Agent> agents;
  if (!started_dir_) return agents;
  for (const std::string& name : started_dir_->names()) {
    uint32_t pid = 0;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || pid == 0 || std::string_view(end, name.data() + name.size()) != ".jitmap") continue;
    if (std::find(known.begin(), known.end(), pid) != known.end()) continue;
    int fd = started_dir_->open_file(name);
    if (fd < 0) continue;
    agents.push_back({static_cast<pid_t>(pid), fd, name, stream_files(started_dir_), started_frame_pointers_});
    std::lock_guard lock(mutex_);
    attached_.push_back({static_cast<pid_t>(pid), agent_path_});
  }
  return agents;
}

void JavaSession::detach() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (attacher_.joinable()) attacher_.join();
  // Loaded after the last take_attached: never read.
  for (const Agent& a : loaded_) close(a.fd);
  loaded_.clear();
  for (const Attached& a : attached_) {
    // The JVM may have exited: nothing to stop then. With live objects
    // followed, the stop runs a full GC first: give it time.
    java::load_agent(a.pid, a.agent_path, agent::protocol::args::kStop, 15000);
  }
  attached_.clear();
  // The directories go after the stops, as the collector lets go of their
  // JVMs (it reads what the stops made them write): a lease ends with them.
  started_dir_.reset();
}

}  // namespace ember
