// The command a recording runs (`ember record -- CMD`): found as execvp
// finds it, started held before its exec so that it runs only once
// sampling does, then watched and waited for.
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember {

// The name a command ember starts carries until it execs: its records
// until then (ember's own code) are left out.
inline constexpr char kBeforeExecName[] = "ember-pre-exec";

// Where execvp finds `name`: itself if it has a slash, else the first
// executable of that name in $PATH; empty if none.
std::string find_command(const std::string& name);

class HeldCommand {
 public:
  // Forks `argv`, held at a pipe before its exec; `env`: variables to set
  // in its environment ("NAME=value").
  static std::expected<HeldCommand, std::string> spawn(const std::vector<std::string>& argv,
                                                       const std::vector<std::string>& env);
  HeldCommand(HeldCommand&& other) noexcept;
  HeldCommand& operator=(HeldCommand&&) = delete;
  HeldCommand(const HeldCommand&) = delete;
  // Not yet released: it exits unrun, and is reaped.
  ~HeldCommand();

  pid_t pid() const { return pid_; }
  // Lets it exec; why it could not if the exec failed (it is then reaped).
  std::expected<void, std::string> release();
  // Its wait status once it has exited, without waiting; it is reaped.
  std::optional<int> exited();
  // Its wait status, waiting for its exit (through signals) if need be.
  int wait();

 private:
  HeldCommand(std::string name, pid_t pid, int go_fd, int error_fd)
      : name_(std::move(name)), pid_(pid), go_fd_(go_fd), error_fd_(error_fd) {}
  std::string name_;  // argv[0], for the messages
  pid_t pid_;
  int go_fd_;     // a byte written here lets it exec; closed, it exits unrun
  int error_fd_;  // carries errno if its exec fails; closed by a good exec
  std::optional<int> status_;
};

// A wait status as a shell's exit code: the status, or 128 + the signal.
int exit_code_of(int status);

}  // namespace ember
