// HotSpot's dynamic attach, as jcmd speaks it: a UNIX socket the JVM opens
// on request, one command per connection. Needs no JDK on ember's side.
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::java {

// How long a JVM may take to open its attach socket and, separately, to
// load the agent, unless told otherwise: the JDK's own attach API waits as
// long (HotSpotVirtualMachine's defaultAttachTimeout, 10000 ms), and a JVM
// still starting on a busy host took over 5 s.
inline constexpr double kAttachTimeoutS = 10;

// A running HotSpot JVM, as ember reaches it.
struct JvmProcess {
  pid_t pid = 0;
  pid_t ns_pid = 0;           // its pid inside its own pid namespace: names its socket
  uid_t uid = 0;              // effective ids: the attach listener only answers these, or root
  gid_t gid = 0;
  bool own_mount_ns = false;  // its mount namespace is not ember's (a container)
  std::string root;           // "/proc/PID/root": its filesystem, seen from ember
};

// The JVM's reply: `code` is its first line, `output` everything after it.
struct AttachResult {
  int code = 0;
  std::string output;
};

// Whether `pid` is a HotSpot JVM (it maps libjvm.so), and its ids.
std::expected<JvmProcess, std::string> inspect_jvm(pid_t pid);

// The last of -XX:+NAME / -XX:-NAME among the JVM's options, read in
// HotSpot's order: JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, the command line,
// _JAVA_OPTIONS. Nothing if not given.
std::optional<bool> jvm_flag(pid_t pid, std::string_view name);

// A flag's value as the JVM runs with it, ergonomics included ("true",
// "false", "8"), asked over the attach socket; nothing if the JVM has no
// such flag or does not answer.
std::optional<std::string> printflag(pid_t pid, const std::string& name);

// The process's name (/proc/PID/comm, "java"); "" if it is gone.
std::string process_comm(pid_t pid);

// The pids of the running HotSpot JVMs that ember may inspect.
std::vector<pid_t> find_jvms();

// Finds HotSpot JVMs as they start, for a session that lives long: a
// process's maps are read in its first few scans (a launcher maps libjvm
// some time after its exec) and again when its name changes (an exec),
// not at every scan. A settled process's name is read every tenth scan
// only: reading each name at each scan (300 idle processes) was a tenth of
// an agent's CPU; an exec into a JVM long after a process began is found
// that much later.
class JvmScanner {
 public:
  // The JVMs not reported before (the first scan: all running ones).
  std::vector<pid_t> scan();

 private:
  struct Seen {
    std::string comm;
    int scans = 0;  // since first seen or renamed
    bool jvm = false;
  };
  std::unordered_map<pid_t, Seen> seen_;
};

// Runs one attach-listener command ("properties", "printflag", "jcmd",
// "load"...) with up to 3 arguments, starting the listener first if the JVM
// has not opened its socket yet (trigger file + SIGQUIT). `timeout_ms`
// bounds the wait for the socket and, separately, the wait for the reply.
// A non-zero `code` is the command's own failure, returned, not an error.
std::expected<AttachResult, std::string> attach_command(pid_t pid, std::string_view command,
                                                        std::span<const std::string> args,
                                                        int timeout_ms = 5000);

// The process is gone, a zombie, or on its way out (killed: its files,
// the attach socket among them, may be closed already).
bool has_exited(pid_t pid);

// What an Agent_OnAttach returns when the JVM has not finished starting:
// JNI_EDETACHED, GetEnv's answer to an agent that HotSpot's attach listener
// runs before the live phase (a JVM found early, on a busy host).
inline constexpr int kAgentJvmStarting = -2;

// Loads a JVMTI agent into the JVM and runs its Agent_OnAttach; fails unless
// that returns 0. One that returns kAgentJvmStarting is loaded again (every
// 100 ms) until the JVM is up or `timeout_ms` has passed. `agent_path` must
// be absolute and is opened by the JVM, so inside its mount namespace (a
// container's filesystem, not ember's).
std::expected<void, std::string> load_agent(pid_t pid, const std::string& agent_path,
                                            const std::string& options, int timeout_ms = 5000);

// The request and reply alone, over an existing socket, with ember's own
// ids: no trigger, no signal. attach_command ends here; tests point it at a
// fake JVM. `pid` only names the JVM in messages.
std::expected<AttachResult, std::string> attach_command_at(const std::string& socket_path, pid_t pid,
                                                           std::string_view command,
                                                           std::span<const std::string> args,
                                                           int timeout_ms = 5000);

// The reply to an attach command: its first line, the code, then the
// command's output. `jvm_name` names the JVM in the error.
std::expected<AttachResult, std::string> parse_attach_reply(std::string_view reply, std::string_view jvm_name);

// What a "load" reply says: fine if the library loaded and Agent_OnAttach
// returned 0; otherwise why, for the user.
std::expected<void, std::string> check_load_reply(const AttachResult& reply, std::string_view agent_path,
                                                  std::string_view jvm_name);

}  // namespace ember::java
