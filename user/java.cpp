#include "user/java.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "user/java_attach.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// The agent file as the JVM can open it: ember's own path when they share a
// mount namespace, else a copy in the JVM's /tmp. The copy is named by the
// agent's size and time and never rewritten: a JVM may have it mapped, and
// attaching again must find the very library it loaded before.
std::expected<std::string, std::string> agent_for(const java::JvmProcess& jvm, const std::string& agent) {
  if (!jvm.own_mount_ns) return agent;
  struct stat st{};
  if (stat(agent.c_str(), &st) != 0) return std::unexpected("cannot read " + agent);
  std::string inside = "/tmp/libember-agent-" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtime) + ".so";
  std::error_code ec;
  fs::copy_file(agent, jvm.root + inside, fs::copy_options::skip_existing, ec);
  if (ec) return std::unexpected("cannot copy the agent into the JVM's file system: " + ec.message());
  return inside;
}

// Whether JIT frames carry frame pointers: -XX:+PreserveFramePointer.
bool preserves_frame_pointer(pid_t pid) {
  std::string flag = "PreserveFramePointer";
  auto r = java::attach_command(pid, "printflag", std::span(&flag, 1), 2000);
  return r && r->code == 0 && r->output.find("-XX:+PreserveFramePointer") != std::string::npos;
}

}  // namespace

std::string default_agent_path() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "libember-agent.so").string();
}

JavaSession::JavaSession(std::string agent_path, std::string events)
    : agent_path_(std::move(agent_path)), events_(std::move(events)) {}

JavaSession::~JavaSession() { detach(); }

std::string JavaSession::map_name(pid_t ns_pid) const {
  return "/tmp/ember-" + std::to_string(getpid()) + "-" + std::to_string(ns_pid) + ".jitmap";
}

void JavaSession::attach(const std::vector<pid_t>& pids, bool named, Collector& collector,
                         const std::function<bool()>& stop) {
  for (pid_t pid : pids) {
    if (stop()) return;
    auto jvm = java::inspect_jvm(pid);
    if (!jvm) {
      if (named) std::fprintf(stderr, "ember: --java-attach: %s\n", jvm.error().c_str());
      continue;
    }
    auto agent = agent_for(*jvm, agent_path_);
    if (!agent) {
      std::fprintf(stderr, "ember: JVM %d: %s; its Java frames will be unnamed\n", pid, agent.error().c_str());
      continue;
    }
    std::string map = map_name(jvm->ns_pid);
    if (auto r = java::load_agent(pid, *agent, "out=" + map + events_); !r) {
      std::fprintf(stderr, "ember: JVM %d: %s; its Java frames will be unnamed\n", pid, r.error().c_str());
      continue;
    }
    bool fp = preserves_frame_pointer(pid);
    if (!fp)
      std::fprintf(stderr,
                   "ember: JVM %d runs without -XX:+PreserveFramePointer: stacks stop at the first JIT-compiled "
                   "frame; restart it with -XX:+PreserveFramePointer for whole Java stacks\n",
                   pid);
    std::string seen_from_ember = jvm->root + map;
    collector.watch_jvm(static_cast<uint32_t>(pid), seen_from_ember, fp);
    attached_.push_back({pid, *agent, seen_from_ember});
  }
}

std::string JavaSession::started_maps() const { return "/tmp/ember-" + std::to_string(getpid()) + "-{pid}.jitmap"; }

std::string JavaSession::tool_options(const std::string& existing, bool add_frame_pointers) const {
  std::string opts = "-agentpath:" + agent_path_ + "=out=" + started_maps() + events_;
  if (add_frame_pointers) opts += " -XX:+PreserveFramePointer";
  return existing.empty() ? opts : existing + " " + opts;
}

void JavaSession::detach() {
  for (const Attached& a : attached_) {
    // The JVM may have exited: nothing to stop then. With live objects
    // followed, the stop runs a full GC first: give it time.
    java::load_agent(a.pid, a.agent_path, "stop", 15000);
    unlink(a.map_path.c_str());
  }
  attached_.clear();
}

}  // namespace ember
