// Measurement tool: the symbolizer through a stream of short-lived
// processes, as a long session sees them. Each child execs a program (the
// programs given, in turn), is snapshot, has an address in each of its
// mapped files named, is killed and forgotten; every WINDOW children a
// window ends. Prints, per window, the process's RSS and open files, and
// what the symbolizer says it holds. Flat over the run: nothing grows.
// Usage: symbolizer_churn CHILDREN WINDOW "PROGRAM [ARGS]"...
//   e.g. symbolizer_churn 20000 200 "+/bin/sleep 30" /usr/bin/cat
// A "+" before a program runs a fresh copy of it each time (a new inode,
// the same build-id: as freshly built test binaries), deleted after.
// Built with -DCHURN_WITHOUT_FORGETTING against a symbolizer that cannot
// forget, it measures the old behaviour.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "symbolizer/symbolizer.h"

namespace {

long open_fds() {
  namespace fs = std::filesystem;
  return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
}

long rss_kib() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// Allocated by malloc: small blocks and mmap'ed big ones (section data).
long heap_kib() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<long>((m.uordblks + m.hblkhd) / 1024);
}

std::vector<std::string> words(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Starts `argv` with stdin an open, empty pipe (cat and the like wait on
// it); returns once it has exec'ed (its CLOEXEC pipe closed), or -1.
pid_t start(const std::vector<std::string>& argv, int stdin_fd) {
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    dup2(stdin_fd, 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(exec_pipe[1]);
  char byte;
  while (read(exec_pipe[0], &byte, 1) > 0) {
  }
  close(exec_pipe[0]);
  return child;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: symbolizer_churn CHILDREN WINDOW \"PROGRAM [ARGS]\"...\n");
    return 2;
  }
  long children = std::atol(argv[1]), window = std::atol(argv[2]);
  std::vector<std::vector<std::string>> programs;
  for (int i = 3; i < argc; ++i) programs.push_back(words(argv[i]));
  int idle[2];
  if (pipe2(idle, O_CLOEXEC) != 0) return 1;
  char dir[] = "/tmp/ember-churn-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::string copy = std::string(dir) + "/program";

  ember::symbolizer::Symbolizer symbolizer;
  std::printf("children rss_kib fds heap_kib held_kib binaries open_files named\n");
  long named = 0;
  for (long i = 1; i <= children; ++i) {
    std::vector<std::string> argv = programs[i % programs.size()];
    if (argv[0].starts_with("+")) {
      argv[0].erase(0, 1);
      std::filesystem::copy_file(argv[0], copy, std::filesystem::copy_options::overwrite_existing);
      std::filesystem::permissions(copy, std::filesystem::perms::owner_exec, std::filesystem::perm_options::add);
      argv[0] = copy;
    }
    pid_t child = start(argv, idle[0]);
    std::filesystem::remove(copy);
    if (child < 0) return 1;
    if (symbolizer.snapshot_process(child)) {
      std::vector<uint64_t> addresses;
      for (const auto& [mapping, fd] : symbolizer.mapped_files(child))
        addresses.push_back(mapping->start + (mapping->end - mapping->start) / 2);
      for (const auto& s : symbolizer.symbolize_user(child, addresses)) named += s.known();
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
#ifndef CHURN_WITHOUT_FORGETTING
    symbolizer.forget_process(child);
#endif
    if (i % window != 0) continue;
#ifndef CHURN_WITHOUT_FORGETTING
    symbolizer.end_window();
    uint64_t held = symbolizer.memory_bytes();
    size_t binaries = symbolizer.binaries().size(), files = symbolizer.open_files();
#else
    uint64_t held = 0;
    size_t binaries = 0, files = 0;
#endif
    std::printf("%ld %ld %ld %ld %llu %zu %zu %ld\n", i, rss_kib(), open_fds(), heap_kib(),
                static_cast<unsigned long long>(held / 1024), binaries, files, named);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
