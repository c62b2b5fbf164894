#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "user/java/java_attach.h"

using namespace ember::java;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A child process, killed and reaped on every way out of a test, so a failed
// REQUIRE leaves no JVM behind.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { stop(); }
  pid_t pid() const { return pid_; }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

// Runs argv in `dir` with its output discarded. PR_SET_PDEATHSIG kills it
// even if this binary dies without unwinding (an ASan report, a signal).
pid_t spawn(const std::vector<std::string>& argv, const fs::path& dir) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (chdir(dir.c_str()) != 0) _exit(127);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}


// Sleeper.class, compiled once for every test case; empty `missing` if ready.
struct Java {
  TempDir dir;
  std::string missing;
};

const Java& java() {
  static Java j = [] {
    Java j;
    if (std::system("command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1") != 0) {
      j.missing = "java or javac is not on PATH (apt-get install openjdk-17-jdk-headless)";
      return j;
    }
    std::ofstream(j.dir.path / "Sleeper.java")
        << "public class Sleeper {\n"
           "  public static void main(String[] args) throws Exception {\n"
           "    new java.io.File(\"ready-\" + ProcessHandle.current().pid()).createNewFile();\n"
           "    Thread.sleep(Long.MAX_VALUE);\n"
           "  }\n"
           "}\n";
    std::string cmd = "javac -d " + j.dir.path.string() + " " + (j.dir.path / "Sleeper.java").string();
    if (std::system(cmd.c_str()) != 0) j.missing = "javac failed on Sleeper.java";
    return j;
  }();
  return j;
}

std::string socket_of(pid_t pid) { return "/tmp/.java_pid" + std::to_string(pid); }

// A Sleeper JVM in Java's temp dir, its working directory. Killed, it cannot
// delete its attach socket, so this does.
struct Jvm : Child {
  explicit Jvm(std::vector<std::string> jvm_options = {}) : Child(start(jvm_options)) {}
  static pid_t start(const std::vector<std::string>& jvm_options) {
    std::vector<std::string> argv = {"java", "-Xmx32m", "-XX:+UseSerialGC"};
    argv.insert(argv.end(), jvm_options.begin(), jvm_options.end());
    argv.insert(argv.end(), {"-cp", java().dir.path.string(), "Sleeper"});
    return spawn(argv, java().dir.path);
  }
  ~Jvm() {
    pid_t pid = this->pid();
    stop();
    unlink(socket_of(pid).c_str());
  }
};

// Binds a socket at `path` and closes it: a socket file nobody listens on.
void stale_socket(const std::string& path) {
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  close(s);
}

// Until Sleeper's main runs. Attached any earlier, "properties" can fail
// inside the JVM (code -1, MissingResourceException for the time zone names).
bool wait_for_jvm(pid_t pid) {
  auto deadline = Clock::now() + std::chrono::seconds(5);
  fs::path ready = java().dir.path / ("ready-" + std::to_string(pid));
  while (Clock::now() < deadline) {
    if (fs::exists(ready)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool trigger_left(pid_t ns_pid) {
  std::string name = ".attach_pid" + std::to_string(ns_pid);
  return fs::exists(java().dir.path / name) || fs::exists(fs::path("/tmp") / name);
}

// A one-connection "JVM" at `socket_path`: reads a full request (5 NULs),
// then answers `reply`, or hangs up if it is empty, or stalls if `stall`.
pid_t fake_jvm(const std::string& socket_path, std::string reply, bool stall = false) {
  int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(server, 1) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int conn = accept(server, nullptr, nullptr);
    std::string request;
    char buf[256];
    ssize_t n;
    while (std::count(request.begin(), request.end(), '\0') < 5 && (n = read(conn, buf, sizeof buf)) > 0)
      request.append(buf, static_cast<size_t>(n));
    if (stall) pause();
    if (reply == "echo") {
      std::replace(request.begin(), request.end(), '\0', '|');
      reply = "0\n" + request;
    }
    if (!reply.empty() && write(conn, reply.data(), reply.size()) < 0) _exit(1);
    _exit(0);
  }
  close(server);
  return pid;
}

}  // namespace

TEST_CASE("attach to a running JVM", "[java_attach]") {
  // openjdk-17-jdk-headless is a build dependency (scripts/deps.sh): its
  // absence is a broken set-up, not a reason to skip.
  if (!java().missing.empty()) FAIL(java().missing);
  Jvm jvm;
  REQUIRE(wait_for_jvm(jvm.pid()));

  auto jvms = find_jvms();
  CHECK(std::find(jvms.begin(), jvms.end(), jvm.pid()) != jvms.end());
  auto facts = inspect_jvm(jvm.pid());
  REQUIRE(facts);
  CHECK(facts->pid == jvm.pid());
  CHECK(facts->ns_pid == jvm.pid());
  CHECK(facts->uid == geteuid());
  CHECK(facts->gid == getegid());
  CHECK_FALSE(facts->own_mount_ns);
  CHECK(facts->root == "/proc/" + std::to_string(jvm.pid()) + "/root");

  auto props = attach_command(jvm.pid(), "properties", {});
  REQUIRE(props);
  {
    INFO(props->output);
    CHECK(props->code == 0);
    CHECK(contains(props->output, "java.version="));
  }
  CHECK_FALSE(trigger_left(facts->ns_pid));

  std::vector<std::string> flag = {"PreserveFramePointer"};
  auto printflag = attach_command(jvm.pid(), "printflag", flag);
  REQUIRE(printflag);
  CHECK(printflag->code == 0);
  CHECK(printflag->output == "-XX:-PreserveFramePointer\n");
  // The value, ergonomics included; nothing for a flag this JDK lacks.
  CHECK(ember::java::printflag(jvm.pid(), "PreserveFramePointer") == "false");
  CHECK(ember::java::printflag(jvm.pid(), "UseCompressedOops") == "true");
  CHECK(ember::java::printflag(jvm.pid(), "ObjectAlignmentInBytes") == "8");
  CHECK(ember::java::printflag(jvm.pid(), "NoSuchFlagAnywhere") == std::nullopt);

  // Its socket replaced by a dead one (as a killed JVM with the same pid
  // leaves): ember removes it and HotSpot, signalled again, opens a new one.
  REQUIRE(unlink(socket_of(jvm.pid()).c_str()) == 0);
  stale_socket(socket_of(jvm.pid()));
  auto reopened = attach_command(jvm.pid(), "printflag", flag);
  REQUIRE(reopened);
  CHECK(reopened->output == "-XX:-PreserveFramePointer\n");
  CHECK_FALSE(trigger_left(facts->ns_pid));

  auto unknown = attach_command(jvm.pid(), "nosuchcommand", {});
  REQUIRE(unknown);
  CHECK(unknown->code != 0);

  // JDK 17: "-1\n/nonexistent/libnope.so was not loaded.\n<dlerror>\n".
  auto bogus = load_agent(jvm.pid(), "/nonexistent/libnope.so", "");
  REQUIRE_FALSE(bogus);
  CHECK(bogus.error() == "JVM " + std::to_string(jvm.pid()) +
                             " could not load the agent /nonexistent/libnope.so: /nonexistent/libnope.so: "
                             "cannot open shared object file: No such file or directory");
  auto relative = load_agent(jvm.pid(), "libnope.so", "");
  REQUIRE_FALSE(relative);
  CHECK(contains(relative.error(), "must be absolute"));

  // An agent whose Agent_OnAttach returns its options as a number.
  // JDK 17 answers "0\nreturn code: N\n" whatever N is.
  fs::path agent = java().dir.path / "libexit.so";
  std::ofstream(java().dir.path / "exit.c")
      << "#include <stdlib.h>\n"
         "int Agent_OnAttach(void* vm, char* options, void* reserved) { return atoi(options); }\n";
  std::string cc = "cc -shared -fPIC -o " + agent.string() + " " + (java().dir.path / "exit.c").string();
  REQUIRE(std::system(cc.c_str()) == 0);
  {
    CHECK(load_agent(jvm.pid(), agent.string(), "0"));
    auto failed = load_agent(jvm.pid(), agent.string(), "7");
    REQUIRE_FALSE(failed);
    CHECK(contains(failed.error(), "Agent_OnAttach returned 7"));
    // A JVM that never finishes starting (the agent answers JNI_EDETACHED
    // each time): asked again until the timeout, then said so.
    auto began = std::chrono::steady_clock::now();
    auto starting = load_agent(jvm.pid(), agent.string(), "-2", 600);
    REQUIRE_FALSE(starting);
    CHECK(std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(600));
    CHECK(contains(starting.error(), "had not finished starting"));
  }
  // One that finishes starting: the third load starts the agent (each
  // counts itself in a file: the JVM unloads an agent that failed).
  fs::path late = java().dir.path / "liblate.so";
  fs::path loads = java().dir.path / "loads";
  std::ofstream(java().dir.path / "late.c")
      << "#include <stdio.h>\n"
         "int Agent_OnAttach(void* vm, char* options, void* reserved) {\n"
         "  FILE* f = fopen(options, \"a\"); fputc('x', f); long n = ftell(f); fclose(f);\n"
         "  return n < 3 ? -2 : 0;\n"
         "}\n";
  cc = "cc -shared -fPIC -o " + late.string() + " " + (java().dir.path / "late.c").string();
  REQUIRE(std::system(cc.c_str()) == 0);
  CHECK(load_agent(jvm.pid(), late.string(), loads.string()));
  CHECK(fs::file_size(loads) == 3);

  // What attach_command answers a child that `become` made someone else
  // first (it returns false where it cannot).
  auto refusal_as = [&](const std::function<bool()>& become) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(out[0]);
      if (!become()) _exit(1);
      auto r = attach_command(jvm.pid(), "properties", {});
      std::string msg = r ? "attached" : r.error();
      if (write(out[1], msg.data(), msg.size()) < 0) _exit(1);
      _exit(0);
    }
    Child other(pid);
    close(out[1]);
    std::string msg;
    char buf[512];
    for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
    close(out[0]);
    return msg;
  };
  if (geteuid() == 0) {
    // Another uid may not attach: the same refusal HotSpot would give, earlier.
    std::string msg = refusal_as([] { return setgid(65534) == 0 && setuid(65534) == 0; });
    CHECK(contains(msg, "runs as uid 0"));
    CHECK(contains(msg, "attach as that user or as root"));
    // The same uid without CAP_SYS_PTRACE, the JVM holding capabilities
    // this ember lacks: the cause said, not advice to attach as root.
    msg = refusal_as([] {
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct caps[2]{};
      if (syscall(SYS_capget, &header, caps) != 0) return false;
      caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
      caps[0].permitted &= ~(1u << CAP_SYS_PTRACE);
      return syscall(SYS_capset, &header, caps) == 0;
    });
    INFO(msg);
    CHECK(contains(msg, "it holds capabilities ember lacks, and ember lacks CAP_SYS_PTRACE (/proc/"));
    CHECK(contains(msg, ": Permission denied)"));
    CHECK_FALSE(contains(msg, "attach as that user or as root"));
  }

  // A JVM that has died (a zombie until reaped) is no longer a JVM.
  kill(jvm.pid(), SIGKILL);
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(jvm.pid()), &info, WEXITED | WNOWAIT) == 0);
  auto dead = attach_command(jvm.pid(), "properties", {});
  REQUIRE_FALSE(dead);
  CHECK(contains(dead.error(), "has exited"));
}

TEST_CASE("a JVM with attach disabled is refused in bounded time", "[java_attach]") {
  // openjdk-17-jdk-headless is a build dependency (scripts/deps.sh): its
  // absence is a broken set-up, not a reason to skip.
  if (!java().missing.empty()) FAIL(java().missing);
  // On the command line ember sees the flag and sends no SIGQUIT at all;
  // hidden in an options file, only the timeout can tell.
  std::ofstream(java().dir.path / "disable.options") << "-XX:+DisableAttachMechanism\n";
  Jvm visible({"-XX:+DisableAttachMechanism"});
  Jvm hidden({"-XX:VMOptionsFile=" + (java().dir.path / "disable.options").string()});
  REQUIRE(wait_for_jvm(visible.pid()));
  REQUIRE(wait_for_jvm(hidden.pid()));

  auto start = Clock::now();
  auto refused = attach_command(visible.pid(), "properties", {}, 1500);
  REQUIRE_FALSE(refused);
  CHECK(seconds_since(start) < 0.5);
  CHECK(contains(refused.error(), "runs with -XX:+DisableAttachMechanism"));

  start = Clock::now();
  auto timed_out = attach_command(hidden.pid(), "properties", {}, 1500);
  double took = seconds_since(start);
  REQUIRE_FALSE(timed_out);
  CHECK(took >= 1.4);
  CHECK(took < 3.0);
  CHECK(timed_out.error() == "JVM " + std::to_string(hidden.pid()) +
                                 " did not open its attach socket within 1.5 s: it may run with "
                                 "-XX:+DisableAttachMechanism, or be too busy or suspended; restart it without "
                                 "that flag, or give it the agent at startup (-agentpath:PATH)");
  CHECK_FALSE(trigger_left(hidden.pid()));

  // The JVM dies while ember waits for its socket: told at once, no hang.
  std::thread killer([pid = hidden.pid()] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(pid, SIGKILL);
  });
  start = Clock::now();
  auto died = attach_command(hidden.pid(), "properties", {}, 3000);
  killer.join();
  REQUIRE_FALSE(died);
  CHECK(seconds_since(start) < 1.5);
  CHECK(died.error() == "JVM " + std::to_string(hidden.pid()) + " exited during the attach");
  CHECK_FALSE(trigger_left(hidden.pid()));
}

TEST_CASE("processes that are not JVMs", "[java_attach]") {
  auto self = inspect_jvm(getpid());
  REQUIRE_FALSE(self);
  CHECK(contains(self.error(), "process " + std::to_string(getpid()) + " ("));
  CHECK(contains(self.error(), ") is not a HotSpot JVM: it does not map libjvm.so"));
  auto jvms = find_jvms();
  CHECK(std::find(jvms.begin(), jvms.end(), getpid()) == jvms.end());

  auto attach = attach_command(getpid(), "properties", {});
  REQUIRE_FALSE(attach);
  CHECK(attach.error() == self.error());

  auto missing = inspect_jvm(0x7ffffff0);
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == "no process with pid 2147483632");
}

TEST_CASE("has_exited: alive, killed and not reaped, gone", "[java_attach]") {
  CHECK_FALSE(has_exited(getpid()));
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  CHECK_FALSE(has_exited(child));
  kill(child, SIGKILL);
  // A zombie, or on its way to one, until reaped.
  for (int i = 0; i < 100 && !has_exited(child); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(has_exited(child));
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(has_exited(child));
}

TEST_CASE("the request and reply, against a fake JVM", "[java_attach]") {
  TempDir dir;
  std::string path = (dir.path / "sock").string();
  std::vector<std::string> one_arg = {"FlagName"};

  SECTION("the request is 1, the command and three arguments, each NUL-terminated") {
    Child server(fake_jvm(path, "echo"));
    auto r = attach_command_at(path, server.pid(), "printflag", one_arg);
    REQUIRE(r);
    CHECK(r->code == 0);
    CHECK(r->output == "1|printflag|FlagName|||");
  }
  SECTION("a reply that does not start with a number") {
    Child server(fake_jvm(path, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"));
    auto r = attach_command_at(path, server.pid(), "properties", {});
    REQUIRE_FALSE(r);
    CHECK(r.error() == "JVM " + std::to_string(server.pid()) +
                           " answered the attach request with something unexpected: "
                           "'HTTP/1.1 400 Bad Request..Content-Length: 0....'");
  }
  SECTION("a hang-up without a reply") {
    Child server(fake_jvm(path, ""));
    auto r = attach_command_at(path, server.pid(), "properties", {});
    REQUIRE_FALSE(r);
    CHECK(contains(r.error(), "JVM " + std::to_string(server.pid())));
    CHECK((contains(r.error(), "closed the attach connection") || contains(r.error(), "exited")));
  }
  SECTION("no reply within the timeout") {
    Child server(fake_jvm(path, "", /*stall=*/true));
    auto start = Clock::now();
    auto r = attach_command_at(path, server.pid(), "properties", {}, 300);
    REQUIRE_FALSE(r);
    CHECK(seconds_since(start) < 1.0);
    CHECK(contains(r.error(), "did not answer 'properties' within 0.3 s"));
  }
  SECTION("a socket nobody listens on") {
    stale_socket(path);
    auto r = attach_command_at(path, 4242, "properties", {});
    REQUIRE_FALSE(r);
    CHECK(contains(r.error(), "refuses connections"));
  }
  SECTION("requests HotSpot would drop") {
    std::vector<std::string> four(4);
    CHECK_FALSE(attach_command_at(path, 4242, "properties", four));
    CHECK_FALSE(attach_command_at(path, 4242, "a-command-name-too-long", {}));
    CHECK_FALSE(attach_command_at(path, 4242, "properties", std::vector<std::string>{std::string(2000, 'x')}));
  }
}

TEST_CASE("what a load reply says, as JDK 17 and JDK 8 answer", "[java_attach]") {
  const std::string agent = "/opt/libagent.so";
  auto check = [&](int code, std::string output) { return check_load_reply({code, std::move(output)}, agent, "JVM 7"); };
  // JDK 17: the library loaded, then Agent_OnAttach's code on its own line.
  CHECK(check(0, "return code: 0\n"));
  auto failed = check(0, "return code: 3\n");
  REQUIRE_FALSE(failed);
  CHECK(failed.error() == "the agent /opt/libagent.so failed to start in JVM 7: its Agent_OnAttach returned 3 "
                          "(its own messages are in the JVM's output)");
  auto starting = check(0, "return code: -2\n");
  REQUIRE_FALSE(starting);
  CHECK(starting.error() ==
        "JVM 7 had not finished starting: the agent /opt/libagent.so could get no JVMTI environment in it yet");
  // JDK 17: the library did not load; the dlerror is the cause.
  auto unloaded = check(-1, "/opt/libagent.so was not loaded.\n/opt/libagent.so: cannot open shared object file\n");
  REQUIRE_FALSE(unloaded);
  CHECK(unloaded.error() ==
        "JVM 7 could not load the agent /opt/libagent.so: /opt/libagent.so: cannot open shared object file");
  // JDK 8: Agent_OnAttach's code is the reply's, with no output.
  CHECK(check(0, ""));
  auto jdk8 = check(3, "");
  REQUIRE_FALSE(jdk8);
  CHECK(contains(jdk8.error(), "its Agent_OnAttach returned 3"));
  auto jdk8_starting = check(-2, "");
  REQUIRE_FALSE(jdk8_starting);
  CHECK(contains(jdk8_starting.error(), "had not finished starting"));
}
