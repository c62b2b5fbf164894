#include "user/session/collector.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "symbolizer/proc_maps.h"
#include "symbolizer/profile_frames.h"

namespace ember {

using flamegraph::Frame;
using flamegraph::FrameId;
using flamegraph::FrameKind;

namespace {

constexpr uint64_t kJitToken = uint64_t{1} << 63;
bool is_jit_token(uint64_t ip) { return ip & kJitToken; }

// The token for the pseudo-frame that ends a stack cut at a JIT frame.
constexpr uint32_t kBrokenChainToken = 0;
constexpr uint32_t kUnnamedInterpretedToken = 1;  // a Method* the JVM's agent did not name
constexpr uint32_t kHiddenToken = UINT32_MAX;  // a frame the runtime hides: left out
bool is_interpreted_method(uint64_t ip) { return (ip & ~EMBER_FRAME_METHOD_MASK) == EMBER_FRAME_METHOD; }
bool is_python_frame(uint64_t ip) { return (ip & EMBER_FRAME_PYTHON_TAG) == EMBER_FRAME_PYTHON; }
bool is_v8_frame(uint64_t ip) { return (ip & ~EMBER_FRAME_V8_MASK) == EMBER_FRAME_V8; }
bool is_v8_position(uint64_t ip) {
  return (ip & ~EMBER_FRAME_V8_MASK) == EMBER_FRAME_V8_BYTECODE || (ip & ~EMBER_FRAME_V8_MASK) == EMBER_FRAME_V8_PC;
}

// JVM samples wait this long for the agent to publish their code.
constexpr uint64_t kJitSettleNs = 300'000'000;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

bool has_waker_stacks(const ember_sample& s) { return s.kind == EMBER_KIND_BLOCKED && s.waker == EMBER_WAKER_SEEN; }

// The record's length in the ring buffer: header and every stack it carries.
size_t record_size(const ember_sample& s) {
  size_t ips = s.ustack_len + s.kstack_len;
  if (has_waker_stacks(s)) ips += s.waker_ustack_len + s.waker_kstack_len;
  return EMBER_SAMPLE_HEADER_SIZE + ips * sizeof(uint64_t);
}

// When the record's last stack was taken: a block's waker runs up to the
// end of the block, which is when the record is sent.
uint64_t end_time(const ember_sample& s) {
  return s.kind == EMBER_KIND_BLOCKED || s.kind == EMBER_KIND_PREEMPTED ? s.time_ns + s.weight : s.time_ns;
}

bool starts_with_any(const std::string& name, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return name.starts_with(p); });
}

}  // namespace

// A wakeup in an interrupt (a timer expiring, I/O completing, a softirq on
// the way out of one) runs on whatever task it interrupted, which did not
// wake anyone: the waker's kernel stack then passes an interrupt entry
// (x86: asm_sysvec_*, asm_common_interrupt; arm64: el1_interrupt,
// el0_interrupt), past which the frames are the interrupted task's.
// Softirqs run by ksoftirqd, or by a task as it re-enables them (a
// loopback send), are the task's own doing and stay its wakeups.
Collector::Wakeup Collector::classify_wakeup(size_t depth, const std::function<const std::string&(size_t)>& name) {
  static const std::initializer_list<std::string_view> kEntries = {
      "asm_sysvec_", "sysvec_", "__sysvec_", "asm_common_interrupt", "common_interrupt", "asm_spurious_interrupt",
      "el1_interrupt", "el0_interrupt", "el1h_64_irq", "el0t_64_irq"};
  bool softirq = false;
  for (size_t i = 0; i < depth; ++i) {
    const std::string& n = name(i);
    if (n == "handle_softirqs" || n == "__do_softirq") softirq = true;
    if (!starts_with_any(n, kEntries)) continue;
    while (i + 1 < depth && starts_with_any(name(i + 1), kEntries)) ++i;
    return {softirq ? WakeContext::Softirq : WakeContext::Hardirq, i + 1};
  }
  return {WakeContext::Task, depth};
}

const Collector::Wakeup& Collector::wakeup(uint32_t waker_kstack) {
  auto [it, added] = wakeups_.try_emplace(waker_kstack);
  if (added) {
    auto k = kstacks_.get(waker_kstack);
    std::vector<uint64_t> addresses(k.size());
    for (size_t i = 0; i < k.size(); ++i) addresses[i] = AddressNames::lookup_address(k, i);
    std::vector<symbolizer::Symbol> symbols = symbolizer_.symbolize_kernel(addresses);
    static const std::string kUnknown;
    it->second = classify_wakeup(symbols.size(), [&](size_t i) -> const std::string& {
      return symbols[i].frames.empty() ? kUnknown : symbols[i].frames.front().name;
    });
  }
  return it->second;
}

size_t Collector::KeyHash::operator()(const Key& k) const {
  uint64_t h = 0;
  for (uint32_t v : {k.view, k.offcpu, k.pid, k.tid, k.process_name, k.thread_name, k.ustack, k.kstack, k.waker,
                     k.waker_pid, k.waker_tid, k.waker_process_name, k.waker_thread_name, k.waker_ustack,
                     k.waker_kstack})
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

uint32_t Collector::name_id(std::string_view name) {
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
    : options_(std::move(options)), symbolizer_(symbolizer), addresses_(symbolizer), self_pid_(static_cast<uint32_t>(getpid())) {
  add_fixed_frames();
}

// What every window starts with: the fixed JIT tokens (kBrokenChainToken,
// kUnnamedInterpretedToken).
void Collector::add_fixed_frames() {
  jit_frames_.push_back({Frame{"[JIT frames without frame pointers: restart the JVM with -XX:+PreserveFramePointer]",
                               FrameKind::Unknown, {}}});
  jit_frames_.push_back({Frame{"Interpreter", FrameKind::Interpreted, "[jvm generated code]"}});
}

std::vector<uint32_t> Collector::next_window() {
  CarriedAllocations carried = take_held_allocations();
  counts_.clear();
  records_.clear();
  records_step_ns_ = 0;
  ustacks_.clear();
  kstacks_.clear();
  wakeups_.clear();
  unwind_tallies_.clear();
  stats_ = {};
  std::vector<std::vector<Frame>> jit_frames = std::exchange(jit_frames_, {});
  runtime_tokens_.clear();
  addresses_.clear();
  for (auto& [pid, jvm] : jvms_) {
    jvm.tokens.clear();
    jvm.method_tokens.clear();
    jvm.events.next_window();
  }
  // Names are interned afresh (a fleet's process names churn), the live
  // processes' last names carried over.
  std::vector<std::string> names = std::move(names_);
  names_.clear();
  name_ids_.clear();
  comm_matches_.clear();
  add_fixed_frames();
  for (auto& [pid, name] : process_name_) name = name_id(names[name]);
  hold_again(std::move(carried), names, jit_frames);

  // A process whose exit went unseen (its mappings lost, or never sampled
  // since the kernel sends them only for sampled ones) is found gone here.
  for (const auto& [pid, name] : process_name_)
    if (pid != 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) exited_.insert(pid);
  std::vector<uint32_t> forgotten;
  for (uint32_t pid : exited_before_) {
    if (copies_waiting_.count(pid)) continue;  // still needed
    auto jvm = jvms_.find(pid);
    if (jvm != jvms_.end()) {
      if (!jvm->second.held.empty()) continue;
      jvms_.erase(jvm);
    }
    process_name_.erase(pid);
    snapshots_.erase(pid);
    exited_.erase(pid);
    forgotten.push_back(pid);
  }
  exited_before_ = exited_;
  for (uint32_t pid : forgotten) exited_before_.erase(pid);
  return forgotten;
}

Collector::Jvm::~Jvm() {
  if (fd >= 0) close(fd);
}

void Collector::close_streams() {
  for (auto& [pid, jvm] : jvms_) {
    if (jvm.fd >= 0) close(jvm.fd);
    jvm.fd = -1;
    jvm.files = nullptr;
  }
}

size_t Collector::LocationHash::operator()(const symbolizer::JitMap::Location& l) const {
  return std::hash<uint64_t>{}((l.start * 0x9e3779b97f4a7c15ULL) ^ l.load_ns ^ (uint64_t{l.pc} << 40));
}

void Collector::watch_jvm(uint32_t pid, int jitmap_fd, std::string name, StreamFiles files, bool frame_pointers) {
  Jvm& jvm = jvms_[pid];
  if (jvm.fd >= 0) close(jvm.fd);
  jvm.fd = jitmap_fd;
  jvm.file = std::move(name);
  jvm.files = std::move(files);
  jvm.frame_pointers = frame_pointers;
  if (jvm.started.empty()) jvm.started = symbolizer::process_start_text(pid);
}

void Collector::read_stream(Jvm& jvm) {
  if (jvm.fd >= 0 && !read_agent_stream(jvm.fd, jvm.file, jvm.files, jvm.map, options_.java_events ? &jvm.events : nullptr))
    ++stats_.java_streams_cut;
}

void Collector::update_jvms(bool final) {
  uint64_t now = monotonic_ns();
  uint64_t settled = final ? UINT64_MAX : now - kJitSettleNs;
  for (auto& [pid, jvm] : jvms_) {
    read_stream(jvm);
    if (on_jit_code_ && jvm.map.code_version() != jvm.code_version) {
      jvm.code_version = jvm.map.code_version();
      std::vector<symbolizer::JitMap::Code> code = jvm.map.live_code();
      // Code where the process's last snapshot mapped nothing: its code
      // cache grew, or it was not there yet (a JVM the command started had
      // only the launcher mapped at its first sample). Its samples name no
      // address outside the snapshot (JIT frames are tokens by then).
      if (std::any_of(code.begin(), code.end(), [&](const auto& c) { return !symbolizer_.maps(pid, c.start); }))
        snapshot(pid);
      on_jit_code_(pid, code);
    }
    while (!jvm.held.empty()) {
      const auto& s = *reinterpret_cast<const ember_sample*>(jvm.held.front().data());
      if (end_time(s) > settled) break;
      add_now(s);
      jvm.held.pop_front();
    }
  }
}

uint32_t Collector::jit_token(Jvm& jvm, const symbolizer::JitMap::Location& at) {
  auto [it, inserted] = jvm.tokens.try_emplace(at, static_cast<uint32_t>(jit_frames_.size()));
  if (inserted) {
    std::vector<Frame> frames;
    for (const symbolizer::Frame& f : jvm.map.frames(at)) frames.push_back(profile_frame(f));
    jit_frames_.push_back(std::move(frames));
  }
  return it->second;
}

uint32_t Collector::interpreted_token(Jvm* jvm, uint64_t method_pointer) {
  uint32_t method = jvm ? jvm->map.interpreted_method(method_pointer) : 0;
  ++stats_.interpreted_frames;
  if (!method) {
    ++stats_.unnamed_interpreted_frames;
    return kUnnamedInterpretedToken;
  }
  auto [it, inserted] = jvm->method_tokens.try_emplace(method, static_cast<uint32_t>(jit_frames_.size()));
  if (inserted) jit_frames_.push_back({Frame{std::string(jvm->map.name(method)), FrameKind::Interpreted, {}}});
  return it->second;
}

uint32_t Collector::runtime_token(uint32_t pid, uint64_t word, uint64_t position) {
  auto [it, inserted] = runtime_tokens_[pid].try_emplace({word, position}, kHiddenToken);
  if (inserted) {
    const RuntimeNamer& namer = is_v8_frame(word) ? v8_namer_ : python_namer_;
    std::vector<Frame> frames = namer ? namer(pid, word, position) : std::vector<Frame>{};
    if (!frames.empty()) {
      it->second = static_cast<uint32_t>(jit_frames_.size());
      jit_frames_.push_back(std::move(frames));
    }
  }
  return it->second;
}

size_t Collector::user_stack(uint32_t pid, std::span<const __u64> ips, uint64_t time_ns, uint64_t* out) {
  auto found = jvms_.find(pid);
  Jvm* jvm = found == jvms_.end() ? nullptr : &found->second;
  size_t n = 0;
  for (size_t i = 0; i < ips.size(); ++i) {
    if (is_python_frame(ips[i]) || is_v8_frame(ips[i])) {
      uint64_t word = ips[i], position = 0;
      if (is_v8_frame(word) && i + 1 < ips.size() && is_v8_position(ips[i + 1])) {
        position = ips[++i];
        // Below the leaf a pc is its call's return address: the call lies before it.
        if (i > 1 && (position & ~EMBER_FRAME_V8_MASK) == EMBER_FRAME_V8_PC && (position & EMBER_FRAME_V8_MASK))
          --position;
      }
      if (uint32_t token = runtime_token(pid, word, position); token != kHiddenToken) out[n++] = kJitToken | token;
      continue;
    }
    if (is_interpreted_method(ips[i])) {
      out[n++] = kJitToken | interpreted_token(jvm, ips[i] & EMBER_FRAME_METHOD_MASK);
      continue;
    }
    // A frame-pointer walk that strays into garbage can return a "user"
    // address in the kernel half; nothing past it is a frame (and the top
    // bit is the JIT-token bit).
    if (is_jit_token(ips[i])) break;
    auto at = jvm ? jvm->map.locate(i == 0 ? ips[i] : ips[i] - 1, time_ns) : symbolizer::JitMap::Location{};
    if (!at) {
      out[n++] = ips[i];
      continue;
    }
    out[n++] = kJitToken | jit_token(*jvm, at);
    ++stats_.jit_frames;
    // Compiled Java code uses the frame pointer as a general register
    // unless asked not to: whatever the walk found above it is garbage.
    // (Not where ember's unwinder stepped through it by its frame size.)
    if (at.compiled && !jvm->frame_pointers && !(at.framed && on_jit_code_)) {
      out[n++] = kJitToken | kBrokenChainToken;
      ++stats_.broken_java_stacks;
      break;
    }
  }
  return n;
}

void Collector::add(const ember_sample& s) {
  // `-- CMD`'s child before its exec runs ember's code: its records are
  // left out here, before its mappings or its waker's (ember, letting it
  // go on) are read and the tables of ember's own binaries built (seconds
  // on a slow machine, while the command's first processes come and go).
  if (!options_.before_exec_name.empty() &&
      std::strncmp(s.process_comm, options_.before_exec_name.c_str(), sizeof s.process_comm) == 0)
    return;
  // A JVM's records wait until its agent has published the code they ran
  // (see kJitSettleNs); a block woken by a JVM thread waits for the waker's.
  auto jvm = jvms_.find(s.pid);
  if (jvm == jvms_.end() && has_waker_stacks(s)) jvm = jvms_.find(s.waker_pid);
  if (jvm != jvms_.end()) {
    // Its tables go to the kernel now, not once the record is taken in.
    if (s.ustack_stop == EMBER_STOP_NOT_LOADED && s.ustack_len > 0) {
      uint64_t ip = s.ips[EMBER_COPY_IP];
      note_process(s.pid, name_id(s.process_comm), std::span(&ip, 1), s.time_ns);
    }
    auto bytes = reinterpret_cast<const uint8_t*>(&s);
    jvm->second.held.emplace_back(bytes, bytes + record_size(s));
    return;
  }
  add_now(s);
}

std::span<const __u64> Collector::user_ips(uint32_t pid, const char (&process_comm)[EMBER_COMM_LEN],
                                            std::span<const __u64> ips, uint64_t time_ns, uint8_t& stop, __u64* out) {
  if (stop != EMBER_STOP_NOT_LOADED || ips.empty()) return ips;
  // The tables come with the process's first snapshot: take it now.
  uint64_t ip = ips[EMBER_COPY_IP];
  note_process(pid, name_id(process_comm), std::span(&ip, 1), time_ns);
  size_t n = 1;
  out[0] = ips[EMBER_COPY_IP];
  if (copy_unwinder_) {
    std::tie(n, stop) = copy_unwinder_(pid, ips, out);
    // A frame in code mapped since the tables were made: again, with new ones.
    if (stop == EMBER_STOP_UNMAPPED && note_process(pid, name_id(process_comm), std::span(&ip, 1), time_ns, true))
      std::tie(n, stop) = copy_unwinder_(pid, ips, out);
  }
  return {out, n};  // empty: no tables for the process
}

void Collector::add_now(const ember_sample& s, bool final) {
  uint64_t ustack[EMBER_MAX_STACK_DEPTH + 1], waker_ustack[EMBER_MAX_STACK_DEPTH + 1];
  __u64 unwound[EMBER_MAX_STACK_DEPTH];
  uint8_t ustop = s.ustack_stop, waker_ustop = s.waker_ustack_stop;
  auto ips = user_ips(s.pid, s.process_comm, std::span(s.ips, s.ustack_len), s.time_ns, ustop, unwound);
  if (ips.empty() && s.ustack_len > 0) {
    // A copy of a process already gone: wait for its exit-time mappings.
    if (!final) {
      auto bytes = reinterpret_cast<const uint8_t*>(&s);
      copies_waiting_[s.pid].emplace_back(bytes, bytes + record_size(s));
      return;
    }
    unwound[0] = s.ips[EMBER_COPY_IP];
    ips = std::span(unwound, 1);
  }
  size_t n = user_stack(s.pid, ips, s.time_ns, ustack);
  size_t waker_n = 0;
  // The waker's stack is the waker's process's: its JIT code, its mappings.
  // An interrupt's is the interrupted task's, which woke nobody; ember's
  // own is its plumbing (letting `-- CMD` go, its threads), and its 40
  // binaries' tables took a slow machine seconds: neither is read nor
  // counted, nor the process's tables built for it.
  // Interrupts are told apart once kallsyms is read, never waiting for it:
  // until then, wakers are read as tasks.
  uint32_t waker_kstack = 0;
  if (has_waker_stacks(s)) {
    waker_kstack = intern_kstack(s.ips + s.ustack_len + s.kstack_len + s.waker_ustack_len, s.waker_kstack_len);
    bool in_interrupt = symbolizer_.kernel_ready() && wakeup(waker_kstack).context != WakeContext::Task;
    if (s.waker_pid == self_pid_ || in_interrupt) {
      waker_ustop = EMBER_STOP_NO_USER;
    } else {
      auto ips = std::span(s.ips + s.ustack_len + s.kstack_len, s.waker_ustack_len);
      waker_n = user_stack(s.waker_pid,
                           user_ips(s.waker_pid, s.waker_process_comm, ips, end_time(s), waker_ustop, unwound),
                           end_time(s), waker_ustack);
    }
  }
  add_resolved(s, std::span(ustack, n), ustop, std::span(waker_ustack, waker_n), waker_ustop, waker_kstack);
}

uint32_t Collector::intern_kstack(const __u64* ips, size_t n) {
  uint64_t kstack[EMBER_MAX_STACK_DEPTH];
  std::copy_n(ips, n, kstack);
  return kstacks_.intern(std::span(kstack, n));
}

bool Collector::snapshot(uint32_t pid) {
  snapshots_[pid].read_ns = monotonic_ns();
  if (!symbolizer_.snapshot_process(pid) || !on_snapshot_) return false;
  on_snapshot_(pid);
  return true;
}

bool Collector::note_process(uint32_t pid, uint32_t name, std::span<const uint64_t> ustack, uint64_t time_ns,
                             bool stale) {
  // Snapshot mappings now, while the process surely lives; again when its
  // name changes (an exec maps a new image), or when a stack taken after
  // the last snapshot has a frame outside it (a library loaded since):
  // `stale`, the unwinder's word, or the symbolizer's.
  auto [it, first] = process_name_.try_emplace(pid, name);
  bool taken = false;
  if (pid != 0 && !ustack.empty()) {
    Snapshots& last = snapshots_[pid];
    auto outside = [&] {
      return std::any_of(ustack.begin(), ustack.end(),
                         [&](uint64_t ip) { return !is_jit_token(ip) && !symbolizer_.maps(pid, ip); });
    };
    // At most four at once, then one every 100 ms: a stack that strays
    // into garbage has frames outside every mapping too.
    constexpr uint64_t kEvery = 100'000'000, kBurst = 3 * kEvery;
    bool renamed = first || it->second != name;
    bool moved = !renamed && time_ns > last.read_ns && (stale || outside());
    uint64_t now = moved ? monotonic_ns() : 0;
    // An exec's read is not counted: a chain of them (a pyenv shim, a
    // wrapper script) would use up the reads its last image needs.
    if (renamed || (moved && now + kBurst >= last.next_ns)) {
      if (!renamed) last.next_ns = std::max(last.next_ns, now) + kEvery;
      taken = snapshot(pid);
    }
  }
  it->second = name;
  return taken;
}

void Collector::add_resolved(const ember_sample& s, std::span<const uint64_t> ustack, uint8_t ustop,
                             std::span<const uint64_t> waker_ustack, uint8_t waker_ustop, uint32_t waker_kstack) {
  uint32_t process = name_id(s.process_comm), thread = name_id(s.comm);
  if (!comm_matches_[process] && !comm_matches_[thread]) {
    ++stats_.comm_filtered;
    return;
  }
  bool woken = has_waker_stacks(s);
  if (user_truncated(ustack.size(), ustop) || s.kstack_len >= options_.max_depth ||
      (woken && (user_truncated(waker_ustack.size(), waker_ustop) || s.waker_kstack_len >= options_.max_depth)))
    ++stats_.truncated;
  count_unwind(s.pid, process, ustop);
  if (woken) count_unwind(s.waker_pid, name_id(s.waker_process_comm), waker_ustop);

  Key key{0, s.kind != EMBER_KIND_CPU, s.pid, s.tid, process, thread, ustacks_.intern(ustack),
          intern_kstack(s.ips + s.ustack_len, s.kstack_len)};
  // The same block in a graph with its waker.
  Key with_waker = key;
  if (s.kind == EMBER_KIND_BLOCKED && s.waker != EMBER_WAKER_NONE) {
    with_waker.waker = s.waker;
    if (woken) {
      with_waker.waker_ustack = ustacks_.intern(waker_ustack);
      with_waker.waker_kstack = waker_kstack;
      uint32_t waker_process = name_id(s.waker_process_comm);
      with_waker.waker_pid = s.waker_pid;
      with_waker.waker_tid = s.waker_tid;
      with_waker.waker_process_name = waker_process;
      with_waker.waker_thread_name = name_id(s.waker_comm);
      note_process(s.waker_pid, waker_process, waker_ustack, end_time(s));
    }
  }
  for (uint32_t v = 0; v < options_.views.size(); ++v) {
    const EventView& view = options_.views[v];
    if (!(view.kinds & (1u << s.kind))) continue;
    if (s.kind == EMBER_KIND_BLOCKED && s.weight < view.min_blocked_ns) continue;
    if (view.lock_waits_only && (s.kind != EMBER_KIND_BLOCKED || s.wait != EMBER_WAIT_LOCK)) continue;
    Key& k = view.waker ? with_waker : key;
    k.view = v;
    if (view.live_only) {
      held_allocations_.push_back({k, s.weight, s.pad, s.time_ns});
      continue;
    }
    count(k, s.kind == EMBER_KIND_CPU ? view.cpu_weight : s.weight, s.time_ns,
          s.kind == EMBER_KIND_BLOCKED || s.kind == EMBER_KIND_PREEMPTED);
  }
  note_process(s.pid, process, ustack, s.time_ns);
}

bool Collector::user_truncated(uint32_t frames, uint8_t stop) const {
  // The kernel's frame-pointer walk stops at kernel.perf_event_max_stack
  // without saying so; ember's own walk says why it stopped.
  if (stop == EMBER_STOP_FP_END) return frames >= options_.max_depth;
  return stop == EMBER_STOP_DEPTH;
}

void Collector::count_unwind(uint32_t pid, uint32_t name, uint8_t stop) {
  if (stop >= EMBER_STOP_KINDS || stop == EMBER_STOP_NO_USER) return;
  Tally& t = unwind_tallies_[pid];
  t.name = name;
  ++t.stops[stop];
}

std::vector<Collector::UnwindTally> Collector::unwind_tallies() const {
  std::vector<UnwindTally> out;
  for (const auto& [pid, t] : unwind_tallies_) {
    UnwindTally u{pid, names_[t.name]};
    for (int i = 0; i < EMBER_STOP_KINDS; ++i) u.stacks += u.stops[i] = t.stops[i];
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const UnwindTally& a, const UnwindTally& b) {
    return a.stacks != b.stacks ? a.stacks > b.stacks : a.pid < b.pid;
  });
  return out;
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
    out.push_back({pid, name == process_name_.end() ? "java" : names_[name->second], &jvm.events,
                   jvm.map.frames_unavailable(), jvm.map.interpreter_methods_unavailable(), jvm.started});
  }
  return out;
}

void Collector::count_live_allocations(const std::vector<uint32_t>& ids, uint64_t end_ns,
                                       const std::unordered_map<uint32_t, uint64_t>& exits) {
  std::unordered_set<uint32_t> live(ids.begin(), ids.end());
  std::erase_if(held_allocations_, [&](const HeldAllocation& a) { return !live.count(a.id); });
  for (const HeldAllocation& a : held_allocations_) {
    uint64_t end = end_ns;
    // An allocation after the end is a new process's of the same pid.
    if (auto exit = exits.find(a.key.pid); exit != exits.end() && a.time_ns <= exit->second) {
      end = std::min(end, exit->second);
      exited_.insert(a.key.pid);  // its memory is not carried into the next window
    }
    if (a.time_ns + options_.views[a.key.view].min_age_ns <= end) count(a.key, a.bytes, a.time_ns);
  }
}

Collector::CarriedAllocations Collector::take_held_allocations() {
  CarriedAllocations carried;
  // An exited process's memory went with it.
  for (const HeldAllocation& a : held_allocations_)
    if (!exited_.count(a.key.pid)) {
      carried.held.push_back(a);
      if (auto [it, added] = carried.ustacks.try_emplace(a.key.ustack); added) {
        std::span<const uint64_t> u = ustacks_.get(a.key.ustack);
        it->second.assign(u.begin(), u.end());
      }
      if (auto [it, added] = carried.kstacks.try_emplace(a.key.kstack); added) {
        std::span<const uint64_t> k = kstacks_.get(a.key.kstack);
        it->second.assign(k.begin(), k.end());
      }
    }
  held_allocations_.clear();
  return carried;
}

void Collector::hold_again(CarriedAllocations carried, const std::vector<std::string>& names,
                           const std::vector<std::vector<Frame>>& jit_frames) {
  std::unordered_map<uint64_t, uint64_t> tokens;  // old JIT token -> new
  std::unordered_map<uint32_t, uint32_t> ustack_ids, kstack_ids;  // old id -> new
  for (auto& [old, ips] : carried.ustacks) {
    for (uint64_t& ip : ips) {
      if (!is_jit_token(ip)) continue;
      auto [it, added] = tokens.try_emplace(ip, kJitToken | jit_frames_.size());
      if (added) jit_frames_.push_back(jit_frames[ip & ~kJitToken]);
      ip = it->second;
    }
    ustack_ids[old] = ustacks_.intern(ips);
  }
  for (const auto& [old, ips] : carried.kstacks) kstack_ids[old] = kstacks_.intern(ips);
  for (HeldAllocation& a : carried.held) {
    a.key.ustack = ustack_ids[a.key.ustack];
    a.key.kstack = kstack_ids[a.key.kstack];
    a.key.process_name = name_id(names[a.key.process_name]);
    a.key.thread_name = name_id(names[a.key.thread_name]);
  }
  held_allocations_ = std::move(carried.held);
}

void Collector::count(const Key& key, uint64_t weight, uint64_t time_ns, bool spread) {
  auto [it, added] = counts_.try_emplace(key);
  if (added) queue_addresses(key);
  it->second.total += weight;
  ++it->second.records;
  if (records_.size() >= options_.max_timeline_records) coarsen_records();
  if (records_step_ns_) time_ns -= time_ns % records_step_ns_;
  if (!spread) {
    records_.push_back({time_ns, weight, &*it});
    return;
  }
  // A block is time: on the timeline it covers the span it lasted, in
  // pieces of 20 ms (the heatmap's finest cell) or, for a long one, a
  // twentieth of it, so that a range picked across it takes its share.
  // A thread asleep adds at most 50 pieces a second.
  const uint64_t piece = std::max<uint64_t>(20'000'000, weight / 20 + 1);
  for (uint64_t at = 0; at < weight; at += piece)
    records_.push_back({time_ns + at, std::min(piece, weight - at), &*it});
}

void Collector::coarsen_records() {
  auto merge = [&] {
    for (Record& r : records_) r.time_ns -= r.time_ns % records_step_ns_;
    std::sort(records_.begin(), records_.end(), [](const Record& a, const Record& b) {
      return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.count < b.count;
    });
    size_t n = 0;
    for (const Record& r : records_) {
      if (n && records_[n - 1].time_ns == r.time_ns && records_[n - 1].count == r.count) records_[n - 1].weight += r.weight;
      else records_[n++] = r;
    }
    records_.resize(n);
  };
  // The step of the last time first: the records since may merge into it.
  if (records_step_ns_) merge();
  while (records_.size() > options_.max_timeline_records / 2) {
    records_step_ns_ = records_step_ns_ ? records_step_ns_ * 4 : 20'000'000;
    merge();
  }
}

void Collector::queue_addresses(const Key& key) {
  // Kernel addresses are named even with --user-only where they tell a
  // wakeup from an interrupt; a waker's user stack is its own process's
  // (an interrupt's is the interrupted task's: named, not shown).
  if (!options_.user_only) addresses_.queue_kernel(kstacks_.get(key.kstack));
  if (!options_.kernel_only) addresses_.queue_user(key.pid, key.process_name, ustacks_.get(key.ustack));
  if (key.waker != EMBER_WAKER_SEEN) return;
  addresses_.queue_kernel(kstacks_.get(key.waker_kstack));
  if (!options_.kernel_only)
    addresses_.queue_user(key.waker_pid, key.waker_process_name, ustacks_.get(key.waker_ustack));
}

void Collector::refresh_processes() {
  for (const auto& [pid, name] : process_name_)
    if (symbolizer_.has_process(pid)) symbolizer_.snapshot_process(pid);
}

void Collector::take_in_copies(bool final) {
  for (auto it = copies_waiting_.begin(); it != copies_waiting_.end();) {
    uint32_t pid = it->first;
    if (!final && !exited_.count(pid)) {
      ++it;
      continue;
    }
    if (on_snapshot_ && symbolizer_.has_process(pid)) on_snapshot_(pid);
    std::vector<std::vector<uint8_t>> records = std::move(it->second);
    it = copies_waiting_.erase(it);
    for (const auto& r : records) add_now(*reinterpret_cast<const ember_sample*>(r.data()), true);
  }
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

flamegraph::Profile Collector::build(size_t view, const StackSink& each_stack, uint64_t start_ns) {
  flamegraph::Profile profile;
  profile.event = options_.views[view].name;
  profile.unit = options_.views[view].unit;
  stats_.samples = stats_.unknown_addresses = stats_.unknown_samples = 0;
  stats_.woken_by_thread = stats_.woken_by_interrupt = stats_.waker_unseen = 0;

  // What the passes while recording left; then each frame of an address
  // interned here once, when a stack of this graph first uses it.
  addresses_.name_queued(true);
  constexpr FrameId kNotYet = UINT32_MAX;
  std::vector<FrameId> interned(addresses_.frame_count(), kNotYet);
  std::vector<std::vector<FrameId>> jit_interned(jit_frames_.size());  // by JIT token, innermost first
  std::vector<bool> unknown_counted(addresses_.named_count());
  std::vector<FrameId> frames;
  for (auto& [key, count] : counts_) {
    if (key.view != view) continue;
    frames.clear();
    bool unknown = false;
    const std::string& process = names_[key.process_name];
    std::string root = options_.pid_frames ? process + " (" + std::to_string(key.pid) + ")" : process;
    frames.push_back(profile.intern(Frame{root, FrameKind::Process, {}}));
    if (options_.thread_frames)
      frames.push_back(profile.intern(
          Frame{"[" + names_[key.thread_name] + " tid=" + std::to_string(key.tid) + "]", FrameKind::Thread, {}}));
    // Appends a stack of process `pid` (`name`), root first, or (a waker's,
    // above the "--") leaf first; `pid` 0 for a kernel stack. Kernel
    // addresses have the top bit set too: tokens live in user stacks only.
    auto append = [&](std::span<const uint64_t> ips, bool user, uint32_t pid, uint32_t name,
                      bool leaf_first = false) {
      const AddressNames::Names& names = user ? addresses_.user(pid, name) : addresses_.kernel();
      auto named = [&](size_t i) { return names.at(AddressNames::lookup_address(ips, i)); };
      // An off-CPU stack (or a waker's) is taken inside a BPF program on a
      // scheduler tracepoint: its own frames and the tracepoint's above
      // __schedule (or try_to_wake_up) are ember's, not the thread's. With
      // another program on the same tracepoint (a second ember, offcputime)
      // the kernel calls them through __traceiter_* (seen on 6.x), not
      // straight from the static call.
      size_t leaf = 0;
      for (size_t i = 0; !user && key.offcpu && i < std::min<size_t>(ips.size(), 6); ++i) {
        const std::string& frame = addresses_.frame(addresses_.frame_ids()[addresses_.named(named(i)).first]).name;
        if (frame.starts_with("bpf_trace_run") || frame.starts_with("__bpf_trace_") || frame.starts_with("__traceiter_"))
          leaf = i + 1;
      }
      for (size_t j = leaf; j < ips.size(); ++j) {
        size_t i = leaf_first ? j : ips.size() - 1 - (j - leaf);
        if (user && is_jit_token(ips[i])) {
          std::vector<FrameId>& ids = jit_interned[ips[i] & ~kJitToken];
          if (ids.empty())
            for (const Frame& f : jit_frames_[ips[i] & ~kJitToken]) ids.push_back(profile.intern(f));
          if (leaf_first) frames.insert(frames.end(), ids.begin(), ids.end());
          else frames.insert(frames.end(), ids.rbegin(), ids.rend());
          continue;
        }
        uint32_t index = named(i);
        const AddressNames::Named& n = addresses_.named(index);
        for (uint32_t f = 0; f < n.count; ++f) {
          FrameId id = addresses_.frame_ids()[n.first + (leaf_first ? n.count - 1 - f : f)];  // outermost first
          if (interned[id] == kNotYet) interned[id] = profile.intern(addresses_.frame(id));
          frames.push_back(interned[id]);
        }
        if (!n.known) {
          unknown = true;
          if (!unknown_counted[index]) ++stats_.unknown_addresses;
          unknown_counted[index] = true;
        }
      }
    };
    if (!options_.kernel_only) append(ustacks_.get(key.ustack), true, key.pid, key.process_name);
    if (!options_.user_only) append(kstacks_.get(key.kstack), false, 0, 0);
    // --kernel-only: time in user space still counts, as one frame.
    if (options_.kernel_only && kstacks_.get(key.kstack).empty())
      frames.push_back(profile.intern(Frame{"[user space]", FrameKind::Unknown, {}}));
    // The waker, upside down above the block, as BCC's offwaketime draws
    // it: the two stacks meet at the "--", where the wakeup happened.
    if (key.waker != EMBER_WAKER_NONE) {
      frames.push_back(profile.intern(Frame{"--", FrameKind::Unknown, {}}));
      std::string waker = "unknown";
      if (key.waker == EMBER_WAKER_SEEN) {
        const Wakeup& w = wakeup(key.waker_kstack);
        bool task = w.context == WakeContext::Task;
        if (!options_.user_only || !task)
          append(kstacks_.get(key.waker_kstack).first(w.frames), false, 0, 0, true);
        if (!options_.kernel_only && task)
          append(ustacks_.get(key.waker_ustack), true, key.waker_pid, key.waker_process_name, true);
        waker = w.context == WakeContext::Hardirq ? "hardirq"
                : w.context == WakeContext::Softirq ? "softirq"
                                                    : names_[key.waker_process_name];
        if (task && options_.pid_frames) waker += " (" + std::to_string(key.waker_pid) + ")";
        if (task && options_.thread_frames)
          waker += ", thread " + names_[key.waker_thread_name] + " tid " + std::to_string(key.waker_tid);
        (task ? stats_.woken_by_thread : stats_.woken_by_interrupt) += count.records;
      } else {
        stats_.waker_unseen += count.records;
      }
      frames.push_back(profile.intern(Frame{"[waker: " + waker + "]", FrameKind::Unknown, {}}));
    }
    count.stack = profile.add(frames, count.total);
    if (each_stack) each_stack(key.pid, process, profile, frames, count.total);
    stats_.samples += count.records;
    if (unknown) stats_.unknown_samples += count.records;
  }
  // Records can arrive out of order (one ring per CPU, held JVM samples);
  // one before the window began (read late) counts from its start.
  // A coarse timeline counts in whole steps from the start (a step early at most).
  for (const Record& r : records_)
    if (r.count->first.view == view && r.weight && r.count->second.stack != flamegraph::Profile::kNoStack) {
      uint64_t t = r.time_ns > start_ns ? r.time_ns - start_ns : 0;
      if (records_step_ns_) t -= t % records_step_ns_;
      profile.timeline.push_back({t, r.weight, r.count->second.stack});
    }
  std::stable_sort(profile.timeline.begin(), profile.timeline.end(),
                   [](const flamegraph::Timed& a, const flamegraph::Timed& b) { return a.time_ns < b.time_ns; });
  profile.time_step_ns = records_step_ns_;
  stats_.jvms = jvms_.size();
  stats_.exited_processes = exited_.size();
  stats_.bad_jit_map_lines = 0;
  for (const auto& [pid, jvm] : jvms_) stats_.bad_jit_map_lines += jvm.map.bad_lines();
  return profile;
}

}  // namespace ember
