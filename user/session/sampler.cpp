#include "user/session/sampler.h"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <zlib.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_set>

#include "profile.skel.h"

namespace ember {
namespace {

bool g_verbose = false;

// Samples handled per poll() at most, so a flood cannot starve the loop.
constexpr size_t kMaxBatch = 16384;

int libbpf_print(enum libbpf_print_level level, const char* format, va_list args) {
  if (!g_verbose || level == LIBBPF_DEBUG) return 0;
  return std::vfprintf(stderr, format, args);
}

// The ring buffer holds what the parts ask (about half a second of their
// worst-case traffic), so a busy collector (it polls at least every 200 ms)
// never loses records; a power of two, >= 512 KiB. All of it counts in
// ember's RSS, twice (the kernel maps the data pages twice, so records can
// wrap).
uint32_t ring_bytes(int cpus, const KernelParts& parts) {
  uint64_t want = 0;
  for (const auto& part : parts) want = std::max(want, part->ring_bytes(cpus));
  uint64_t size = 512u << 10;
  while (size < want && size < (1u << 30)) size <<= 1;
  return static_cast<uint32_t>(size);
}

// Processes the unwinder holds tables for at once (entries of 8 KiB,
// allocated as processes are sampled; exited ones are removed).
constexpr uint32_t kUnwindProcesses = 16384;
// Before Linux 6.1 (bpf_mem_alloc) a perf_event program may use only
// preallocated hash maps ("perf_event programs can only use preallocated
// hash map", seen on 5.15), and tracing programs warn of run-time
// allocation. There the process table is preallocated, and smaller: 8 MiB.
constexpr uint32_t kUnwindProcessesPreallocated = 1024;

// Whether the running kernel is at least major.minor (uname's release).
bool kernel_at_least(int major, int minor) {
  utsname u{};
  int have_major = 0, have_minor = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &have_major, &have_minor) != 2) return true;
  return have_major > major || (have_major == major && have_minor >= minor);
}

// Whether the kernel can send a process's mappings as it exits: the
// open-coded VMA iterator (6.7+) and bpf_loop (5.17+).
bool kernel_has_exit_mappings() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  bool has = btf__find_by_name_kind(vmlinux, "bpf_iter_task_vma_new", BTF_KIND_FUNC) > 0 &&
             libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, nullptr) > 0;
  btf__free(vmlinux);
  return has;
}

// The size of a task's kernel stack, whose top holds the registers it
// entered the kernel with: THREAD_SIZE, 16 KiB on x86_64, twice that with
// KASAN (from the kernel's configuration, where it can be read).
uint32_t kernel_stack_size() {
  utsname u{};
  uname(&u);
  for (std::string path : {std::string("/boot/config-") + u.release, std::string("/proc/config.gz")}) {
    gzFile config = gzopen(path.c_str(), "rb");
    if (!config) continue;
    bool kasan = false;
    char line[256];
    while (!kasan && gzgets(config, line, sizeof line)) kasan = std::strncmp(line, "CONFIG_KASAN=y", 14) == 0;
    gzclose(config);
    return kasan ? 32768 : 16384;
  }
  return 16384;
}

// Puts the cgroup at `dir` in slot `slot` of `map` (the map holds the
// cgroup itself: the directory's descriptor is not kept).
std::expected<void, std::string> add_target_cgroup(bpf_map* map, uint32_t slot, const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::unexpected("cannot open the cgroup " + dir + ": " + errno_text(errno));
  int err = bpf_map__update_elem(map, &slot, sizeof slot, &fd, sizeof fd, BPF_ANY) ? errno : 0;
  close(fd);
  if (err) return std::unexpected("cannot add the cgroup " + dir + " to the targets: " + errno_text(err));
  return {};
}

}  // namespace

struct Sampler::State {
  std::unique_ptr<profile_bpf, void (*)(profile_bpf*)> skel{nullptr, profile_bpf::destroy};
  KernelParts parts;
  std::vector<bpf_link*> links;  // the sampler's own programs
  ring_buffer* ring = nullptr;
  SampleHandler handler;
  ExitHandler on_exit;
  size_t batch = 0;  // samples delivered by the current poll()
  // Owned by the sampler alone: what it hands out (the runtimes' generation
  // counter, in skel's memory) expires with it.
  std::shared_ptr<char> alive = std::make_shared<char>();

  ~State() {
    if (ring) ring_buffer__free(ring);
    for (const auto& part : parts) part->detach();
    for (bpf_link* l : links) bpf_link__destroy(l);
  }
};

namespace {

// Before the object loads: which programs load, their settings (rodata),
// the maps' sizes; the parts' own. Warnings for what this kernel lacks.
std::expected<void, std::string> prepare_object(profile_bpf& skel, const SamplerConfig& config, int ncpus,
                                                std::vector<std::string>& warnings) {
  // Every program is off, and the off-CPU tables (preallocated) unmade,
  // until a part asks for them.
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel.obj) bpf_program__set_autoload(prog, false);
  bpf_map__set_autocreate(skel.maps.offcpu_start, false);
  bpf_map__set_autocreate(skel.maps.waker_stacks, false);
  skel.rodata->filter_pids = config.filter_pids;
  skel.rodata->filter_tids = !config.tids.empty();
  skel.rodata->include_idle = config.include_idle;
  skel.rodata->follow_forks = config.follow_forks;
  uint32_t ring_size = ring_bytes(ncpus, config.parts);
  bpf_map__set_max_entries(skel.maps.samples, ring_size);
  skel.rodata->wakeup_bytes = ring_size / 4;
  skel.rodata->kernel_walk_bytes =
      std::clamp<uint32_t>(config.kernel_walk_frames, 1, EMBER_MAX_STACK_DEPTH) * sizeof(__u64);
  bpf_map__set_max_entries(skel.maps.target_pids, config.follow_forks ? 65536 : std::max<size_t>(config.pids.size(), 1));
  bpf_map__set_max_entries(skel.maps.target_tids, std::max<size_t>(config.tids.size(), 1));
  if (config.cgroup_dirs.size() > EMBER_MAX_CGROUPS)
    return std::unexpected("at most " + std::to_string(EMBER_MAX_CGROUPS) + " cgroups (--cgroup)");
  skel.rodata->target_cgroup_count = static_cast<uint32_t>(config.cgroup_dirs.size());
  bpf_map__set_max_entries(skel.maps.target_cgroups, std::max<size_t>(config.cgroup_dirs.size(), 1));
  bpf_program__set_autoload(skel.progs.ember_follow_fork, config.follow_forks);
  bpf_program__set_autoload(skel.progs.ember_forget_exit, config.follow_forks);
  // What older kernels lack, done another way (bpf/record.bpf.h).
  skel.rodata->task_by_reads =
      libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_current_task_btf, nullptr) <= 0 ||
      libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, nullptr) <= 0;
  if (skel.rodata->task_by_reads) skel.rodata->kernel_stack_size = kernel_stack_size();
  // ember's walker (with Python's and V8's frames) and its tables, unless --unwind fp.
  bool walker = config.unwind != UnwindMode::Fp;
  skel.rodata->unwind_mode = static_cast<uint32_t>(config.unwind);
  bpf_map__set_max_entries(skel.maps.unwind_rows,
                           walker ? std::max<uint64_t>(config.unwind_memory_bytes / sizeof(ember_unwind_row), 1) : 1);
  uint32_t processes = kUnwindProcesses;
  if (!kernel_at_least(6, 1)) {
    bpf_map__set_map_flags(skel.maps.unwind_processes,
                           bpf_map__map_flags(skel.maps.unwind_processes) & ~BPF_F_NO_PREALLOC);
    processes = kUnwindProcessesPreallocated;
    if (walker)
      warnings.push_back("this kernel (before 6.1) needs the unwinder's table of processes preallocated: " +
                         std::to_string(processes) +
                         " processes at most are unwound with their tables, others by frame pointers");
  }
  bpf_map__set_max_entries(skel.maps.unwind_processes, walker ? processes : 1);
  if (!walker) {  // Python's and V8's frames are the walker's
    bpf_map__set_max_entries(skel.maps.python_processes, 1);
    bpf_map__set_max_entries(skel.maps.python_threads, 1);
    bpf_map__set_max_entries(skel.maps.v8_processes, 1);
  }
  bpf_program__set_autoload(skel.progs.ember_unwind_exit, walker);
  bpf_program__set_autoload(skel.progs.ember_exit_mappings, kernel_has_exit_mappings());
  for (const auto& part : config.parts)
    if (auto ready = part->prepare(skel, warnings); !ready) return std::unexpected(ready.error());
  return {};
}

// The verifier's statistics log of each program, where the kernel does
// not count its work itself (before 5.16).
using VerifierLogs = std::map<const bpf_program*, std::string>;

// Loads the object. With `verbose`, the logs that will say how hard the
// verifier worked on each program (its limit is a million instructions
// processed), for reports of load failures to come: the kernel counts it
// from 5.16 (bpf_prog_info); before, only the statistics of its log
// (level 4, no instruction trace) say it.
std::expected<VerifierLogs, std::string> load_object(profile_bpf& skel, bool verbose) {
  VerifierLogs stats_logs;
  bpf_program* prog;
  if (verbose && !kernel_at_least(5, 16))
    bpf_object__for_each_program(prog, skel.obj) {
      if (!bpf_program__autoload(prog)) continue;
      std::string& log = stats_logs[prog];
      log.assign(64 << 10, '\0');
      bpf_program__set_log_buf(prog, log.data(), log.size());
      bpf_program__set_log_level(prog, 4);
    }
  if (int err = profile_bpf::load(&skel)) {
    // libbpf prints no log it was given a buffer for: the verifier's error.
    // (The logs of programs that passed hold their statistics only.)
    for (const auto& [program, log] : stats_logs)
      if (log[0] && !log.starts_with("verification time"))
        std::fprintf(stderr, "libbpf: prog '%s': the verifier's log:\n%s\n", bpf_program__name(program), log.c_str());
    return std::unexpected("cannot load the BPF program: " + errno_text(err) +
                           (verbose ? "" : " (run with -v for the verifier's log)"));
  }
  return stats_logs;
}

// -v: the instructions the verifier processed, per program loaded.
void print_verified(profile_bpf& skel, const VerifierLogs& stats_logs) {
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel.obj) {
    if (bpf_program__fd(prog) < 0) continue;
    unsigned insns = 0;
    if (auto log = stats_logs.find(prog); log != stats_logs.end()) {
      // "processed 4298 insns (limit 1000000) max_states_per_insn ..."
      if (size_t at = log->second.find("processed "); at != std::string::npos)
        std::sscanf(log->second.c_str() + at, "processed %u insns", &insns);
    } else {
      bpf_prog_info info{};
      uint32_t size = sizeof info;
      if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &size) == 0) insns = info.verified_insns;
    }
    std::fprintf(stderr, "ember: BPF program %s: %u instructions verified\n", bpf_program__name(prog), insns);
  }
}

// The target maps: pids, tids, cgroups.
std::expected<void, std::string> set_targets(profile_bpf& skel, const SamplerConfig& config) {
  uint8_t one = 1;
  for (uint32_t pid : config.pids)
    if (bpf_map__update_elem(skel.maps.target_pids, &pid, sizeof pid, &one, sizeof one, BPF_ANY))
      return std::unexpected("cannot add pid " + std::to_string(pid) + " to the targets: " + errno_text(errno));
  for (uint32_t tid : config.tids)
    if (bpf_map__update_elem(skel.maps.target_tids, &tid, sizeof tid, &one, sizeof one, BPF_ANY))
      return std::unexpected("cannot add tid " + std::to_string(tid) + " to the targets: " + errno_text(errno));
  for (uint32_t i = 0; i < config.cgroup_dirs.size(); ++i)
    if (auto added = add_target_cgroup(skel.maps.target_cgroups, i, config.cgroup_dirs[i]); !added)
      return std::unexpected(added.error());
  return {};
}

}  // namespace

std::expected<void, std::string> Sampler::attach_own() {
  profile_bpf& skel = *state_->skel;
  struct Own {
    bpf_program* program;
    const char* fails;  // what cannot be done without it
  };
  for (const Own& own : {Own{skel.progs.ember_follow_fork, "cannot follow child processes"},
                         Own{skel.progs.ember_forget_exit, "cannot follow child processes"},
                         Own{skel.progs.ember_unwind_exit, "cannot attach to sched_process_exit"},
                         Own{skel.progs.ember_exit_mappings, "cannot attach to sched_process_exit"}}) {
    if (!bpf_program__autoload(own.program)) continue;
    bpf_link* link = bpf_program__attach(own.program);
    if (!link) return std::unexpected(std::string(own.fails) + ": " + errno_text(errno));
    state_->links.push_back(link);
  }
  return {};
}

std::expected<void, std::string> Sampler::open_rings() {
  State& st = *state_;
  st.ring = ring_buffer__new(
      bpf_map__fd(st.skel->maps.samples),
      [](void* ctx, void* data, size_t) {
        auto* st = static_cast<State*>(ctx);
        st->handler(*static_cast<const ember_sample*>(data));
        // libbpf keeps consuming while samples keep coming: end the batch
        // so the caller gets to check its deadline and signals.
        return ++st->batch >= kMaxBatch ? -EAGAIN : 0;
      },
      &st, nullptr);
  if (!st.ring) return std::unexpected("cannot open the ring buffer: " + errno_text(errno));
  if (ring_buffer__add(st.ring, bpf_map__fd(st.skel->maps.exits),
                       [](void* ctx, void* data, size_t) {
                         static_cast<State*>(ctx)->on_exit(*static_cast<const ember_mapping*>(data));
                         return 0;
                       },
                       &st))
    return std::unexpected("cannot open the exits ring buffer: " + errno_text(errno));
  return {};
}

std::expected<std::unique_ptr<Sampler>, std::string> Sampler::start(const SamplerConfig& config,
                                                                     SampleHandler handler, ExitHandler on_exit) {
  g_verbose = config.verbose;
  libbpf_set_print(libbpf_print);
  std::unique_ptr<Sampler> sampler(new Sampler());
  sampler->state_ = std::make_unique<State>();
  State& st = *sampler->state_;
  st.handler = std::move(handler);
  st.on_exit = std::move(on_exit);
  st.parts = config.parts;
  sampler->unwind_ = config.unwind;

  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return std::unexpected("cannot count CPUs: " + errno_text(ncpus));
  st.skel.reset(profile_bpf::open());
  if (!st.skel) return std::unexpected("cannot open the BPF program: " + errno_text(errno));
  if (auto ok = prepare_object(*st.skel, config, ncpus, sampler->warnings_); !ok) return std::unexpected(ok.error());
  auto verifier_logs = load_object(*st.skel, config.verbose);
  if (!verifier_logs) return std::unexpected(verifier_logs.error());
  if (config.before_sampling && sampler->unwind_ != UnwindMode::Fp)
    if (auto ready = config.before_sampling(sampler->unwind_, sampler->unwind_maps()); !ready)
      return std::unexpected(ready.error());
  if (config.verbose) print_verified(*st.skel, *verifier_logs);
  if (auto ok = set_targets(*st.skel, config); !ok) return std::unexpected(ok.error());
  if (auto ok = sampler->attach_own(); !ok) return std::unexpected(ok.error());
  if (auto ok = sampler->open_rings(); !ok) return std::unexpected(ok.error());
  for (const auto& part : st.parts)
    if (auto attached = part->attach(*st.skel, sampler->warnings_); !attached)
      return std::unexpected(attached.error());
  sampler->cpus_ = std::max(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), 1);
  return sampler;
}

Sampler::~Sampler() { stop(); }

void Sampler::arm() { __atomic_store_n(&state_->skel->bss->armed, true, __ATOMIC_RELEASE); }

void Sampler::poll(int timeout_ms) {
  // Samples arrive without wakeups until a quarter of the ring is full (or
  // a new process shows up), so the timeout is the usual way out of the
  // wait: then take what is queued.
  state_->batch = 0;
  ring_buffer__poll(state_->ring, timeout_ms);
  if (state_->batch < kMaxBatch) ring_buffer__consume(state_->ring);
}

void Sampler::stop() {
  // Nothing after the stop counts, though the probes go one by one: with
  // --live, a block freed meanwhile was still live at the stop.
  __atomic_store_n(&state_->skel->bss->armed, false, __ATOMIC_RELEASE);
  for (const auto& part : state_->parts) part->detach();
  for (bpf_link* l : state_->links) bpf_link__destroy(l);
  state_->links.clear();
}

SamplerCounters Sampler::counters() const {
  SamplerCounters sum;
  sum.unwind_unsupported = state_->skel->bss->unwind_unsupported;
  sum.python_unread = state_->skel->bss->python_unread;
  sum.python_unplaced = state_->skel->bss->python_unplaced;
  std::vector<ember_counters> per_cpu(static_cast<size_t>(std::max(libbpf_num_possible_cpus(), 1)));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(state_->skel->maps.counters, &zero, sizeof zero, per_cpu.data(),
                           per_cpu.size() * sizeof(ember_counters), 0) != 0)
    return sum;
  for (const ember_counters& c : per_cpu) {
    sum.seen += c.samples_seen;
    sum.lost += c.samples_lost;
    sum.idle += c.samples_idle;
    sum.targets_full += c.targets_full;
    sum.mappings_lost += c.mappings_lost;
    sum.offcpu_untracked += c.offcpu_untracked;
    sum.offcpu_unseen_ends += c.offcpu_unseen_ends;
    sum.malloc_untracked += c.malloc_live_full;
    sum.waker_untracked += c.waker_untracked;
    sum.scratch_busy += c.scratch_busy;
  }
  return sum;
}

UnwindMaps Sampler::unwind_maps() const {
  profile_bpf* skel = state_->skel.get();
  return {bpf_map__fd(skel->maps.unwind_rows), bpf_map__max_entries(skel->maps.unwind_rows),
          bpf_map__fd(skel->maps.unwind_processes), bpf_map__fd(skel->maps.python_processes),
          bpf_map__fd(skel->maps.v8_processes), std::shared_ptr<uint32_t>(state_->alive, &skel->bss->runtimes_generation)};
}

std::vector<uint32_t> Sampler::live_allocations() const {
  std::vector<uint32_t> ids;
  int fd = bpf_map__fd(state_->skel->maps.live_allocs);
  ember_live_key key{};
  for (bool first = true; bpf_map_get_next_key(fd, first ? nullptr : &key, &key) == 0; first = false) {
    uint32_t id = 0;
    if (bpf_map_lookup_elem(fd, &key, &id) == 0) ids.push_back(id);
  }
  return ids;
}

void Sampler::forget_allocations(std::span<const uint32_t> pids) {
  if (pids.empty()) return;
  std::unordered_set<uint32_t> gone(pids.begin(), pids.end());
  int fd = bpf_map__fd(state_->skel->maps.live_allocs);
  std::vector<ember_live_key> keys;
  ember_live_key key{};
  for (bool first = true; bpf_map_get_next_key(fd, first ? nullptr : &key, &key) == 0; first = false)
    if (gone.count(key.pid)) keys.push_back(key);
  // Deleted after the walk: a deletion during it may restart it.
  for (const ember_live_key& k : keys) bpf_map_delete_elem(fd, &k);
}

std::unordered_map<uint32_t, uint64_t> Sampler::take_exits() {
  std::unordered_map<uint32_t, uint64_t> exits;
  int fd = bpf_map__fd(state_->skel->maps.live_exits);
  uint32_t pid = 0;
  for (bool first = true; bpf_map_get_next_key(fd, first ? nullptr : &pid, &pid) == 0; first = false) {
    uint64_t ns = 0;
    if (bpf_map_lookup_elem(fd, &pid, &ns) == 0) exits[pid] = ns;
  }
  // Deleted after the walk: a deletion during it may restart it.
  for (const auto& [p, ns] : exits) bpf_map_delete_elem(fd, &p);
  return exits;
}

}  // namespace ember
