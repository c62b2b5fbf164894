// Bytes allocated by C/C++ code: uprobes on the C library's malloc,
// calloc, realloc and mmap sample one allocation per --alloc-interval bytes
// (and, with --live, follow each sampled pointer to its free).
#include <sys/stat.h>

#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "profile.skel.h"
#include "symbolizer/elf_facts.h"
#include "user/events/event.h"

namespace ember::events {
namespace {

// ember_mmap's cookie for `library`: where mmap lies in the library's
// executable segment (its offset there << 32 | the segment's size), so the
// probe tells the library's own calls (malloc's) from the program's.
std::expected<uint64_t, std::string> mmap_cookie(const std::string& library) {
  auto place = symbolizer::exported_function_place(library, "mmap");
  if (!place) return std::unexpected(place.error());
  if (place->segment_size > UINT32_MAX) return std::unexpected(library + ": its code segment is over 4 GiB");
  return place->offset << 32 | place->segment_size;
}

// bpf/malloc.bpf.c: uprobes on the C libraries' malloc, calloc, realloc and
// mmap (and, with `live`, their returns, free and munmap), in every
// process mapping them.
class MallocProbes : public KernelPart {
 public:
  std::vector<std::string> libraries;  // paths ember can open
  uint64_t interval = 512 * 1024;      // bytes per sample
  bool live = false;                   // follow sampled pointers until freed

  std::expected<void, std::string> prepare(profile_bpf& skel, std::vector<std::string>& warnings) override {
    skel.rodata->malloc_interval = std::max<uint64_t>(interval, 1);
    skel.rodata->malloc_live = live;
    for (bpf_program* prog : {skel.progs.ember_malloc, skel.progs.ember_calloc, skel.progs.ember_realloc})
      bpf_program__set_autoload(prog, true);
    bpf_program__set_autoload(skel.progs.ember_alloc_return, live);
    bpf_program__set_autoload(skel.progs.ember_free, live);
    bpf_program__set_autoload(skel.progs.ember_live_exit, live);
    if (live) {
      // Hash maps take all their memory at creation: 20 MiB for these.
      bpf_map__set_max_entries(skel.maps.malloc_pending, 16384);  // calls in flight, by thread
      bpf_map__set_max_entries(skel.maps.mmap_pending, 16384);
      bpf_map__set_max_entries(skel.maps.live_allocs, 262144);  // sampled blocks not yet freed
      bpf_map__set_max_entries(skel.maps.live_exits, 16384);    // processes ended since the last cut
    }
    // mmap's probe tells the C library's own calls by a BPF cookie (Linux 5.15+).
    mmaps_ = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie, nullptr) > 0;
    if (!mmaps_)
      warnings.push_back(
          "-e malloc: mmap calls are not recorded: this kernel has no BPF cookies for uprobes (Linux 5.15+)");
    bpf_program__set_autoload(skel.progs.ember_mmap, mmaps_);
    bpf_program__set_autoload(skel.progs.ember_mmap_return, mmaps_ && live);
    return {};
  }

  uint64_t ring_bytes(int cpus) const override { return burst_ring_bytes(cpus); }

  std::expected<void, std::string> attach(profile_bpf& skel, std::vector<std::string>& warnings) override {
    struct Probe {
      bpf_program* prog;
      const char* function;
      bool ret;
      uint64_t cookie = 0;
    };
    if (live && !keep(bpf_program__attach(skel.progs.ember_live_exit)))
      return std::unexpected("-e malloc --live: cannot attach to sched_process_exit: " + errno_text(errno));
    for (const std::string& library : libraries) {
      std::vector<Probe> probes = {{skel.progs.ember_malloc, "malloc", false},
                                   {skel.progs.ember_calloc, "calloc", false},
                                   {skel.progs.ember_realloc, "realloc", false}};
      if (live) {
        for (const char* f : {"malloc", "calloc", "realloc"}) probes.push_back({skel.progs.ember_alloc_return, f, true});
        probes.push_back({skel.progs.ember_free, "free", false});
      }
      if (mmaps_) {
        if (auto cookie = mmap_cookie(library); !cookie) {
          warnings.push_back("-e malloc: mmap calls are not recorded: " + cookie.error());
        } else {
          probes.push_back({skel.progs.ember_mmap, "mmap", false, *cookie});
          if (live) {
            probes.push_back({skel.progs.ember_mmap_return, "mmap", true});
            probes.push_back({skel.progs.ember_free, "munmap", false});
          }
        }
      }
      for (const Probe& p : probes) {
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = p.cookie, .retprobe = p.ret, .func_name = p.function);
        if (!keep(bpf_program__attach_uprobe_opts(p.prog, -1, library.c_str(), 0, &opts)))
          return std::unexpected("-e malloc: cannot put a uprobe on " + std::string(p.function) + " in " + library +
                                 ": " + errno_text(errno) +
                                 " (the kernel needs uprobes, CONFIG_UPROBE_EVENTS; record without -e malloc)");
      }
    }
    return {};
  }

 private:
  bool mmaps_ = false;
};

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
std::expected<void, std::string> configure(const Resolved& s, const Scope& scope, KernelParts& parts,
                                           std::vector<std::string>& warnings) {
  MallocProbes& probes = kernel_part<MallocProbes>(parts);
  for (uint32_t pid : scope.pids) {
    std::string libc = libc_of("/proc/" + std::to_string(pid));
    if (libc.empty())
      warnings.push_back("process " + std::to_string(pid) +
                         " maps no libc.so.6 (a static binary, or its own allocator): -e malloc cannot see its "
                         "allocations");
    else
      add_library(probes.libraries, libc);
  }
  // The cgroups' processes are not named one by one: no warning for those
  // without a libc (kernel threads in the root cgroup among them).
  for (uint32_t pid : scope.members)
    if (std::string libc = libc_of("/proc/" + std::to_string(pid)); !libc.empty())
      add_library(probes.libraries, libc);
  if (!scope.command.empty() && symbolizer::is_static_executable(scope.command).value_or(false))
    warnings.push_back(scope.command +
                       " is statically linked (no libc.so.6): -e malloc cannot see its allocations, only those of "
                       "the dynamically linked programs it starts");
  // Processes that start in an empty cgroup most likely use the host's.
  if (scope.pids.empty() && probes.libraries.empty()) probes.libraries.push_back(libc_of("/proc/self"));
  if (probes.libraries.empty() || probes.libraries.front().empty())
    return std::unexpected(
        "-e malloc: none of the targets maps a shared libc.so.6, the allocator ember probes (static binaries and "
        "other allocators, such as jemalloc linked in, are not seen): profile their CPU time with -e cpu-clock, or "
        "relink them against glibc's malloc");
  probes.interval = s.settings.alloc_interval;
  probes.live = s.settings.live;
  return {};
}

EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 1u << EMBER_KIND_MALLOC;
  v.live_only = s.settings.live;
  v.min_age_ns = s.min_age_ns;
  return v;
}

// What the graph keeps of the allocations, for its summary.
std::string live_text(const Resolved& s) {
  if (!s.settings.live) return "";
  if (s.settings.min_age.empty()) return ", still allocated at the end";
  return ", still allocated at the end and allocated at least " + s.settings.min_age + " before it";
}

std::string summary(const Resolved& s, const Outcome& o) {
  return summary_line(o, "%.1f MiB in %llu samples (one per %llu bytes allocated)%s", o.total / 1048576.0,
                      static_cast<unsigned long long>(o.records),
                      static_cast<unsigned long long>(s.settings.alloc_interval),
                      live_text(s).c_str());
}

}  // namespace

extern const Event kMalloc = {
    .name = "malloc",
    .help = "bytes allocated by C/C++ code",
    .unit = "bytes",
    .settings = kAllocInterval | kLive | kMinAge,
    .configure = configure,
    .view = view,
    .info = live_info,
    .summary = summary,
};

}  // namespace ember::events
