#include "user/session/session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "user/java/java_attach.h"

namespace ember {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whether a thread of process `pid` has a name `comm` finds.
bool any_thread_matches(pid_t pid, const std::regex& comm) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "comm");
    std::string name;
    if (std::getline(in, name) && std::regex_search(name, comm)) return true;
  }
  return false;
}

SamplerCounters operator-(const SamplerCounters& a, const SamplerCounters& b) {
  SamplerCounters d;
  d.seen = a.seen - b.seen;
  d.lost = a.lost - b.lost;
  d.idle = a.idle - b.idle;
  d.targets_full = a.targets_full - b.targets_full;
  d.mappings_lost = a.mappings_lost - b.mappings_lost;
  d.offcpu_untracked = a.offcpu_untracked - b.offcpu_untracked;
  d.offcpu_unseen_ends = a.offcpu_unseen_ends - b.offcpu_unseen_ends;
  d.malloc_untracked = a.malloc_untracked - b.malloc_untracked;
  d.waker_untracked = a.waker_untracked - b.waker_untracked;
  d.unwind_unsupported = a.unwind_unsupported - b.unwind_unsupported;
  d.scratch_busy = a.scratch_busy - b.scratch_busy;
  return d;
}

symbolizer::Options symbol_options(const SessionConfig& c) {
  symbolizer::Options o;
  o.inlines = c.inlines;
  o.lines = c.lines;
  o.set_memory_bound(uint64_t(c.symbol_memory_mib) << 20);
  o.memory_knob = c.spelling == events::Spelling::Option ? "--symbol-memory" : "symbol_memory";
  return o;
}

}  // namespace

std::expected<std::unique_ptr<Session>, std::string> Session::create(SessionConfig config,
                                                                     std::vector<std::string>& warnings) {
  std::optional<std::regex> comm;
  if (!config.comm.empty()) {
    try {
      comm.emplace(config.comm, std::regex::extended);
    } catch (const std::regex_error& e) {
      return std::unexpected("--comm '" + config.comm + "' is not a valid regular expression: " + e.what());
    }
  }
  auto cgroups = resolve_cgroups(config.cgroups);
  if (!cgroups) return std::unexpected(cgroups.error());
  events::Scope scope;
  scope.pids = config.pids;
  for (pid_t pid : processes_in_cgroups(*cgroups)) scope.members.push_back(static_cast<uint32_t>(pid));
  for (uint32_t tid : config.tids) scope.pids.push_back(static_cast<uint32_t>(thread_group_of(tid)));
  if (!config.command.empty()) scope.command = find_command(config.command[0]);
  scope.java = config.java;
  HostFacts host = read_host_facts();
  auto plan = events::plan(config.events, config.settings, scope, host, warnings, config.spelling);
  if (!plan) return std::unexpected(plan.error());
  if (auto ok = check_can_record(host); !ok) return std::unexpected(ok.error());
  return std::unique_ptr<Session>(
      new Session(std::move(config), std::move(*plan), host, std::move(comm), std::move(*cgroups)));
}

Session::Session(SessionConfig config, events::Plan plan, HostFacts host, std::optional<std::regex> comm,
                 std::vector<CgroupTarget> cgroups)
    : config_(std::move(config)),
      plan_(std::move(plan)),
      host_(host),
      cgroups_(std::move(cgroups)),
      collector_opts_{.views = plan_.views,
                      .thread_frames = config_.thread_frames,
                      .pid_frames = config_.pid_frames,
                      .kernel_only = config_.kernel_only,
                      .user_only = config_.user_only,
                      .comm = std::move(comm),
                      .before_exec_name = kBeforeExecName,
                      .max_depth = std::min<uint32_t>(host.max_stack, EMBER_MAX_STACK_DEPTH),
                      .java_events = std::any_of(plan_.events.begin(), plan_.events.end(),
                                                 [](const events::Event* e) { return e->java_profile.has_value(); })},
      symbolizer_(symbol_options(config_)),
      collector_(collector_opts_, symbolizer_) {
  if (!config_.java) return;
  std::string agent = default_agent_path();
  if (access(agent.c_str(), R_OK) == 0)
    java_.emplace(agent, plan_.agent_options, config_.unwind != "fp",
                  static_cast<int>(config_.java_attach_timeout_s * 1000),
                  config_.spelling == events::Spelling::Option ? "--attach-timeout" : "java.attach_timeout",
                  "its Java frames will be unnamed");
  else
    warnings_.push_back("no Java agent at " + agent +
                             ": Java frames will be unnamed; build it with `make` (needs "
                             "openjdk-17-jdk-headless), or " +
                             (config_.spelling == events::Spelling::Option ? "pass --no-java"
                                                                            : "set java.attach = false") +
                             " to silence this");
}

Session::~Session() { close(); }

void Session::close() {
  sampler_.reset();
  if (java_) java_->detach();
  collector_.close_streams();
}

std::expected<std::vector<std::string>, std::string> Session::command_env() {
  if (!java_) return std::vector<std::string>{};
  const char* existing = getenv("JAVA_TOOL_OPTIONS");
  auto options = java_->tool_options(existing ? existing : "", config_.java_frame_pointers || config_.unwind == "fp");
  if (!options) return std::unexpected("cannot prepare the Java agent for the command: " + options.error());
  return std::vector<std::string>{"JAVA_TOOL_OPTIONS=" + *options};
}

std::expected<void, std::string> Session::start(const std::function<bool()>& stopping) {
  if (!config_.command.empty()) {
    auto env = command_env();
    if (!env) return std::unexpected(env.error());
    auto spawned = HeldCommand::spawn(config_.command, *env);
    if (!spawned) return std::unexpected("cannot start the command: " + spawned.error());
    command_.emplace(std::move(*spawned));
  }
  auto started = start_sampling(stopping);
  if (!started) command_.reset();  // it exits unrun
  return started;
}

std::expected<void, std::string> Session::start_sampling(const std::function<bool()>& stopping) {
  SamplerConfig config;
  config.parts = plan_.parts;
  config.kernel_walk_frames = std::min<uint32_t>(host_.max_stack, EMBER_MAX_STACK_DEPTH);
  config.unwind = config_.unwind == "fp"    ? UnwindMode::Fp
                  : config_.unwind == "cfi" ? UnwindMode::Cfi
                                            : UnwindMode::Auto;
  config.unwind_memory_bytes = uint64_t(config_.unwind_memory_mib) << 20;
  config.include_idle = config_.idle;
  config.verbose = config_.verbose;
  config.tids = config_.tids;
  for (const CgroupTarget& c : cgroups_) config.cgroup_dirs.push_back(c.dir);
  if (command_) {
    config.pids = {static_cast<uint32_t>(command_->pid())};
    config.filter_pids = config.follow_forks = true;
  } else if (!config_.pids.empty()) {
    config.pids = config_.pids;
    config.filter_pids = true;
  }
  // Each process's tables go to the kernel as its mappings are read (at
  // its first sample); the named targets' before the first sample.
  config.before_sampling = [&](UnwindMode mode, const UnwindMaps& maps) -> std::expected<void, std::string> {
    auto u = Unwinder::open(maps, static_cast<uint32_t>(mode));
    if (!u) return std::unexpected(u.error());
    unwinder_ = std::move(*u);
    collector_.on_copied_stack([this](uint32_t pid, std::span<const __u64> copy, __u64* out) {
      return unwinder_->unwind_copy(pid, copy, out);
    });
    collector_.on_jit_code([this](uint32_t pid, const std::vector<symbolizer::JitMap::Code>& code) {
      unwinder_->set_jit_code(pid, code);
    });
    python_.emplace(runtimes::ProcessTable(maps.python_processes_fd, maps.runtimes_generation), config_.lines);
    v8_.emplace(runtimes::ProcessTable(maps.v8_processes_fd, maps.runtimes_generation), config_.lines);
    // A process whose mappings were just read: its tables, its runtimes.
    auto take_process = [this](uint32_t pid) {
      if (unwinder_) unwinder_->add_process(pid, symbolizer_.mapped_files(pid));
      python_->add_process(pid);
      v8_->add_process(pid);
    };
    collector_.on_snapshot(take_process);
    collector_.on_python_frame([this](uint32_t pid, uint64_t word, uint64_t) {
      std::optional<flamegraph::Frame> frame = python_->frame(pid, word);
      return frame ? std::vector<flamegraph::Frame>{std::move(*frame)} : std::vector<flamegraph::Frame>{};
    });
    collector_.on_v8_frame(
        [this](uint32_t pid, uint64_t word, uint64_t position) { return v8_->frames(pid, word, position); });
    for (uint32_t pid : config_.pids)
      if (symbolizer_.snapshot_process(pid)) take_process(pid);
    return {};
  };
  auto sampler = Sampler::start(
      config,
      [this](const ember_sample& s) {
        collector_.add(s);
        if (!cgroups_.empty()) cgroup_tally_.add(s.cgroup_id);
      },
      [this](const ember_mapping& m) { collector_.add_exit_mapping(m); });
  if (!sampler) return std::unexpected(sampler.error());
  sampler_ = std::move(*sampler);
  cpus_ = sampler_->cpus();
  // Kallsyms read after the programs load: it then names them too.
  if (!config_.user_only) symbolizer_.prefetch_kernel();
  // Agents only once the kernel took every probe: an agent cannot be
  // unloaded, so none goes into a JVM for a session that fails to start.
  if (java_) {
    std::vector<pid_t> jvms;
    whole_host_ = config_.java_attach.empty() && config_.pids.empty() && config_.tids.empty() && !command_;
    if (!config_.java_attach.empty())
      jvms.assign(config_.java_attach.begin(), config_.java_attach.end());
    else if (!config_.pids.empty())
      jvms.assign(config_.pids.begin(), config_.pids.end());
    else if (!config_.tids.empty())
      for (uint32_t tid : config_.tids) jvms.push_back(thread_group_of(tid));
    else if (whole_host_)
      jvms = jvm_scanner_.scan();
    if (config_.java_attach.empty()) jvms = jvms_in_scope(std::move(jvms));
    next_jvm_scan_s_ = now_s() + 2;
    read_agents(java_->attach(jvms, !config_.java_attach.empty(), stopping));
    // Java events need a JVM: say so for each named target that is not one.
    bool java_alloc = std::any_of(plan_.events.begin(), plan_.events.end(), [](const events::Event* e) {
      return e->java_profile == JavaProfileKind::AllocBytes;
    });
    if (java_alloc)
      for (uint32_t pid : config_.pids)
        if (!java::inspect_jvm(static_cast<pid_t>(pid)))
          warnings_.push_back("process " + std::to_string(pid) +
                                   " is not a HotSpot JVM: -e alloc sees Java allocations only (for C/C++ code: "
                                   "-e malloc)");
  }
  return {};
}

std::expected<void, std::string> Session::arm() {
  // The code the agents replayed as they attached: its frames reach the
  // unwinder before the first record.
  collector_.update_jvms(false);
  sampler_->arm();
  window_start_s_ = start_s_ = now_s();
  window_start_unix_ns_ = start_unix_ns_ = unix_ns();
  window_counters_ = {};
  if (command_) return command_->release();
  return {};
}

std::vector<pid_t> Session::jvms_in_scope(std::vector<pid_t> jvms) const {
  // --comm and --cgroup narrow the scope (not --java-attach's): a JVM none
  // of whose threads --comm names, or outside the cgroups, is out of it.
  if (collector_opts_.comm)
    std::erase_if(jvms, [&](pid_t pid) { return !any_thread_matches(pid, *collector_opts_.comm); });
  if (!cgroups_.empty()) std::erase_if(jvms, [&](pid_t pid) { return !process_in_cgroups(pid, cgroups_); });
  if (config_.java_allowed) std::erase_if(jvms, [&](pid_t pid) { return !config_.java_allowed(pid); });
  return jvms;
}

void Session::attach_late_jvms() {
  double now = now_s();
  if (now < next_jvm_scan_s_) return;
  next_jvm_scan_s_ = now + 2;
  std::vector<pid_t> jvms = jvms_in_scope(jvm_scanner_.scan());
  if (!jvms.empty()) java_->attach_later(jvms);
}

void Session::poll(int timeout_ms) {
  sampler_->poll(timeout_ms);
  // Only a command starts JVMs with the agent already in (tool_options).
  if (java_ && command_) read_agents(java_->find_started(collector_.jvm_pids()));
  if (java_ && whole_host_) {
    attach_late_jvms();
    read_agents(java_->take_attached());
  }
  collector_.update_jvms(false);
  collector_.take_in_copies(false);
  if (double now = now_s(); config_.jvm_telemetry && now >= next_watch_s_) {
    next_watch_s_ = now + kWatchEveryS;
    watch_jvms();
  }
  if (double now = now_s(); config_.name_while_recording && now >= next_naming_s_) {
    next_naming_s_ = now + kNamingEveryS;
    collector_.name_addresses(std::chrono::steady_clock::now() + kNamingPass);
  }
}

void Session::read_agents(std::vector<JavaSession::Agent> agents) {
  for (JavaSession::Agent& a : agents)
    collector_.watch_jvm(static_cast<uint32_t>(a.pid), a.fd, std::move(a.name), std::move(a.files), a.frame_pointers);
}

void Session::watch_jvms() {
  std::vector<uint32_t> jvms = collector_.jvm_pids();
  double now = now_s();
  for (uint32_t pid : jvms) {
    auto [it, added] = jvm_watches_.try_emplace(pid);
    Watched& w = it->second;
    if (added) w.give_up_s = now + kHsperfWaitS;
    if (w.watch || w.ended_order || now < w.next_try_s || now >= w.give_up_s) continue;
    w.next_try_s = now + kHsperfRetryS;
    // Not waiting: a later poll tries again.
    if (auto started = JvmWatch::start(static_cast<pid_t>(pid), 0)) w.watch = std::move(*started);
  }
  // A JVM's file reads on after it exits (mapped, deleted): it ends when
  // the collector forgets the JVM too.
  auto known = [&](uint32_t pid) { return std::find(jvms.begin(), jvms.end(), pid) != jvms.end(); };
  for (auto& [pid, w] : jvm_watches_)
    if (w.watch && (!known(pid) || !w.watch->poll())) {
      w.ended_summary = w.watch->summary();
      w.ended_order = ++jvms_ended_;
      w.watch.reset();
    }
  // JVMs gone: those without a summary at once, the others once
  // kEndedJvmsKept more have ended.
  std::erase_if(jvm_watches_, [&](const auto& entry) {
    const Watched& w = entry.second;
    if (w.watch) return false;
    if (w.ended_order) return w.ended_order + kEndedJvmsKept <= jvms_ended_;
    return !known(entry.first);
  });
}

Window Session::cut(bool final, const StackSink& each_stack) {
  Window window;
  // The next window starts now: what arrives while this one is built is its.
  double cut_s = now_s();
  uint64_t cut_unix_ns = unix_ns();
  window.seconds = cut_s - window_start_s_;
  window.start_unix_ns = window_start_unix_ns_;
  // steady_clock is CLOCK_MONOTONIC, the records' clock (bpf_ktime_get_ns).
  auto to_ns = [](double s) { return static_cast<uint64_t>(s * 1e9); };
  // The allocations' ages are taken at the cut.
  uint64_t cut_ns = to_ns(cut_s);
  if (final && !stopped_) {
    // At the stop: detaching the probes after it took a second of a busy
    // machine.
    sampler_->stop();
    sampler_->poll(0);  // what was queued before the stop
    stopped_ = true;
  }
  SamplerCounters counters = sampler_->counters();
  window.counters = counters - window_counters_;
  window_counters_ = counters;
  bool live = config_.settings.live;
  if (live) collector_.count_live_allocations(sampler_->live_allocations(), cut_ns, sampler_->take_exits());
  if (final) {
    sampler_.reset();
    // Detach first: with --live, the agents' last full GC reports the frees.
    if (java_) {
      if (command_) read_agents(java_->find_started(collector_.jvm_pids()));
      read_agents(java_->take_attached());
      java_->detach();
    }
  }
  collector_.update_jvms(final);
  collector_.take_in_copies(final);
  collector_.refresh_processes();

  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", window.seconds);
  events::Resolved resolved = plan_.resolved(config_.settings);
  for (size_t v = 0; v < plan_.views.size(); ++v) {
    const events::Event* event = plan_.events[v];
    const EventView& view = plan_.views[v];
    Collector::StackSink sink;
    if (each_stack)
      sink = [&](uint32_t pid, const std::string& name, const flamegraph::Profile& p,
                 std::span<const flamegraph::FrameId> frames, uint64_t weight) {
        each_stack(v, pid, name, p, frames, weight);
      };
    // A live graph is of the allocations since the recording's start
    // still live at the cut: its timeline is the recording's so far.
    double start_s = view.live_only ? start_s_ : window_start_s_;
    flamegraph::Profile profile = collector_.build(v, sink, to_ns(start_s));
    profile.start_unix_ns = view.live_only ? start_unix_ns_ : window.start_unix_ns;
    profile.duration_ns = to_ns(cut_s - start_s);
    CollectorStats stats = collector_.stats();
    // Java allocations and monitor contention come from the agents.
    std::string jvms;  // which JVMs they came from: `ember jvm --alloc` checks it is theirs
    if (event->java_profile) {
      JavaProfileOptions jopts{.live_only = view.live_only,
                               .thread_frames = config_.thread_frames,
                               .pid_frames = config_.pid_frames,
                               .name_native = java_native_namer(symbolizer_),
                               .min_age_ns = view.min_age_ns,
                               .min_gcs = view.min_gcs,
                               .end_ns = cut_ns,
                               .start_ns = to_ns(start_s)};
      bool untimed = false;  // a JVM's weights without times: a timeline would miss them
      for (const Collector::JavaStream& j : collector_.java_streams()) {
        if (!jvms.empty()) jvms += ", ";
        jvms += jvms_note_entry(j.pid, j.started);
        // Built per JVM, so each stack is known to be its process's.
        flamegraph::Profile jvm;
        add_java_profile(*j.events, *event->java_profile, {j.pid, j.name}, jopts, jvm);
        // The agents count these without times, but the live objects' allocations.
        untimed = untimed || (!jvm.stacks().empty() && jvm.timeline.empty());
        std::vector<uint32_t> stack_in_profile;
        for (const flamegraph::Stack& s : jvm.stacks()) {
          stack_in_profile.push_back(profile.add_from(jvm, s.frames, s.weight));
          if (each_stack) each_stack(v, j.pid, j.name, jvm, s.frames, s.weight);
        }
        if (!untimed)
          for (const flamegraph::Timed& t : jvm.timeline)
            profile.timeline.push_back({t.time_ns - (profile.time_step_ns ? t.time_ns % profile.time_step_ns : 0),
                                        t.weight, stack_in_profile[t.stack]});
        // What the agent could not follow or lost: in the graph and the summary.
        for (auto& [key, value] : java_profile_info(*j.events, *event->java_profile, jopts))
          window.java_notes.push_back("JVM " + std::to_string(j.pid) + " " + view.name + ": " + key + " " + value);
      }
      if (untimed) profile.timeline.clear();
      std::stable_sort(profile.timeline.begin(), profile.timeline.end(),
                       [](const flamegraph::Timed& a, const flamegraph::Timed& b) { return a.time_ns < b.time_ns; });
    }
    profile.info = {{"samples", std::to_string(stats.samples)},
                    {"lost", std::to_string(window.counters.lost)},
                    {"truncated", std::to_string(stats.truncated)},
                    {"unknown addresses", std::to_string(stats.unknown_addresses)},
                    {"duration", std::string(secs) + " s"},
                    {"cpus", std::to_string(cpus_)},
                    {"host", host_name()}};
    if (event->info) {
      auto extra = event->info(resolved);
      profile.info.insert(profile.info.begin() + 5, extra.begin(), extra.end());
    }
    if (!jvms.empty()) profile.info.emplace_back("jvms", jvms);
    if (view.unit == "samples") profile.period_ns = 1'000'000'000ull / config_.settings.frequency;
    window.graphs.push_back({event, view, std::move(profile), stats});
  }
  window.unwind_tallies = collector_.unwind_tallies();
  for (std::string& warning : symbolizer_.take_warnings()) {
    if (told_warnings_.size() >= kToldWarnings) told_warnings_.clear();
    if (told_warnings_.insert(std::hash<std::string>{}(warning)).second)
      window.symbol_warnings.push_back(std::move(warning));
  }
  window.cgroups = std::exchange(cgroup_tally_, {});
  // Nothing comes after the last window: what it holds goes with the
  // session (clearing it took 0.1 s of a whole host's 30 s).
  if (final) return window;
  window.forgotten = collector_.next_window();
  if (live) sampler_->forget_allocations(window.forgotten);
  for (uint32_t pid : window.forgotten) {
    symbolizer_.forget_process(pid);
    if (unwinder_) unwinder_->remove_process(pid);
    if (python_) python_->remove_process(pid);
    if (v8_) v8_->remove_process(pid);
  }
  symbolizer_.end_window();
  if (python_) python_->next_window();
  if (v8_) v8_->next_window();
  window_start_s_ = cut_s;
  window_start_unix_ns_ = cut_unix_ns;
  return window;
}

std::vector<std::string> Session::warnings() const {
  std::vector<std::string> all = warnings_;
  if (sampler_) all.insert(all.end(), sampler_->warnings().begin(), sampler_->warnings().end());
  return all;
}


std::vector<std::pair<uint32_t, std::string>> Session::jvm_summaries() const {
  std::vector<std::pair<uint32_t, std::string>> out;
  for (const auto& [pid, w] : jvm_watches_)
    if (w.watch || !w.ended_summary.empty()) out.emplace_back(pid, w.watch ? w.watch->summary() : w.ended_summary);
  return out;
}

}  // namespace ember
