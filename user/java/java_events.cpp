#include "user/java/java_events.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>

#include "agent/protocol.h"

namespace ember::java {
namespace {

namespace protocol = agent::protocol;
namespace setting = agent::protocol::setting;

constexpr uint64_t kMaxId = 1u << 24;  // as JitMap
// Elements of a pin array: the agent holds at most LiveObjects::kMaxTracked.
constexpr uint64_t kMaxHeld = 1u << 20;

// The next space-separated number, decimal unless `base` says otherwise.
bool number(std::string_view& s, uint64_t& out, int base = 10) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(p - s.data());
  return s.empty() || s.front() == ' ';
}

std::string_view word(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  size_t end = s.find(' ');
  std::string_view w = s.substr(0, end);
  s.remove_prefix(end == std::string_view::npos ? s.size() : end);
  return w;
}

std::string_view rest_of(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

std::string_view name_of(const std::unordered_map<uint32_t, std::string>& names, uint32_t id,
                         std::string_view unknown) {
  auto it = names.find(id);
  return it != names.end() && !it->second.empty() ? std::string_view(it->second) : unknown;
}

}  // namespace

size_t JavaEvents::StackHash::operator()(const Stack& s) const {
  uint64_t h = s.truncated ? 0x51ed27ULL : 0;
  for (uint32_t m : s.methods) h = (h ^ m) * 0x100000001b3ULL;
  return static_cast<size_t>(h);
}

size_t JavaEvents::NativeStackHash::operator()(const std::vector<NativeFrame>& s) const {
  uint64_t h = 0;
  for (const NativeFrame& f : s) h = (h ^ f.address ^ (uint64_t{f.library} << 48)) * 0x100000001b3ULL;
  return static_cast<size_t>(h);
}

// "<start> <end> <bias> <path>": a file the next A lines' native frames may
// lie in. It replaces what it overlaps (a library unloaded, another loaded
// there; a new stream describing the same one again).
bool JavaEvents::add_library(std::string_view s) {
  NativeLibrary lib;
  if (!number(s, lib.start, 16) || !number(s, lib.end, 16) || !number(s, lib.bias, 16) || lib.end <= lib.start)
    return false;
  lib.path = std::string(rest_of(s));
  if (lib.path.empty()) return false;
  auto it = mapped_.upper_bound(lib.start);
  if (it != mapped_.begin() && libraries_[std::prev(it)->second].end > lib.start) --it;
  while (it != mapped_.end() && it->first < lib.end) it = mapped_.erase(it);
  mapped_[lib.start] = static_cast<uint32_t>(libraries_.size());
  libraries_.push_back(std::move(lib));
  return true;
}

// "7f01c2a3b4c5,7f01c2a3b000": call sites innermost first, each resolved
// to its file now (libraries described later do not apply to it).
uint32_t JavaEvents::intern_native(std::string_view s, bool& ok) {
  std::vector<NativeFrame> frames;
  ok = false;
  if (s.empty() || s.back() == ',') return 0;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s.remove_prefix(comma == std::string_view::npos ? s.size() : comma + 1);
    uint64_t address = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), address, 16);
    if (ec != std::errc() || p != item.data() + item.size() || item.empty()) return 0;
    NativeFrame f{kNoLibrary, address};
    auto it = mapped_.upper_bound(address);
    if (it != mapped_.begin()) {
      const NativeLibrary& lib = libraries_[std::prev(it)->second];
      if (address < lib.end) f = {std::prev(it)->second, address - lib.bias};
    }
    frames.push_back(f);
  }
  if (frames.empty()) return 0;
  ok = true;
  auto [it, added] = native_ids_.try_emplace(frames, static_cast<uint32_t>(natives_.size()));
  if (added) natives_.push_back(std::move(frames));
  return it->second;
}

// HotSpot samples allocations with a geometric distribution of mean
// `interval` bytes (JVMTI SetHeapSamplingInterval): an object of size s is
// sampled with probability p = 1 - exp(-s / interval), so each sample
// stands for 1/p objects and s/p bytes (the Horvitz-Thompson estimate,
// unbiased at every size). async-profiler weighs a sample max(s, interval)
// bytes (objectSampler.cpp), which is this estimate's limit for s << interval
// and for s >> interval, but only 63% of it at s = interval; Datadog's
// java-profiler uses 1 / (1 - exp(-s / interval)) as its sample weight, as
// here. For the small objects that dominate most heaps s/p ~ interval: the
// byte ratio between two classes is then their sample-count ratio.
JavaEvents::AllocWeight JavaEvents::weigh_alloc(uint64_t size, uint64_t interval) {
  if (interval == 0 || size == 0) return {1, double(size), 1};
  double p = -std::expm1(-double(size) / double(interval));
  return {1, double(size) / p, 1 / p};
}

// "<token> <count>": the H lines before it are the pin array's.
bool JavaEvents::end_pin(std::string_view value) {
  std::string_view token = word(value);
  uint64_t count = 0;
  if (token.empty() || !number(value, count) || !rest_of(value).empty() || count > kMaxHeld) return false;
  held_.resize(count + 1);
  pin_ = Pin{std::string(token), std::move(held_)};
  held_.clear();
  return true;
}

void JavaEvents::feed(std::string_view text) {
  lines_.feed(text, [this](std::string_view l) { line(l); });
}

// "3,2,1", "3,2,+" (cut at the depth limit) or "-" (no Java frames).
uint32_t JavaEvents::intern_stack(std::string_view s, bool& ok) {
  Stack stack;
  ok = false;
  s = rest_of(s);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s != "-") {
    while (!s.empty()) {
      size_t comma = s.find(',');
      std::string_view item = s.substr(0, comma);
      s.remove_prefix(comma == std::string_view::npos ? s.size() : comma + 1);
      if (item == "+" && s.empty()) {
        stack.truncated = true;
        break;
      }
      uint32_t id = 0;
      auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), id, 10);
      if (ec != std::errc() || p != item.data() + item.size() || item.empty()) return 0;
      stack.methods.push_back(id);
    }
    if (stack.methods.empty() && !stack.truncated) return 0;
  }
  ok = true;
  auto [it, added] = stack_ids_.try_emplace(stack, static_cast<uint32_t>(stacks_.size()));
  if (added) stacks_.push_back(std::move(stack));
  return it->second;
}

void JavaEvents::line(std::string_view s) {
  if (s.empty() || s.front() == '#') return;
  char tag = s.front();
  s.remove_prefix(1);
  if (!s.empty() && s.front() != ' ') tag = '?';
  uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
  switch (tag) {
    case protocol::kLoad:
    case protocol::kInline:
    case protocol::kUnload:
    case protocol::kStub:
    case protocol::kFrame:
    case protocol::kMethodPointer:
    case protocol::kContinued:
      return;  // code and the stream's files: JitMap's
    case protocol::kMethod:
    case protocol::kClass:
      if (number(s, a) && a < kMaxId) {
        (tag == protocol::kMethod ? methods_ : classes_)[static_cast<uint32_t>(a)] = std::string(rest_of(s));
        return;
      }
      break;
    case protocol::kThread:
      if (number(s, a) && a <= UINT32_MAX) {
        threads_[static_cast<uint32_t>(a)] = std::string(rest_of(s));
        return;
      }
      break;
    case protocol::kOption: {
      std::string_view key = word(s), value = rest_of(s);
      if (key.empty()) break;
      uint64_t v = 0;
      bool numeric = number(s, v);
      if (key == setting::kAllocInterval && numeric) alloc_interval_ = v;
      else if (key == setting::kLockInterval && numeric) lock_interval_ = v;
      else if (key == setting::kLiveMax) live_ = true;
      else if (key == setting::kLiveEnd) live_end_ = std::string(value);
      else if (key == setting::kGcs && numeric) gcs_ = std::max(gcs_.value_or(0), v);
      else if (key == setting::kAllocUnavailable) unavailable_.push_back("alloc");
      else if (key == setting::kLockUnavailable) unavailable_.push_back("lock");
      else if (key == setting::kNativeLibrary && !add_library(value)) break;
      else if (key == setting::kPinned && !end_pin(value)) break;
      else if (key == setting::kPinUnavailable) pin_unavailable_ = std::string(value);
      // Other settings: for newer readers.
      return;
    }
    case protocol::kCounter: {
      if (!number(s, a)) break;
      std::string_view name = word(s);
      if (name.empty() || !number(s, b)) break;
      stats_.agent_counters[std::string(name)] += b;
      return;
    }
    case protocol::kAlloc: {
      // A <ns> <tid> <size> <class> <sample> <frames> [<native>]
      if (!number(s, a) || !number(s, b) || !number(s, c) || !number(s, d) || !number(s, e)) break;
      if (b > UINT32_MAX || d > UINT32_MAX) break;
      bool ok = false;
      uint32_t stack = intern_stack(word(s), ok);
      if (!ok) break;
      uint32_t native = 0;
      std::string_view native_text = rest_of(s);
      while (!native_text.empty() && native_text.back() == ' ') native_text.remove_suffix(1);
      if (!native_text.empty()) {
        native = intern_native(native_text, ok);
        if (!ok) break;
        ++stats_.native_alloc_samples;
      }
      Site site{static_cast<uint32_t>(b), static_cast<uint32_t>(d), stack, native};
      AllocWeight w = weigh_alloc(c, alloc_interval_);
      AllocWeight& total = alloc_[site];
      total.samples += w.samples;
      total.bytes += w.bytes;
      total.objects += w.objects;
      ++stats_.alloc_samples;
      if (stacks_[stack].truncated) ++stats_.truncated_stacks;
      if (e != 0) {
        followed_[e] = LiveAllocation{e, site, w, a, gcs_.value_or(0)};
        ++stats_.live_followed;
      } else if (live_) {
        ++stats_.live_untracked;
      }
      return;
    }
    case protocol::kFree: {
      if (!number(s, a) || !number(s, b) || !rest_of(s).empty()) break;
      if (followed_.erase(b))
        ++stats_.freed;
      else
        ++stats_.unknown_frees;
      return;
    }
    case protocol::kHeld: {
      // H <index> <sample>: element 0 is the marker
      if (!number(s, a) || !number(s, b) || !rest_of(s).empty() || a == 0 || a > kMaxHeld) break;
      if (held_.size() <= a) held_.resize(a + 1);
      held_[a] = b;
      return;
    }
    case protocol::kContended: {
      // C <ns> <tid> <wait-ns> <class> <frames>
      if (!number(s, a) || !number(s, b) || !number(s, c) || !number(s, d)) break;
      if (b > UINT32_MAX || d > UINT32_MAX) break;
      bool ok = false;
      uint32_t stack = intern_stack(s, ok);
      if (!ok) break;
      // A wait shorter than the interval was sampled: one record per
      // `interval` ns of such waits (agent/agent.cpp), so it weighs that.
      uint64_t weight = lock_interval_ && c < lock_interval_ ? lock_interval_ : c;
      LockWeight& w = lock_[Site{static_cast<uint32_t>(b), static_cast<uint32_t>(d), stack}];
      ++w.samples;
      w.wait_ns += weight;
      ++stats_.lock_samples;
      if (stacks_[stack].truncated) ++stats_.truncated_stacks;
      return;
    }
  }
  ++stats_.bad_lines;
}

std::vector<JavaEvents::LiveAllocation> JavaEvents::live_allocations(uint64_t min_age_ns, uint64_t end_ns,
                                                                    uint64_t min_gcs) const {
  if (min_gcs && !gcs_) return {};
  const uint64_t gcs = gcs_.value_or(0);
  std::vector<std::pair<uint64_t, const LiveAllocation*>> kept;  // by sample number
  for (const auto& [sample, f] : followed_)
    if (f.time_ns <= end_ns && end_ns - f.time_ns >= min_age_ns && gcs - f.gcs_at >= min_gcs)
      kept.emplace_back(sample, &f);
  // Ties in sample order: the same sums, in the same order, every time.
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second->time_ns != b.second->time_ns ? a.second->time_ns < b.second->time_ns : a.first < b.first;
  });
  std::vector<LiveAllocation> out;
  out.reserve(kept.size());
  for (const auto& [sample, f] : kept) out.push_back(*f);
  return out;
}

std::string_view JavaEvents::method(uint32_t id) const {
  return name_of(methods_, id, "[unknown method]");
}

std::string_view JavaEvents::class_name(uint32_t id) const {
  return name_of(classes_, id, "[unknown class]");
}

std::string_view JavaEvents::thread_name(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? std::string_view() : std::string_view(it->second);
}

void JavaEvents::next_window() {
  alloc_.clear();
  lock_.clear();
  stats_.alloc_samples = stats_.native_alloc_samples = stats_.lock_samples = 0;
  stats_.truncated_stacks = stats_.bad_lines = 0;
}

}  // namespace ember::java
