#include "user/collector.h"

#include <fcntl.h>
#include <glob.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <unordered_set>

namespace ember {

using flamegraph::Frame;
using flamegraph::FrameId;
using flamegraph::FrameKind;

namespace {

// Return addresses point after the call; naming the call itself needs -1.
// The leaf is the interrupted instruction and stays as it is.
uint64_t lookup_address(std::span<const uint64_t> ips, size_t i) { return i == 0 ? ips[i] : ips[i] - 1; }

constexpr uint64_t kJitToken = uint64_t{1} << 63;
bool is_jit_token(uint64_t ip) { return ip & kJitToken; }

// The token for the pseudo-frame that ends a stack cut at a JIT frame.
constexpr uint32_t kBrokenChainToken = 0;

// JVM samples wait this long for the agent to publish their code.
constexpr uint64_t kJitSettleNs = 300'000'000;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

}  // namespace

size_t Collector::KeyHash::operator()(const Key& k) const {
  uint64_t h = 0;
  for (uint32_t v : {k.view, k.offcpu, k.pid, k.tid, k.process_name, k.thread_name, k.ustack, k.kstack})
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

uint32_t Collector::name_id(const char (&comm)[EMBER_COMM_LEN]) {
  std::string_view name(comm, strnlen(comm, EMBER_COMM_LEN));
  if (auto it = name_ids_.find(name); it != name_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(names_.size());
  name_ids_.emplace(name, id);
  names_.emplace_back(name);
  comm_matches_.push_back(options_.comm ? std::regex_search(names_.back(), *options_.comm) : 1);
  return id;
}

size_t Collector::StackTable::Hash::operator()(Ips ips) const {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the addresses
  for (uint64_t ip : ips) h = (h ^ ip) * 1099511628211ULL;
  return static_cast<size_t>(h ^ (h >> 32));
}

uint32_t Collector::StackTable::intern(Ips key) {
  if (auto it = ids_.find(key); it != ids_.end()) return *it;
  uint32_t id = static_cast<uint32_t>(spans_.size());
  spans_.emplace_back(arena_.size(), key.size());
  arena_.insert(arena_.end(), key.begin(), key.end());
  ids_.insert(id);
  return id;
}

Collector::Collector(CollectorOptions options, symbolizer::Symbolizer& symbolizer)
    : options_(std::move(options)), symbolizer_(symbolizer) {
  jit_frames_.push_back({Frame{"[JIT frames without frame pointers: restart the JVM with -XX:+PreserveFramePointer]",
                               FrameKind::Unknown, {}}});
}

Collector::Jvm::~Jvm() {
  if (fd >= 0) close(fd);
}

size_t Collector::LocationHash::operator()(const symbolizer::JitMap::Location& l) const {
  return std::hash<uint64_t>{}((l.start * 0x9e3779b97f4a7c15ULL) ^ l.load_ns ^ (uint64_t{l.pc} << 40));
}

void Collector::watch_jvm(uint32_t pid, std::string jitmap_path, bool frame_pointers) {
  Jvm& jvm = jvms_[pid];
  jvm.path = std::move(jitmap_path);
  jvm.frame_pointers = frame_pointers;
}

void Collector::expect_jvms(std::string pattern, bool frame_pointers) {
  expected_jvm_maps_ = std::move(pattern);
  expected_frame_pointers_ = frame_pointers;
}

void Collector::update_jvms(bool final) {
  uint64_t now = monotonic_ns();
  uint64_t settled = final ? UINT64_MAX : now - kJitSettleNs;
  // JVMs the command started: their agents' maps appear as they start (a
  // JVM that allocates but never runs on a sampled CPU is found too).
  if (!expected_jvm_maps_.empty()) {
    std::string pattern = expected_jvm_maps_;
    pattern.replace(pattern.find("{pid}"), 5, "*");
    size_t pid_at = expected_jvm_maps_.find("{pid}");
    glob_t found{};
    if (glob(pattern.c_str(), 0, nullptr, &found) == 0)
      for (size_t i = 0; i < found.gl_pathc; ++i) {
        std::string path = found.gl_pathv[i];
        uint32_t pid = static_cast<uint32_t>(std::strtoul(path.c_str() + pid_at, nullptr, 10));
        if (pid && !jvms_.count(pid)) watch_jvm(pid, path, expected_frame_pointers_);
      }
    globfree(&found);
  }
  char buf[1 << 16];
  for (auto& [pid, jvm] : jvms_) {
    if (jvm.fd < 0) jvm.fd = open(jvm.path.c_str(), O_RDONLY | O_CLOEXEC);  // the agent may not have made it yet
    ssize_t n;
    while (jvm.fd >= 0 && (n = read(jvm.fd, buf, sizeof buf)) > 0) {
      jvm.map.feed(std::string_view(buf, static_cast<size_t>(n)));
      jvm.events.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
    while (!jvm.held.empty()) {
      const auto& s = *reinterpret_cast<const ember_sample*>(jvm.held.front().data());
      if (s.time_ns > settled) break;
      add_jvm_sample(jvm, s);
      jvm.held.pop_front();
    }
  }
}

uint32_t Collector::jit_token(Jvm& jvm, const symbolizer::JitMap::Location& at) {
  auto [it, inserted] = jvm.tokens.try_emplace(at, static_cast<uint32_t>(jit_frames_.size()));
  if (inserted) jit_frames_.push_back(jvm.map.frames(at));
  return it->second;
}

void Collector::add_jvm_sample(Jvm& jvm, const ember_sample& s) {
  uint64_t ustack[EMBER_MAX_STACK_DEPTH];
  size_t n = 0;
  for (size_t i = 0; i < s.ustack_len; ++i) {
    if (is_jit_token(s.ips[i])) break;  // garbage from a stray walk, as in add()
    uint64_t address = i == 0 ? s.ips[i] : s.ips[i] - 1;
    auto at = jvm.map.locate(address, s.time_ns);
    if (!at) {
      ustack[n++] = s.ips[i];
      continue;
    }
    ustack[n++] = kJitToken | jit_token(jvm, at);
    ++stats_.jit_frames;
    // Compiled Java code uses the frame pointer as a general register
    // unless asked not to: whatever the walk found above it is garbage.
    if (at.compiled && !jvm.frame_pointers) {
      ustack[n++] = kJitToken | kBrokenChainToken;
      ++stats_.broken_java_stacks;
      break;
    }
  }
  add_resolved(s, std::span(ustack, n));
}

void Collector::add(const ember_sample& s) {
  if (auto jvm = jvms_.find(s.pid); jvm != jvms_.end()) {
    auto bytes = reinterpret_cast<const uint8_t*>(&s);
    jvm->second.held.emplace_back(bytes, bytes + EMBER_SAMPLE_HEADER_SIZE + (s.ustack_len + s.kstack_len) * sizeof(__u64));
    return;
  }
  uint64_t ustack[EMBER_MAX_STACK_DEPTH];
  size_t n = 0;
  // A frame-pointer walk that strays into garbage can return a "user"
  // address in the kernel half; nothing past it is a frame (and the top bit
  // is the JIT-token bit).
  while (n < s.ustack_len && !is_jit_token(s.ips[n])) {
    ustack[n] = s.ips[n];
    ++n;
  }
  add_resolved(s, std::span(ustack, n));
}

void Collector::add_resolved(const ember_sample& s, std::span<const uint64_t> ustack) {
  uint32_t process = name_id(s.process_comm), thread = name_id(s.comm);
  if (!comm_matches_[process] && !comm_matches_[thread]) {
    ++stats_.comm_filtered;
    return;
  }
  if (s.ustack_len >= options_.max_depth || s.kstack_len >= options_.max_depth) ++stats_.truncated;

  uint64_t kstack[EMBER_MAX_STACK_DEPTH];
  std::memcpy(kstack, s.ips + s.ustack_len, s.kstack_len * sizeof(uint64_t));
  Key key{0, s.kind != EMBER_KIND_CPU, s.pid, s.tid, process, thread, ustacks_.intern(ustack), kstacks_.intern(std::span(kstack, s.kstack_len))};
  for (uint32_t v = 0; v < options_.views.size(); ++v) {
    const EventView& view = options_.views[v];
    if (!(view.kinds & (1u << s.kind))) continue;
    if (s.kind == EMBER_KIND_BLOCKED && s.weight < view.min_blocked_ns) continue;
    key.view = v;
    if (view.live_only) {
      held_allocations_.push_back({key, s.weight, s.pad});
      continue;
    }
    Weight& w = counts_[key];
    w.total += s.kind == EMBER_KIND_CPU ? view.cpu_weight : s.weight;
    ++w.records;
  }
  // Snapshot mappings now, while the process surely lives; again when its
  // name changes (an exec maps a new image) or a frame lies outside what
  // was mapped (a library loaded since), at most every 100 ms.
  auto [it, first] = process_name_.try_emplace(s.pid, process);
  if (s.pid != 0 && !ustack.empty()) {
    bool renamed = first || it->second != process;
    uint64_t& last = last_snapshot_[s.pid];
    bool unmapped = s.time_ns >= last + 100'000'000 &&
                    std::any_of(ustack.begin(), ustack.end(),
                                [&](uint64_t ip) { return !is_jit_token(ip) && !symbolizer_.maps(s.pid, ip); });
    if (renamed || unmapped) {
      symbolizer_.snapshot_process(s.pid);
      last = s.time_ns;
    }
  }
  it->second = process;
}

std::vector<uint32_t> Collector::jvm_pids() const {
  std::vector<uint32_t> pids;
  for (const auto& [pid, jvm] : jvms_) pids.push_back(pid);
  return pids;
}

std::vector<Collector::JavaStream> Collector::java_streams() const {
  std::vector<JavaStream> out;
  for (const auto& [pid, jvm] : jvms_) {
    auto name = process_name_.find(pid);
    out.push_back({pid, name == process_name_.end() ? "java" : names_[name->second], &jvm.events});
  }
  return out;
}

void Collector::keep_live_allocations(const std::vector<uint32_t>& ids) {
  std::unordered_set<uint32_t> live(ids.begin(), ids.end());
  for (const HeldAllocation& a : held_allocations_)
    if (live.count(a.id)) {
      Weight& w = counts_[a.key];
      w.total += a.bytes;
      ++w.records;
    }
  held_allocations_.clear();
}

void Collector::refresh_processes() {
  for (const auto& [pid, name] : process_name_)
    if (symbolizer_.has_process(pid)) symbolizer_.snapshot_process(pid);
}

void Collector::add_exit_mapping(const ember_mapping& m) {
  symbolizer::Mapping mapping;
  mapping.start = m.start;
  mapping.end = m.end;
  mapping.offset = m.offset;
  mapping.dev = m.dev;
  mapping.inode = m.inode;
  mapping.executable = true;
  for (uint32_t i = std::min<uint32_t>(m.path_parts, EMBER_PATH_PARTS); i-- > 0;)
    mapping.path += "/" + std::string(m.path[i], strnlen(m.path[i], EMBER_PATH_PART_LEN));
  symbolizer_.add_mapping(m.pid, std::move(mapping));
  exited_.insert(m.pid);
}

flamegraph::Profile Collector::build(size_t view) {
  flamegraph::Profile profile;
  profile.event = options_.views[view].name;
  profile.unit = options_.views[view].unit;
  stats_.samples = stats_.unknown_addresses = stats_.unknown_samples = 0;

  // Name every distinct address once: user addresses per process, kernel
  // addresses for all. An address can stand for several frames (inlined calls).
  struct Named {
    uint32_t first, count;  // into named_frames
    bool known;
  };
  std::vector<FrameId> named_frames;
  std::unordered_map<uint64_t, Named> kernel_names;
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, Named>> user_names;
  {
    std::unordered_map<uint32_t, std::unordered_set<uint64_t>> user_addrs;
    std::unordered_set<uint64_t> kernel_addrs;
    for (const auto& [key, count] : counts_) {
      if (key.view != view) continue;
      auto u = ustacks_.get(key.ustack), k = kstacks_.get(key.kstack);
      if (!options_.kernel_only)
        for (size_t i = 0; i < u.size(); ++i)
          if (!is_jit_token(u[i])) user_addrs[key.pid].insert(lookup_address(u, i));
      if (!options_.user_only)
        for (size_t i = 0; i < k.size(); ++i) kernel_addrs.insert(lookup_address(k, i));
    }
    auto name_all = [&](const std::unordered_set<uint64_t>& set, auto&& symbolize,
                        std::unordered_map<uint64_t, Named>& out) {
      std::vector<uint64_t> addrs(set.begin(), set.end());
      std::vector<symbolizer::Symbol> symbols = symbolize(addrs);
      for (size_t i = 0; i < addrs.size(); ++i) {
        Named n{static_cast<uint32_t>(named_frames.size()), static_cast<uint32_t>(symbols[i].frames.size()),
                symbols[i].known()};
        for (const Frame& f : symbols[i].frames) named_frames.push_back(profile.intern(f));
        out[addrs[i]] = n;
        if (!n.known) ++stats_.unknown_addresses;
      }
    };
    name_all(kernel_addrs, [&](std::span<const uint64_t> a) { return symbolizer_.symbolize_kernel(a); },
             kernel_names);
    for (const auto& [pid, set] : user_addrs)
      name_all(set, [&, pid = pid](std::span<const uint64_t> a) { return symbolizer_.symbolize_user(pid, a); },
               user_names[pid]);
  }

  std::vector<FrameId> frames;
  for (const auto& [key, count] : counts_) {
    if (key.view != view) continue;
    frames.clear();
    bool unknown = false;
    const std::string& process = names_[key.process_name];
    std::string root = options_.pid_frames ? process + " (" + std::to_string(key.pid) + ")" : process;
    frames.push_back(profile.intern(Frame{root, FrameKind::Process, {}}));
    if (options_.thread_frames)
      frames.push_back(profile.intern(
          Frame{"[" + names_[key.thread_name] + " tid=" + std::to_string(key.tid) + "]", FrameKind::Thread, {}}));
    // Kernel addresses have the top bit set too: tokens live in user stacks only.
    auto append = [&](std::span<const uint64_t> ips, const std::unordered_map<uint64_t, Named>& names, bool user) {
      // An off-CPU stack is taken inside the BPF program on sched_switch:
      // its own frames (and the tracepoint's runner) above __schedule are
      // ember's, not the thread's.
      size_t leaf = 0;
      for (size_t i = 0; !user && key.offcpu && i < std::min<size_t>(ips.size(), 4); ++i) {
        const Named& n = names.at(lookup_address(ips, i));
        if (profile.frames()[named_frames[n.first]].name.starts_with("bpf_trace_run")) leaf = i + 1;
      }
      for (size_t i = ips.size(); i-- > leaf;) {
        if (user && is_jit_token(ips[i])) {
          const auto& jit = jit_frames_[ips[i] & ~kJitToken];
          for (auto f = jit.rbegin(); f != jit.rend(); ++f) frames.push_back(profile.intern(*f));
          continue;
        }
        const Named& n = names.at(lookup_address(ips, i));
        frames.insert(frames.end(), named_frames.begin() + n.first, named_frames.begin() + n.first + n.count);
        unknown |= !n.known;
      }
    };
    if (const std::string& prefix = options_.views[view].kernel_frame_prefix; !prefix.empty()) {
      auto k = kstacks_.get(key.kstack);
      bool match = false;
      for (size_t i = 0; i < k.size() && !match; ++i) {
        const Named& n = kernel_names.at(lookup_address(k, i));
        match = profile.frames()[named_frames[n.first]].name.starts_with(prefix);
      }
      if (!match) continue;
    }
    if (!options_.kernel_only) append(ustacks_.get(key.ustack), user_names[key.pid], true);
    if (!options_.user_only) append(kstacks_.get(key.kstack), kernel_names, false);
    // --kernel-only: time in user space still counts, as one frame.
    if (options_.kernel_only && kstacks_.get(key.kstack).empty())
      frames.push_back(profile.intern(Frame{"[user space]", FrameKind::Unknown, {}}));
    if (std::any_of(frames.begin(), frames.end(), [&](FrameId id) {
          return std::any_of(options_.views[view].excluded_frames.begin(), options_.views[view].excluded_frames.end(),
                             [&](const std::string& e) { return profile.frames()[id].name.find(e) != std::string::npos; });
        }))
      continue;
    profile.add(frames, count.total);
    stats_.samples += count.records;
    if (unknown) stats_.unknown_samples += count.records;
  }
  stats_.jvms = jvms_.size();
  stats_.exited_processes = exited_.size();
  stats_.bad_jit_map_lines = 0;
  for (const auto& [pid, jvm] : jvms_) stats_.bad_jit_map_lines += jvm.map.bad_lines();
  return profile;
}

}  // namespace ember
