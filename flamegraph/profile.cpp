#include "flamegraph/profile.h"

#include <charconv>

#include <algorithm>
#include <functional>
#include <ranges>
#include <set>

namespace ember::flamegraph {

size_t Profile::FrameHash::operator()(const Frame& f) const {
  size_t h = std::hash<std::string>{}(f.name);
  h ^= std::hash<std::string>{}(f.module) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h ^ static_cast<size_t>(f.kind);
}

namespace {

uint64_t stack_hash(std::span<const FrameId> ids) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the ids
  for (FrameId id : ids) h = (h ^ id) * 1099511628211ULL;
  return h ^ (h >> 29);  // the slot comes from the low bits: fold the high ones in
}

}  // namespace

FrameId Profile::intern(const Frame& frame) {
  frame_index_.reserve_one(frames_.size(), [&](uint32_t i) { return FrameHash{}(frames_[i]); });
  const uint64_t h = FrameHash{}(frame);
  size_t slot = 0;
  int64_t found = frame_index_.find(h, [&](uint32_t i) { return frames_[i] == frame; }, slot);
  if (found >= 0) return static_cast<FrameId>(found);
  frames_.push_back(frame);
  frame_index_.add(slot, h, static_cast<uint32_t>(frames_.size() - 1));
  return static_cast<FrameId>(frames_.size() - 1);
}

uint32_t Profile::add_from(const Profile& other, std::span<const FrameId> frames, uint64_t weight) {
  std::vector<FrameId> here;
  here.reserve(frames.size());
  for (FrameId id : frames) here.push_back(intern(other.frames()[id]));
  return add(here, weight);
}

const std::string* Profile::info_value(std::string_view key) const {
  for (const auto& [k, v] : info)
    if (k == key) return &v;
  return nullptr;
}

uint32_t Profile::add(std::span<const FrameId> frames, uint64_t weight) {
  if (weight == 0) return kNoStack;
  stack_index_.reserve_one(stacks_.size(), [&](uint32_t i) { return stack_hash(stacks_[i].frames); });
  const uint64_t h = stack_hash(frames);
  size_t slot = 0;
  int64_t found = stack_index_.find(h, [&](uint32_t i) { return std::ranges::equal(stacks_[i].frames, frames); }, slot);
  total_ += weight;
  if (found >= 0) {
    stacks_[found].weight += weight;
    return static_cast<uint32_t>(found);
  }
  stacks_.push_back(Stack{{frames.begin(), frames.end()}, weight});
  stack_index_.add(slot, h, static_cast<uint32_t>(stacks_.size() - 1));
  return static_cast<uint32_t>(stacks_.size() - 1);
}

std::vector<const Stack*> Profile::sorted_stacks() const {
  std::vector<const Stack*> out;
  out.reserve(stacks_.size());
  for (const Stack& s : stacks_) out.push_back(&s);
  std::sort(out.begin(), out.end(), [](const Stack* a, const Stack* b) { return a->frames < b->frames; });
  return out;
}

Profile cut_stacks(const Profile& profile, size_t max_stacks) {
  Profile out;
  out.event = profile.event;
  out.unit = profile.unit;
  out.period_ns = profile.period_ns;
  out.start_unix_ns = profile.start_unix_ns;
  out.duration_ns = profile.duration_ns;
  out.info = profile.info;
  std::vector<const Stack*> stacks = profile.sorted_stacks();
  if (stacks.size() <= max_stacks) {
    for (const Stack* s : stacks) out.add_from(profile, s->frames, s->weight);
    return out;
  }
  std::stable_sort(stacks.begin(), stacks.end(), [](const Stack* a, const Stack* b) { return a->weight > b->weight; });
  // An eighth of the room for the cut ones (the tail of a profile is
  // many light stacks, and their upper frames are what it shows of them),
  // and room to keep each root frame: each root cut, and once whole.
  std::set<FrameId> roots;
  for (const Stack* s : stacks) roots.insert(s->frames.empty() ? FrameId(-1) : s->frames[0]);
  const size_t cut_room = std::min(max_stacks, std::max(max_stacks / 8, 2 * roots.size()));
  const size_t whole = max_stacks - cut_room;
  std::span<const Stack* const> light(stacks.begin() + static_cast<ptrdiff_t>(whole), stacks.end());
  // The stacks the light ones make when cut after `depth` frames (a cut
  // one ends in the cut frame: never equal to one that is whole).
  auto cut_count = [&](size_t depth) {
    using Key = std::pair<bool, std::span<const FrameId>>;
    std::vector<Key> keys;
    for (const Stack* s : light)
      keys.emplace_back(s->frames.size() > depth, std::span(s->frames).first(std::min(depth, s->frames.size())));
    auto less = [](const Key& a, const Key& b) {
      return a.first != b.first ? a.first < b.first : std::ranges::lexicographical_compare(a.second, b.second);
    };
    auto equal = [](const Key& a, const Key& b) { return a.first == b.first && std::ranges::equal(a.second, b.second); };
    std::sort(keys.begin(), keys.end(), less);
    return static_cast<size_t>(std::unique(keys.begin(), keys.end(), equal) - keys.begin());
  };
  // The most frames kept that fit: more frames, more distinct stacks.
  size_t lo = 0, hi = 0;
  for (const Stack* s : light) hi = std::max(hi, s->frames.size());
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    if (cut_count(mid) <= cut_room)
      lo = mid;
    else
      hi = mid - 1;
  }
  for (size_t i = 0; i < whole; ++i) out.add_from(profile, stacks[i]->frames, stacks[i]->weight);
  const FrameId cut = out.intern(Frame{"[lighter stacks cut]", FrameKind::Unknown, ""});
  std::vector<FrameId> frames;
  for (const Stack* s : light) {
    frames.clear();
    for (size_t i = 0; i < s->frames.size() && i < lo; ++i) frames.push_back(out.intern(profile.frames()[s->frames[i]]));
    if (s->frames.size() > lo) frames.push_back(cut);
    out.add(frames, s->weight);
  }
  return out;
}

std::string process_frame_name(std::string_view comm, uint64_t pid) {
  return pid ? std::string(comm) + " (" + std::to_string(pid) + ")" : std::string(comm);
}

namespace {

// `name` as PREFIX + text + BEFORE + number + AFTER -> text, number; else
// name, 0 (a name ember did not make so, or a number that does not parse).
std::pair<std::string, uint64_t> split_numbered(const std::string& name, std::string_view prefix,
                                                std::string_view before, std::string_view after) {
  size_t at = name.rfind(before);
  if (at == std::string::npos || at < prefix.size() || !name.starts_with(prefix) || !name.ends_with(after))
    return {name, 0};
  uint64_t n = 0;
  const char* end = name.data() + name.size() - after.size();
  auto [p, ec] = std::from_chars(name.data() + at + before.size(), end, n);
  if (ec != std::errc() || p != end) return {name, 0};
  return {name.substr(prefix.size(), at - prefix.size()), n};
}

}  // namespace

std::pair<std::string, uint64_t> split_process_frame(const std::string& name) {
  return split_numbered(name, "", " (", ")");
}

std::string thread_frame_name(std::string_view name, uint64_t tid) {
  return "[" + std::string(name) + " tid=" + std::to_string(tid) + "]";
}

std::pair<std::string, uint64_t> split_thread_frame(const std::string& name) {
  return split_numbered(name, "[", " tid=", "]");
}

std::string series_name(const std::string& event) {
  if (event == "cpu-clock" || event == "cycles") return "process_cpu";
  if (event == "offcpu") return "off_cpu";
  if (event == "malloc" || event == "alloc" || is_inuse_type(event)) return "memory";
  return event;  // wall, lock
}

std::string inuse_type(const std::string& event) { return event + "_inuse"; }

bool is_inuse_type(std::string_view type) { return type == "malloc_inuse" || type == "alloc_inuse"; }

}  // namespace ember::flamegraph
