// Java in a recording: attaching libember-agent.so to the JVMs in scope
// (or injecting it into `-- java ...`), saying where each agent publishes
// its code map (for the session's collector), and detaching at the end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "user/java/agent_dir.h"
#include "user/java/java_attach.h"

namespace ember {

class JavaSession {
 public:
  // A JVM's agent loaded: where its code map is.
  struct Agent {
    pid_t pid;
    int fd;  // the code map, read from its start; the taker closes it
    std::string name;  // the code map's file
    StreamFiles files;
    bool frame_pointers;  // JIT code keeps frame pointers (-XX:+PreserveFramePointer)
  };

  // `agent_path`: libember-agent.so as ember sees it. `events`: what the
  // agent reports besides code, as agent options (",alloc=524288,live,lock").
  // `unwinds_jit`: ember's unwinder steps through JIT frames by the frame
  // sizes the agent publishes (else they need -XX:+PreserveFramePointer).
  // `attach_timeout_ms`: how long a JVM may take to open its attach socket
  // and, separately, to load the agent; `timeout_knob` names the setting.
  // `without_agent`: what a JVM the agent could not join misses, for the
  // messages ("its Java frames will be unnamed").
  JavaSession(std::string agent_path, std::string events, bool unwinds_jit, int attach_timeout_ms,
              std::string timeout_knob, std::string without_agent);
  ~JavaSession();
  JavaSession(const JavaSession&) = delete;
  JavaSession& operator=(const JavaSession&) = delete;

  // Attaches to each pid that is a HotSpot JVM: the agents loaded.
  // Failures are reported per JVM and do not stop the others; pids that
  // are not JVMs are passed over, or reported if `named` (the user asked
  // for them). Gives up on the rest once `stop` says so.
  std::vector<Agent> attach(const std::vector<pid_t>& pids, bool named, const std::function<bool()>& stop);
  // The same for JVMs found while recording, on a thread of its own: an
  // attach waits for the JVM (seconds for a busy one, up to its timeouts
  // for a stopped one), and the recording must go on meanwhile. Their
  // agents come from take_attached().
  void attach_later(const std::vector<pid_t>& pids);
  std::vector<Agent> take_attached();

  // For `-- CMD`: the JAVA_TOOL_OPTIONS that load the agent into any JVM the
  // command starts (existing options kept), publishing into a directory
  // made for them now (see find_started).
  std::expected<std::string, std::string> tool_options(const std::string& existing, bool add_frame_pointers);
  // The agents of the JVMs the command started, but those in `known`.
  std::vector<Agent> find_started(const std::vector<uint32_t>& known);

  // Stops every agent this session started (once attaches under way are
  // done); their directories go as the collector lets go of their JVMs (it
  // reads what the stops made them write).
  void detach();

 private:
  // Loads the agent into `pid`; none if it is not a JVM (said if `named`)
  // or the attach failed (said). `attempt` of `attempts`: a JVM that did
  // not answer in time is tried again (after kRetryAfter, waiting twice as
  // long each time), and said only after the last.
  std::optional<Agent> load(pid_t pid, bool named, int attempt = 1, int attempts = 1);
  void attach_loop();
  static constexpr int kAttachAttempts = 3;
  static constexpr std::chrono::seconds kRetryAfter{2};
  // The agent's options for a stream written to `out`, leased, with `events`.
  std::string agent_options(const std::string& out) const;

  std::string agent_path_;
  std::string events_;
  bool unwinds_jit_;
  int attach_timeout_ms_;
  std::string timeout_knob_;
  std::string without_agent_;
  bool started_frame_pointers_ = true;
  struct Attached {
    pid_t pid;
    std::string agent_path;  // as the JVM sees it
  };
  std::shared_ptr<const AgentDir> started_dir_;  // the JVMs of `-- CMD`; each attached one's, the collector holds
  // Shared with the attach thread.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Attached> attached_;  // the agents to stop
  std::deque<pid_t> to_attach_;
  struct Retry {
    pid_t pid;
    int attempt;  // of kAttachAttempts
    std::chrono::steady_clock::time_point at;
  };
  std::vector<Retry> retries_;  // JVMs that did not answer in time, to try again
  std::vector<Agent> loaded_;  // by the thread, for take_attached
  bool stopping_ = false;
  std::thread attacher_;
};

// libember-agent.so next to the ember binary.
std::string default_agent_path();

// The agent file `agent` as JVM `jvm` can open it: the same path when
// they share a mount namespace, else a copy in the JVM's file system.
std::expected<std::string, std::string> agent_for(const java::JvmProcess& jvm, const std::string& agent);

}  // namespace ember
