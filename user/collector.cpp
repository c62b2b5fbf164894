#include "user/collector.h"

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

}  // namespace

size_t Collector::KeyHash::operator()(const Key& k) const {
  uint64_t h = 0;
  for (uint32_t v : {k.pid, k.tid, k.process_name, k.thread_name, k.ustack, k.kstack})
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

uint32_t Collector::StackTable::intern(const __u64* ips, size_t n) {
  std::string_view bytes(reinterpret_cast<const char*>(ips), n * sizeof(uint64_t));
  if (auto it = ids_.find(bytes); it != ids_.end()) return it->second;
  auto it = ids_.emplace(bytes, static_cast<uint32_t>(by_id_.size())).first;
  by_id_.push_back(&it->first);
  return it->second;
}

std::span<const uint64_t> Collector::StackTable::get(uint32_t id) const {
  const std::string& s = *by_id_[id];
  return {reinterpret_cast<const uint64_t*>(s.data()), s.size() / sizeof(uint64_t)};
}

Collector::Collector(CollectorOptions options, symbolizer::Symbolizer& symbolizer)
    : options_(std::move(options)), symbolizer_(symbolizer) {}

void Collector::add(const ember_sample& s) {
  uint32_t process = name_id(s.process_comm), thread = name_id(s.comm);
  if (!comm_matches_[process] && !comm_matches_[thread]) {
    ++stats_.comm_filtered;
    return;
  }
  if (s.ustack_len >= options_.max_depth || s.kstack_len >= options_.max_depth) ++stats_.truncated;

  Key key{s.pid, s.tid, process, thread, ustacks_.intern(s.ips, s.ustack_len),
          kstacks_.intern(s.ips + s.ustack_len, s.kstack_len)};
  ++counts_[key];
  ++stats_.samples;
  // Snapshot mappings now, while the process surely lives; again when its
  // name changes, which is how an exec shows (a new image is mapped).
  auto [it, first] = process_name_.try_emplace(s.pid, process);
  if ((first || it->second != process) && s.pid != 0 && s.ustack_len > 0) symbolizer_.snapshot_process(s.pid);
  it->second = process;
}

void Collector::refresh_processes() {
  for (const auto& [pid, name] : process_name_)
    if (symbolizer_.has_process(pid)) symbolizer_.snapshot_process(pid);
}

flamegraph::Profile Collector::build() {
  flamegraph::Profile profile;

  // Name every distinct address once: user addresses per process, kernel
  // addresses for all.
  struct Named {
    FrameId id;
    bool known;
  };
  std::unordered_map<uint64_t, Named> kernel_names;
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, Named>> user_names;
  {
    std::unordered_map<uint32_t, std::unordered_set<uint64_t>> user_addrs;
    std::unordered_set<uint64_t> kernel_addrs;
    for (const auto& [key, count] : counts_) {
      auto u = ustacks_.get(key.ustack), k = kstacks_.get(key.kstack);
      if (!options_.kernel_only)
        for (size_t i = 0; i < u.size(); ++i) user_addrs[key.pid].insert(lookup_address(u, i));
      if (!options_.user_only)
        for (size_t i = 0; i < k.size(); ++i) kernel_addrs.insert(lookup_address(k, i));
    }
    auto name_all = [&](const std::unordered_set<uint64_t>& set, auto&& symbolize,
                        std::unordered_map<uint64_t, Named>& out) {
      std::vector<uint64_t> addrs(set.begin(), set.end());
      std::vector<symbolizer::Symbol> symbols = symbolize(addrs);
      for (size_t i = 0; i < addrs.size(); ++i) {
        out[addrs[i]] = Named{profile.intern(symbols[i].frame), symbols[i].known};
        if (!symbols[i].known) ++stats_.unknown_addresses;
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
    frames.clear();
    bool unknown = false;
    const std::string& process = names_[key.process_name];
    std::string root = options_.pid_frames ? process + " (" + std::to_string(key.pid) + ")" : process;
    frames.push_back(profile.intern(Frame{root, FrameKind::Process, {}}));
    if (options_.thread_frames)
      frames.push_back(profile.intern(
          Frame{"[" + names_[key.thread_name] + " tid=" + std::to_string(key.tid) + "]", FrameKind::Thread, {}}));
    auto append = [&](std::span<const uint64_t> ips, const std::unordered_map<uint64_t, Named>& names) {
      for (size_t i = ips.size(); i-- > 0;) {
        const Named& n = names.at(lookup_address(ips, i));
        frames.push_back(n.id);
        unknown |= !n.known;
      }
    };
    if (!options_.kernel_only) append(ustacks_.get(key.ustack), user_names[key.pid]);
    if (!options_.user_only) append(kstacks_.get(key.kstack), kernel_names);
    profile.add(frames, count);
    if (unknown) stats_.unknown_samples += count;
  }
  stats_.processes = process_name_.size();
  stats_.unique_stacks = profile.stacks().size();
  return profile;
}

}  // namespace ember
