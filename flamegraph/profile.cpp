#include "flamegraph/profile.h"

#include <algorithm>
#include <functional>

namespace ember::flamegraph {

size_t Profile::FrameHash::operator()(const Frame& f) const {
  size_t h = std::hash<std::string>{}(f.name);
  h ^= std::hash<std::string>{}(f.module) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h ^ static_cast<size_t>(f.kind);
}

size_t Profile::IdsHash::operator()(const std::vector<FrameId>& ids) const {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the ids
  for (FrameId id : ids) h = (h ^ id) * 1099511628211ULL;
  return static_cast<size_t>(h);
}

FrameId Profile::intern(const Frame& frame) {
  auto [it, inserted] = frame_ids_.try_emplace(frame, static_cast<FrameId>(frames_.size()));
  if (inserted) frames_.push_back(frame);
  return it->second;
}

void Profile::add_from(const Profile& other, std::span<const FrameId> frames, uint64_t weight) {
  std::vector<FrameId> here;
  here.reserve(frames.size());
  for (FrameId id : frames) here.push_back(intern(other.frames()[id]));
  add(here, weight);
}

void Profile::add(std::span<const FrameId> frames, uint64_t weight) {
  if (weight == 0) return;
  std::vector<FrameId> key(frames.begin(), frames.end());
  auto [it, inserted] = stack_index_.try_emplace(std::move(key), stacks_.size());
  if (inserted) stacks_.push_back(Stack{it->first, 0});
  stacks_[it->second].weight += weight;
  total_ += weight;
}

std::vector<const Stack*> Profile::sorted_stacks() const {
  std::vector<const Stack*> out;
  out.reserve(stacks_.size());
  for (const Stack& s : stacks_) out.push_back(&s);
  std::sort(out.begin(), out.end(), [](const Stack* a, const Stack* b) { return a->frames < b->frames; });
  return out;
}

}  // namespace ember::flamegraph
