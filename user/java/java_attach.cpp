#include "user/java/java_attach.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

namespace ember::java {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// HotSpot's limits (attachListener.hpp): it drops requests beyond them.
constexpr size_t kMaxCommand = 16;
constexpr size_t kMaxArg = 1024;
constexpr size_t kArgCount = 3;
// Bounds memory if a peer streams forever; thread dumps stay far below.
constexpr size_t kMaxReply = 64u << 20;

std::string proc_path(pid_t pid, const char* entry) {
  return "/proc/" + std::to_string(pid) + "/" + entry;
}

std::string seconds(int ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", ms / 1000.0);
  return buf;
}

// Whole small files; errno as the error, so callers can tell EACCES apart.
std::expected<std::string, int> read_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(errno);
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return std::unexpected(err);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

struct Status {
  std::string name;
  char state = '?';
  uid_t euid = 0;
  gid_t egid = 0;
  pid_t ns_pid = 0;
  uint64_t caught = 0;  // SigCgt: signals with a handler
  uint64_t cap_permitted = 0;  // CapPrm
  uint64_t cap_effective = 0;  // CapEff
};

// The n-th (0-based) whitespace-separated field of `s`, or its last if n < 0.
std::string_view field(std::string_view s, int n) {
  std::string_view last;
  for (int i = 0;; ++i) {
    size_t b = s.find_first_not_of(" \t");
    if (b == s.npos) return last;
    s.remove_prefix(b);
    size_t e = s.find_first_of(" \t");
    last = s.substr(0, e);
    if (i == n) return last;
    s.remove_prefix(e == s.npos ? s.size() : e);
  }
}

template <typename T>
T number(std::string_view s, int base = 10) {
  T v{};
  std::from_chars(s.data(), s.data() + s.size(), v, base);
  return v;
}

std::optional<Status> read_status(pid_t pid) {
  auto text = read_file(proc_path(pid, "status"));
  if (!text) return std::nullopt;
  Status st;
  st.ns_pid = pid;  // kernels before 4.1 have no NSpid line
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == rest.npos ? rest.size() : nl + 1);
    size_t colon = line.find(':');
    if (colon == line.npos) continue;
    std::string_view key = line.substr(0, colon), value = line.substr(colon + 1);
    if (key == "Name") st.name = field(value, 0);
    else if (key == "State") st.state = field(value, 0).empty() ? '?' : field(value, 0)[0];
    else if (key == "Uid") st.euid = number<uid_t>(field(value, 1));
    else if (key == "Gid") st.egid = number<gid_t>(field(value, 1));
    else if (key == "NSpid") st.ns_pid = number<pid_t>(field(value, -1));
    else if (key == "SigCgt") st.caught = number<uint64_t>(field(value, 0), 16);
    else if (key == "CapPrm") st.cap_permitted = number<uint64_t>(field(value, 0), 16);
    else if (key == "CapEff") st.cap_effective = number<uint64_t>(field(value, 0), 16);
  }
  return st;
}

enum class Vm { none, hotspot, openj9 };

// OpenJ9 maps a libjvm.so too, but answers SIGQUIT with a javacore dump.
Vm vm_in_maps(std::string_view maps) {
  if (maps.find("/libj9vm") != maps.npos) return Vm::openj9;
  for (size_t at = 0; (at = maps.find("/libjvm.so", at)) != maps.npos; ++at) {
    size_t end = at + std::strlen("/libjvm.so");
    // A path ends the line, or is followed by " (deleted)" after a JDK upgrade.
    if (end == maps.size() || maps[end] == '\n' || maps[end] == ' ') return Vm::hotspot;
  }
  return Vm::none;
}

std::string mount_ns(const std::string& ns_link) {
  char buf[64];
  ssize_t n = readlink(ns_link.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool is_socket(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// The .attach_pid file that tells HotSpot a SIGQUIT means "start the
// listener"; removed on every way out, or the next SIGQUIT (a thread dump
// request) would start the listener instead. Held through a directory fd:
// /proc/PID/cwd stops resolving once the JVM dies.
class TriggerFile {
 public:
  TriggerFile() = default;
  TriggerFile(const TriggerFile&) = delete;
  TriggerFile& operator=(const TriggerFile&) = delete;
  ~TriggerFile() {
    if (dir_ < 0) return;
    unlinkat(dir_, name_.c_str(), 0);
    close(dir_);
  }

  // In the JVM's working directory, where HotSpot looks first, else its /tmp.
  std::expected<void, std::string> create(const JvmProcess& jvm) {
    std::string name = ".attach_pid" + std::to_string(jvm.ns_pid);
    int first_error = 0;
    for (const std::string& path : {proc_path(jvm.pid, "cwd"), jvm.root + "/tmp"}) {
      int dir = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      // O_EXCL: never chown a file someone else placed (or linked) there.
      constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
      int fd = dir < 0 ? -1 : openat(dir, name.c_str(), kFlags, 0600);
      if (fd < 0 && errno == EEXIST && unlinkat(dir, name.c_str(), 0) == 0)
        fd = openat(dir, name.c_str(), kFlags, 0600);
      if (fd < 0) {
        if (!first_error) first_error = errno;
        if (dir >= 0) close(dir);
        continue;
      }
      dir_ = dir;
      name_ = name;
      // HotSpot also accepts a trigger owned by root, so a failed chown is harmless.
      if (geteuid() == 0) (void)!fchown(fd, jvm.uid, jvm.gid);
      close(fd);
      return {};
    }
    return std::unexpected("cannot create the attach trigger file " + name + " in JVM " +
                           std::to_string(jvm.pid) + "'s working directory or /tmp: " +
                           std::strerror(first_error));
  }

 private:
  int dir_ = -1;
  std::string name_;
};

// Once the listener is up, a trigger file serves nothing: one left by a
// client killed mid-attach (ember or jcmd under kill -9) is litter in the
// JVM's working directory, removed here. Only an empty regular file, as
// HotSpot's clients make.
void remove_stale_triggers(const JvmProcess& jvm) {
  std::string name = ".attach_pid" + std::to_string(jvm.ns_pid);
  for (const std::string& path : {proc_path(jvm.pid, "cwd"), jvm.root + "/tmp"}) {
    int dir = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) continue;
    struct stat st {};
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
      unlinkat(dir, name.c_str(), 0);
    close(dir);
  }
}

std::string timeout_message(pid_t pid, int timeout_ms) {
  return "JVM " + std::to_string(pid) + " did not open its attach socket within " + seconds(timeout_ms) +
         ": it may run with -XX:+DisableAttachMechanism, or be too busy or suspended; "
         "restart it without that flag, or give it the agent at startup (-agentpath:PATH)";
}

// Waits for the JVM's socket, asking for it (trigger file + SIGQUIT) once
// the JVM handles SIGQUIT: before that, the signal would kill it.
std::expected<void, std::string> open_listener(const JvmProcess& jvm, const std::string& socket_path,
                                               int timeout_ms) {
  std::string jvm_name = "JVM " + std::to_string(jvm.pid);
  if (is_socket(socket_path)) {
    remove_stale_triggers(jvm);
    return {};
  }
  // A SIGQUIT to such a JVM would only print a thread dump into its log.
  if (jvm_flag(jvm.pid, "DisableAttachMechanism") == true)
    return std::unexpected(jvm_name +
                           " runs with -XX:+DisableAttachMechanism, so it cannot be attached to; restart it "
                           "without that flag, or give it the agent at startup (-agentpath:PATH)");

  auto deadline = Clock::now() + milliseconds(timeout_ms);
  TriggerFile trigger;
  bool signalled = false;
  milliseconds delay(20);
  for (;;) {
    if (is_socket(socket_path)) return {};
    auto st = read_status(jvm.pid);
    if (!st || st->state == 'Z' || st->state == 'X')
      return std::unexpected(jvm_name + " exited during the attach");
    constexpr uint64_t kSigQuitBit = uint64_t{1} << (SIGQUIT - 1);
    if (!signalled && (st->caught & kSigQuitBit)) {
      if (auto made = trigger.create(jvm); !made) return std::unexpected(made.error());
      if (kill(jvm.pid, SIGQUIT) != 0)
        return std::unexpected(errno == ESRCH ? jvm_name + " exited during the attach"
                                              : "cannot signal " + jvm_name + ": " + std::strerror(errno));
      signalled = true;
    }
    auto now = Clock::now();
    if (now >= deadline) {
      if (signalled) return std::unexpected(timeout_message(jvm.pid, timeout_ms));
      return std::unexpected(jvm_name + " does not handle SIGQUIT after " + seconds(timeout_ms) +
                             " (it is still starting, or runs with -Xrs and its attach socket was deleted); "
                             "ember does not send it, as it would kill the JVM: retry once it has started, "
                             "or restart it with -XX:+StartAttachListener");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(delay, deadline - now));
    delay = std::min(delay * 3 / 2, milliseconds(200));
  }
}

struct Identity {
  uid_t uid;
  gid_t gid;
};

// Connects to the listener, as `as` if given: HotSpot reads the peer's ids
// (SO_PEERCRED, fixed at connect()) and drops peers whose euid and egid are
// not its own (older JDKs do not even make an exception for root). Sets
// `*stale` if nothing listens on the socket any more.
std::expected<int, std::string> connect_socket(const std::string& path, pid_t pid, std::optional<Identity> as,
                                               Clock::time_point deadline, bool* stale = nullptr) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return std::unexpected("the attach socket path " + path + " is too long for a UNIX socket");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::unexpected(std::string("cannot create a UNIX socket: ") + std::strerror(errno));
  std::string jvm_name = "JVM " + std::to_string(pid);
  for (;;) {
    uid_t old_uid = geteuid();
    gid_t old_gid = getegid();
    if (as && setegid(as->gid) != 0) {
      int err = errno;
      close(fd);
      return std::unexpected("cannot take gid " + std::to_string(as->gid) + " to attach to " + jvm_name + ": " +
                             std::strerror(err));
    }
    if (as && seteuid(as->uid) != 0) {
      int err = errno;
      // Back to our gid; failing that too, root's gid stays, which only
      // widens what the next attach may do as root anyway.
      if (setegid(old_gid) != 0) err = errno;
      close(fd);
      return std::unexpected("cannot take uid " + std::to_string(as->uid) + " to attach to " + jvm_name + ": " +
                             std::strerror(err));
    }
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    int err = errno;
    // The uid first: only with it back may the gid change again.
    if (as && (seteuid(old_uid) != 0 || setegid(old_gid) != 0)) {
      close(fd);
      return std::unexpected(std::string("cannot restore ember's own ids after connecting: ") +
                             std::strerror(errno));
    }
    if (rc == 0) return fd;
    // EAGAIN: the listener's backlog is full; it serves one request at a time.
    if ((err == EAGAIN || err == EINTR) && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    close(fd);
    if (stale) *stale = err == ECONNREFUSED;
    if (err == ECONNREFUSED)
      return std::unexpected(jvm_name + "'s attach socket " + path +
                             " refuses connections: it was left by an earlier process; delete it and retry");
    if (err == EAGAIN) return std::unexpected(jvm_name + " is too busy to accept an attach connection");
    return std::unexpected("cannot connect to " + jvm_name + "'s attach socket " + path + ": " +
                           std::strerror(err));
  }
}

// Why the JVM stopped talking: it exited, or it hung up on us.
std::string hung_up(pid_t pid, std::string_view command) {
  std::string jvm_name = "JVM " + std::to_string(pid);
  if (has_exited(pid)) return jvm_name + " exited during the attach";
  return jvm_name + " closed the attach connection without answering '" + std::string(command) +
         "': it may be exiting, or it refused ember's uid/gid (it answers only its own user, or root)";
}

// Keeps a garbled reply printable in a message, at most `max` bytes of it.
std::string printable(std::string_view s, size_t max = 60) {
  std::string out(s.substr(0, max));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '.';
  return out;
}

// One request, "1\0COMMAND\0ARG0\0ARG1\0ARG2\0", then the reply until EOF.
std::expected<AttachResult, std::string> exchange(int fd, pid_t pid, std::string_view command,
                                                  std::span<const std::string> args, int timeout_ms) {
  std::string request("1", 2);
  request.append(command).push_back('\0');
  for (size_t i = 0; i < kArgCount; ++i) request.append(i < args.size() ? args[i] : "").push_back('\0');

  auto deadline = Clock::now() + milliseconds(timeout_ms);
  std::string jvm_name = "JVM " + std::to_string(pid);
  // Waits for `events` until the deadline; false on timeout.
  auto wait_for = [&](short events) {
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, events, 0};
      int n = poll(&p, 1, static_cast<int>(left) + 1);
      if (n > 0) return true;  // readiness, or an error the next call reports
      if (n < 0 && errno != EINTR) return true;
    }
  };
  std::string timeout = jvm_name + " did not answer '" + std::string(command) + "' within " +
                        seconds(timeout_ms) + ": it may be busy (a long GC or safepoint) or suspended";

  for (size_t sent = 0; sent < request.size();) {
    if (!wait_for(POLLOUT)) return std::unexpected(timeout);
    // MSG_NOSIGNAL: a JVM that exits must cost an EPIPE, not ember's life.
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return std::unexpected(hung_up(pid, command));
    if (n < 0) return std::unexpected("cannot send to " + jvm_name + ": " + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }

  std::string reply;
  char buf[65536];
  for (;;) {
    if (!wait_for(POLLIN)) return std::unexpected(timeout);
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0 && errno == ECONNRESET) return std::unexpected(hung_up(pid, command));
    if (n < 0) return std::unexpected("cannot read from " + jvm_name + ": " + std::strerror(errno));
    if (n == 0) break;
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > kMaxReply)
      return std::unexpected(jvm_name + " answered '" + std::string(command) + "' with more than " +
                             std::to_string(kMaxReply >> 20) + " MiB");
  }
  if (reply.empty()) return std::unexpected(hung_up(pid, command));
  return parse_attach_reply(reply, jvm_name);
}

std::expected<void, std::string> check_request(std::string_view command, std::span<const std::string> args) {
  if (command.empty() || command.size() > kMaxCommand || command.find('\0') != command.npos)
    return std::unexpected("'" + std::string(command) + "' is not an attach command (at most " +
                           std::to_string(kMaxCommand) + " characters)");
  if (args.size() > kArgCount)
    return std::unexpected("an attach command takes at most 3 arguments, not " + std::to_string(args.size()));
  for (const std::string& a : args)
    if (a.size() > kMaxArg || a.find('\0') != a.npos)
      return std::unexpected("attach argument '" + a.substr(0, 60) + "...' is longer than " +
                             std::to_string(kMaxArg) + " bytes or holds a NUL");
  return {};
}

}  // namespace

bool has_exited(pid_t pid) {
  auto st = read_status(pid);
  if (!st || st->state == 'Z' || st->state == 'X') return true;
  // A killed process closes its files (its attach socket) before it turns
  // zombie; its leader is marked exiting (PF_EXITING, in the flags of
  // /proc/PID/stat) from the start of its exit.
  constexpr unsigned long kPfExiting = 0x4;
  auto stat = read_file(proc_path(pid, "stat"));
  if (!stat) return true;
  size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return false;
  // After "(comm)": state ppid pgrp session tty_nr tpgid flags.
  std::string_view after = std::string_view(*stat).substr(paren + 1);
  return number<unsigned long>(field(after, 6)) & kPfExiting;
}

std::optional<std::string> printflag(pid_t pid, const std::string& name) {
  auto r = attach_command(pid, "printflag", std::span(&name, 1), 2000);
  if (!r || r->code != 0) return std::nullopt;
  // "-XX:+Name", "-XX:-Name" or "-XX:Name=value", then a newline.
  std::string_view out = r->output;
  out = out.substr(0, out.find('\n'));
  if (out == "-XX:+" + name) return "true";
  if (out == "-XX:-" + name) return "false";
  std::string prefix = "-XX:" + name + "=";
  if (out.starts_with(prefix)) return std::string(out.substr(prefix.size()));
  return std::nullopt;
}

std::optional<bool> jvm_flag(pid_t pid, std::string_view name) {
  std::string env = read_file(proc_path(pid, "environ")).value_or("");
  auto env_var = [&](std::string_view var) {
    std::string_view rest = env;
    while (!rest.empty()) {
      std::string_view entry = rest.substr(0, rest.find('\0'));
      rest.remove_prefix(std::min(rest.size(), entry.size() + 1));
      if (entry.size() > var.size() && entry.starts_with(var) && entry[var.size()] == '=')
        return entry.substr(var.size() + 1);
    }
    return std::string_view();
  };
  std::optional<bool> value;
  std::string on = "-XX:+" + std::string(name), off = "-XX:-" + std::string(name);
  auto scan = [&](std::string_view options, std::string_view separators) {
    while (!options.empty()) {
      size_t end = options.find_first_of(separators);
      std::string_view opt = options.substr(0, end);
      options.remove_prefix(end == options.npos ? options.size() : end + 1);
      if (opt == on) value = true;
      if (opt == off) value = false;
    }
  };
  scan(env_var("JAVA_TOOL_OPTIONS"), " \t\n");
  scan(env_var("JDK_JAVA_OPTIONS"), " \t\n");
  std::string cmdline = read_file(proc_path(pid, "cmdline")).value_or("");
  scan(cmdline, std::string_view("\0", 1));
  scan(env_var("_JAVA_OPTIONS"), " \t\n");
  return value;
}

// Why the kernel's ptrace access check (which guards /proc/PID/maps, mem,
// root) refused ember `target`, from what ember can see of both sides: the
// uids, CAP_SYS_PTRACE, the capabilities each holds (Yama's scope is for
// ptrace attach only, not these reads: kernel/ptrace.c, yama_lsm.c). A root
// ember refused without any of these is behind a sandbox or security
// module (Landlock, SELinux, AppArmor): `ember jvm 1` as root in a
// Firecracker sandbox here was told "attach as that user or as root".
std::string access_refusal(const std::string& path, const Status& target, int err) {
  constexpr uint64_t kSysPtrace = 1ull << 19;  // CAP_SYS_PTRACE
  std::string seen = path + ": " + std::strerror(err);
  Status self = read_status(getpid()).value_or(Status{});
  bool ptrace_cap = self.cap_effective & kSysPtrace;
  if (target.euid != geteuid() && !ptrace_cap)
    return "runs as uid " + std::to_string(target.euid) + " gid " + std::to_string(target.egid) + ", which ember (uid " +
           std::to_string(geteuid()) + " gid " + std::to_string(getegid()) + ") may not inspect (" + seen +
           "); attach as that user or as root";
  if (!ptrace_cap && (target.cap_permitted & ~self.cap_permitted) != 0)
    return "it holds capabilities ember lacks, and ember lacks CAP_SYS_PTRACE (" + seen +
           "); give ember CAP_SYS_PTRACE, or run it as root with its full capabilities";
  return std::string("the kernel refused ember access to it (") + seen + ") though ember runs as " +
         (geteuid() == 0 ? "root" : "its user") + (ptrace_cap ? " with CAP_SYS_PTRACE" : "") +
         ": a sandbox or security module (Landlock, SELinux, AppArmor), or a user namespace ember is not above, "
         "separates the two; run ember where it can see the process (the same container or the host)";
}

std::expected<JvmProcess, std::string> inspect_jvm(pid_t pid) {
  std::string who = "process " + std::to_string(pid);
  auto st = read_status(pid);
  if (pid <= 0 || !st) return std::unexpected("no process with pid " + std::to_string(pid));
  who += " (" + st->name + ")";
  if (st->state == 'Z' || st->state == 'X') return std::unexpected(who + " has exited");
  auto maps = read_file(proc_path(pid, "maps"));
  if (!maps && (maps.error() == EACCES || maps.error() == EPERM))
    return std::unexpected(who + ": " + access_refusal(proc_path(pid, "maps"), *st, maps.error()));
  if (!maps) return std::unexpected("no process with pid " + std::to_string(pid));
  // An exiting process drops its mappings before it turns zombie.
  if (maps->empty() && has_exited(pid)) return std::unexpected(who + " has exited");
  switch (vm_in_maps(*maps)) {
    case Vm::none:
      return std::unexpected(who + " is not a HotSpot JVM: it does not map libjvm.so");
    case Vm::openj9:
      return std::unexpected(who + " is an OpenJ9 JVM, not HotSpot: ember cannot attach to it; "
                             "give it the agent at startup (-agentpath:PATH)");
    case Vm::hotspot:
      break;
  }
  // The attach trigger goes through its root and working directory, which
  // the kernel may refuse where it lets the maps be read (this 6.18 does,
  // to a root without CAP_SYS_PTRACE).
  for (const char* entry : {"root", "cwd"})
    if (std::string path = proc_path(pid, entry); access(path.c_str(), X_OK) != 0 && (errno == EACCES || errno == EPERM))
      return std::unexpected(who + ": " + access_refusal(path, *st, errno));
  JvmProcess jvm;
  jvm.pid = pid;
  jvm.ns_pid = st->ns_pid;
  jvm.uid = st->euid;
  jvm.gid = st->egid;
  jvm.root = proc_path(pid, "root");
  std::string theirs = mount_ns(proc_path(pid, "ns/mnt"));
  jvm.own_mount_ns = !theirs.empty() && theirs != mount_ns("/proc/self/ns/mnt");
  return jvm;
}

std::string process_comm(pid_t pid) {
  std::string name = read_file(proc_path(pid, "comm")).value_or("");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

std::vector<pid_t> find_jvms() {
  return JvmScanner().scan();  // a first scan: every running JVM
}

std::vector<pid_t> JvmScanner::scan() {
  constexpr int kYoungScans = 5, kSettledEvery = 10;
  std::vector<pid_t> found;
  std::unordered_map<pid_t, Seen> now;
  DIR* dir = opendir("/proc");
  if (!dir) return found;
  while (dirent* entry = readdir(dir)) {
    pid_t pid = 0;
    std::string_view name = entry->d_name;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || end != name.data() + name.size()) continue;
    auto old = seen_.find(pid);
    if (old != seen_.end() && old->second.scans >= kYoungScans && old->second.scans % kSettledEvery != 0) {
      Seen& s = now.emplace(pid, std::move(old->second)).first->second;
      ++s.scans;
      continue;
    }
    auto comm = read_file(proc_path(pid, "comm"));
    if (!comm) continue;
    Seen s = old == seen_.end() || old->second.comm != *comm ? Seen{*comm} : old->second;
    if (!s.jvm && s.scans < kYoungScans) {
      auto maps = read_file(proc_path(pid, "maps"));
      if (maps && vm_in_maps(*maps) == Vm::hotspot) {
        s.jvm = true;
        found.push_back(pid);
      }
    }
    ++s.scans;
    now.emplace(pid, std::move(s));
  }
  closedir(dir);
  seen_ = std::move(now);
  return found;
}

std::expected<AttachResult, std::string> parse_attach_reply(std::string_view reply, std::string_view jvm_name) {
  size_t nl = reply.find('\n');
  std::string_view first = reply.substr(0, nl);
  AttachResult result;
  auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), result.code);
  if (reply.empty() || ec != std::errc() || end != first.data() + first.size())
    return std::unexpected(std::string(jvm_name) + " answered the attach request with something unexpected: '" +
                           printable(reply) + "'");
  result.output = nl == reply.npos ? std::string() : std::string(reply.substr(nl + 1));
  return result;
}

namespace {

// Agent_OnAttach's return code in a "load" reply, or nothing if the library
// did not load. JDK 17 answers "-1\nPATH was not loaded.\nDLERROR\n" when
// the library does not load, and "0\nreturn code: N\n" once Agent_OnAttach
// returned N. JDK 8 answers N as the code itself, with no output.
std::optional<int> agent_return_code(const AttachResult& reply) {
  std::string_view out = reply.output;
  if (reply.code != 0) return out.empty() ? std::optional(reply.code) : std::nullopt;
  constexpr std::string_view kPrefix = "return code: ";
  if (out.starts_with(kPrefix)) out.remove_prefix(kPrefix.size());
  out = out.substr(0, out.find('\n'));
  int agent_code = 0;
  auto [end, ec] = std::from_chars(out.data(), out.data() + out.size(), agent_code);
  return ec == std::errc() && end == out.data() + out.size() ? agent_code : 0;
}

}  // namespace

std::expected<void, std::string> check_load_reply(const AttachResult& reply, std::string_view agent_path,
                                                  std::string_view jvm_name) {
  std::optional<int> agent_code = agent_return_code(reply);
  if (!agent_code) {
    std::string_view out = reply.output;
    std::string not_loaded = std::string(agent_path) + " was not loaded.";
    std::string why;
    while (!out.empty()) {
      std::string_view line = out.substr(0, out.find('\n'));
      out.remove_prefix(std::min(out.size(), line.size() + 1));
      if (line.empty() || line == not_loaded) continue;
      why += (why.empty() ? "" : "; ") + printable(line, 300);
    }
    if (why.empty()) why = "the load command failed with code " + std::to_string(reply.code);
    return std::unexpected(std::string(jvm_name) + " could not load the agent " + std::string(agent_path) + ": " + why);
  }
  if (*agent_code == kAgentJvmStarting)
    return std::unexpected(std::string(jvm_name) + " had not finished starting: the agent " + std::string(agent_path) +
                           " could get no JVMTI environment in it yet");
  if (*agent_code != 0)
    return std::unexpected("the agent " + std::string(agent_path) + " failed to start in " + std::string(jvm_name) +
                           ": its Agent_OnAttach returned " + std::to_string(*agent_code) +
                           " (its own messages are in the JVM's output)");
  return {};
}

std::expected<AttachResult, std::string> attach_command(pid_t pid, std::string_view command,
                                                        std::span<const std::string> args, int timeout_ms) {
  if (auto ok = check_request(command, args); !ok) return std::unexpected(ok.error());
  auto jvm = inspect_jvm(pid);
  if (!jvm) return std::unexpected(jvm.error());
  bool root = geteuid() == 0;
  if (!root && (jvm->uid != geteuid() || jvm->gid != getegid()))
    return std::unexpected("JVM " + std::to_string(pid) + " runs as uid " + std::to_string(jvm->uid) + " gid " +
                           std::to_string(jvm->gid) + "; attach as that user or as root");

  std::string socket_path = jvm->root + "/tmp/.java_pid" + std::to_string(jvm->ns_pid);
  std::optional<Identity> as;
  if (root) as = Identity{jvm->uid, jvm->gid};
  bool stale = false;
  std::expected<int, std::string> fd;
  // A socket nobody listens on was left by a killed process with the same
  // pid, or replaced under a live listener: remove it and have HotSpot
  // open a new one (it re-checks its socket file on the next SIGQUIT).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (auto open = open_listener(*jvm, socket_path, timeout_ms); !open) return std::unexpected(open.error());
    fd = connect_socket(socket_path, pid, as, Clock::now() + milliseconds(timeout_ms), &stale);
    if (fd || !stale) break;
    unlink(socket_path.c_str());
  }
  if (!fd) return std::unexpected(fd.error());
  auto result = exchange(*fd, pid, command, args, timeout_ms);
  close(*fd);
  return result;
}

std::expected<AttachResult, std::string> attach_command_at(const std::string& socket_path, pid_t pid,
                                                           std::string_view command,
                                                           std::span<const std::string> args, int timeout_ms) {
  if (auto ok = check_request(command, args); !ok) return std::unexpected(ok.error());
  auto fd = connect_socket(socket_path, pid, std::nullopt, Clock::now() + milliseconds(timeout_ms));
  if (!fd) return std::unexpected(fd.error());
  auto result = exchange(*fd, pid, command, args, timeout_ms);
  close(*fd);
  return result;
}

std::expected<void, std::string> load_agent(pid_t pid, const std::string& agent_path,
                                            const std::string& options, int timeout_ms) {
  if (!agent_path.starts_with('/'))
    return std::unexpected("the agent path '" + agent_path +
                           "' must be absolute: the JVM resolves it from its own working directory");
  std::string args[] = {agent_path, "true", options};
  auto deadline = Clock::now() + milliseconds(timeout_ms);
  auto reply = attach_command(pid, "load", args, timeout_ms);
  while (reply && agent_return_code(*reply) == kAgentJvmStarting && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    reply = attach_command(pid, "load", args, timeout_ms);
  }
  if (!reply) return std::unexpected(reply.error());
  auto loaded = check_load_reply(*reply, agent_path, "JVM " + std::to_string(pid));
  if (!loaded && reply->code != 0) {
    auto jvm = inspect_jvm(pid);
    if (jvm && jvm->own_mount_ns)
      return std::unexpected(loaded.error() +
                             " (the JVM has its own mount namespace, where the path must exist: copy the agent under " +
                             jvm->root + "/ and give the path inside)");
  }
  return loaded;
}

}  // namespace ember::java
