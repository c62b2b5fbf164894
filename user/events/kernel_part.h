// The kernel side of an event, or of the events that share it (offcpu,
// wall and lock share sched_switch): which programs of the BPF object it
// loads, their settings, and how they attach. Each part lives beside its
// events, its programs in bpf/. The Sampler loads the one object with the
// programs of the parts a recording chose, then attaches each part; the
// parts' programs record nothing until it is armed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <vector>

struct bpf_link;
struct profile_bpf;  // the skeleton, build/profile.skel.h

namespace ember {

class KernelPart {
 public:
  virtual ~KernelPart();
  // Before the object loads (every program is off until a part turns it
  // on): turns its programs on, writes their settings (rodata), sizes its
  // maps; warnings for what it leaves out on this kernel.
  virtual std::expected<void, std::string> prepare(profile_bpf& skel, std::vector<std::string>& warnings) = 0;
  // Once the object is loaded and the targets set: attaches its programs.
  virtual std::expected<void, std::string> attach(profile_bpf& skel, std::vector<std::string>& warnings) = 0;
  // Detaches them (again: nothing).
  virtual void detach();
  // The samples ring buffer its records need at least on `cpus` CPUs:
  // about half a second of its worst-case traffic (records_bytes).
  virtual uint64_t ring_bytes(int cpus) const = 0;

 protected:
  // Holds `link` until detach(); false if it is null (the attach failed, errno says why).
  bool keep(bpf_link* link);

 private:
  std::vector<bpf_link*> links_;
};

using KernelParts = std::vector<std::shared_ptr<KernelPart>>;

// The part of type P among `parts`, or null.
template <class P>
P* find_part(const KernelParts& parts) {
  for (const auto& p : parts)
    if (auto* found = dynamic_cast<P*>(p.get())) return found;
  return nullptr;
}

// The part of type P among `parts`, added if absent: events that share
// kernel code merge their asks into one part.
template <class P>
P& kernel_part(KernelParts& parts) {
  if (P* found = find_part<P>(parts)) return *found;
  auto part = std::make_shared<P>();
  P& ref = *part;
  parts.push_back(std::move(part));
  return ref;
}

// Half a second of `per_second` records a second on each of `cpus` CPUs,
// every record with both stacks full.
uint64_t records_bytes(uint64_t per_second, int cpus);

// The ring buffer of a part whose records come in bursts (context
// switches, allocations) rather than at a rate: 4 MiB, and on a large host
// what 99 records a second on every CPU take.
inline uint64_t burst_ring_bytes(int cpus) { return std::max<uint64_t>(4u << 20, records_bytes(99, cpus)); }

// "No such file or directory" for errno values, negative ones too.
std::string errno_text(int err);

}  // namespace ember
