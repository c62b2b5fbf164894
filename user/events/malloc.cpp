// Bytes allocated by C/C++ code: uprobes on the C library's malloc,
// calloc, realloc and mmap sample one allocation per --alloc-interval bytes
// (and, with --live, follow each sampled pointer to its free).
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "symbolizer/elf_facts.h"
#include "user/events/event.h"

namespace ember::events {
namespace {

// The C library a process maps, as a path ember can open (through the
// process's root, for containers); empty if it maps none (a static binary).
std::string libc_of(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.ends_with("/libc.so.6") || path.find("/libc-2.") != std::string::npos)
      return proc_dir == "/proc/self" ? path : proc_dir + "/root" + path;
  }
  return {};
}

// Adds the library at `path` to `libraries` unless its file is there
// already: a uprobe goes on the file, not on a path, and one file probed
// twice (/proc/A/root/... and /proc/B/root/... of two processes sharing
// the host's root) would run the programs twice per call. The host's own
// path is kept where it names the same file, so that the probe does not
// depend on the process that showed it staying alive.
void add_library(std::vector<std::string>& libraries, const std::string& path) {
  struct stat file{}, host{}, listed{};
  if (stat(path.c_str(), &file) != 0) return;  // the process is gone
  for (const std::string& l : libraries)
    if (stat(l.c_str(), &listed) == 0 && listed.st_dev == file.st_dev && listed.st_ino == file.st_ino) return;
  size_t root = path.find("/root/");
  std::string host_path = path.starts_with("/proc/") && root != std::string::npos ? path.substr(root + 5) : path;
  bool same = stat(host_path.c_str(), &host) == 0 && host.st_dev == file.st_dev && host.st_ino == file.st_ino;
  libraries.push_back(same ? host_path : path);
}

// The targets' own libc (they may live in containers); the host's for
// everything else, a command included.
std::expected<void, std::string> configure(const Resolved& s, const Scope& scope, SamplerConfig& config,
                                           std::vector<std::string>& warnings) {
  for (uint32_t pid : scope.pids) {
    std::string libc = libc_of("/proc/" + std::to_string(pid));
    if (libc.empty())
      warnings.push_back("process " + std::to_string(pid) +
                         " maps no libc.so.6 (a static binary, or its own allocator): -e malloc cannot see its "
                         "allocations");
    else
      add_library(config.malloc_libraries, libc);
  }
  // The cgroups' processes are not named one by one: no warning for those
  // without a libc (kernel threads in the root cgroup among them).
  for (uint32_t pid : scope.members)
    if (std::string libc = libc_of("/proc/" + std::to_string(pid)); !libc.empty())
      add_library(config.malloc_libraries, libc);
  if (!scope.command.empty() && symbolizer::is_static_executable(scope.command).value_or(false))
    warnings.push_back(scope.command +
                       " is statically linked (no libc.so.6): -e malloc cannot see its allocations, only those of "
                       "the dynamically linked programs it starts");
  // Processes that start in an empty cgroup most likely use the host's.
  if (scope.pids.empty() && config.malloc_libraries.empty()) config.malloc_libraries.push_back(libc_of("/proc/self"));
  if (config.malloc_libraries.empty() || config.malloc_libraries.front().empty())
    return std::unexpected(
        "-e malloc: none of the targets maps a shared libc.so.6, the allocator ember probes (static binaries and "
        "other allocators, such as jemalloc linked in, are not seen): profile their CPU time with -e cpu-clock, or "
        "relink them against glibc's malloc");
  config.malloc_interval = s.settings.alloc_interval;
  config.malloc_live = s.settings.live;
  return {};
}

EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 1u << EMBER_KIND_MALLOC;
  v.live_only = s.settings.live;
  return v;
}

std::string summary(const Resolved& s, const Outcome& o) {
  return summary_line(o, "%.1f MiB in %llu samples (one per %llu bytes allocated)%s", o.total / 1048576.0,
                      static_cast<unsigned long long>(o.records),
                      static_cast<unsigned long long>(s.settings.alloc_interval),
                      s.settings.live ? ", still allocated at the end" : "");
}

}  // namespace

extern const Event kMalloc = {
    .name = "malloc",
    .help = "bytes allocated by C/C++ code",
    .unit = "bytes",
    .settings = kAllocInterval | kLive,
    .configure = configure,
    .view = view,
    .summary = summary,
};

}  // namespace ember::events
