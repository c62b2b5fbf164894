#include "user/session/command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace ember {

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

std::expected<HeldCommand, std::string> HeldCommand::spawn(const std::vector<std::string>& argv,
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
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // Caught signals are reset by exec, ignored ones are not.
    signal(SIGPIPE, SIG_DFL);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    execvp(args[0], args.data());
    int e = errno;
    (void)!write(err[1], &e, sizeof e);
    _exit(127);
  }
  close(go[0]);
  close(err[1]);
  return HeldCommand(argv.empty() ? "" : argv[0], pid, go[1], err[0]);
}

HeldCommand::HeldCommand(HeldCommand&& other) noexcept
    : name_(std::move(other.name_)),
      pid_(std::exchange(other.pid_, -1)),
      go_fd_(std::exchange(other.go_fd_, -1)),
      error_fd_(std::exchange(other.error_fd_, -1)),
      status_(other.status_) {}

HeldCommand::~HeldCommand() {
  if (go_fd_ >= 0) {
    close(go_fd_);  // it reads EOF and exits 127 unrun
    wait();
  }
  if (error_fd_ >= 0) close(error_fd_);
}

std::expected<void, std::string> HeldCommand::release() {
  char go = 1;
  (void)!write(go_fd_, &go, 1);
  close(std::exchange(go_fd_, -1));
  int err = 0;
  ssize_t got;
  while ((got = read(error_fd_, &err, sizeof err)) < 0 && errno == EINTR) {
  }
  bool failed = got == sizeof err;
  close(std::exchange(error_fd_, -1));
  if (!failed) return {};
  wait();
  return std::unexpected("cannot run '" + name_ + "': " + std::strerror(err));
}

std::optional<int> HeldCommand::exited() {
  int status = 0;
  if (!status_ && pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
  return status_;
}

int HeldCommand::wait() {
  int status = 0;
  // A second Ctrl-C must not lose the status.
  while (!status_ && pid_ > 0) {
    if (waitpid(pid_, &status, 0) == pid_)
      status_ = status;
    else if (errno != EINTR)
      break;
  }
  return status_.value_or(0);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace ember
