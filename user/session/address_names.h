// The names of a window's addresses, each distinct address named once.
// The collector queues the addresses of each new stack as it arrives, and
// name_queued() names them while the recording goes on: when it stops,
// little is left to name (a whole host's 30 s took 0.5 s of symbolizing
// at the stop when it all waited for it, most of it reading binaries'
// symbols and DWARF).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "flamegraph/profile.h"
#include "symbolizer/symbolizer.h"

namespace ember {

class AddressNames {
 public:
  explicit AddressNames(symbolizer::Symbolizer& symbolizer) : symbolizer_(symbolizer) {}

  // An address's frames (an inlined call adds one): frame_ids()[first, first + count), outermost first.
  struct Named {
    uint32_t first = 0, count = 0;
    bool known = false;
  };

  // The address to name for frame `i` of a stack, leaf first: return
  // addresses point after the call, and naming the call needs -1; the leaf
  // is the interrupted instruction and stays as it is.
  static uint64_t lookup_address(std::span<const uint64_t> ips, size_t i) { return i == 0 ? ips[i] : ips[i] - 1; }

  // A stack's addresses, leaf first as sampled. User stacks may hold
  // tokens (the top bit set: JIT and runtime frames), which are skipped.
  // A user stack's names are kept by process and process name: an exec
  // (a new name) maps other code, perhaps at the same addresses.
  void queue_kernel(std::span<const uint64_t> ips);
  void queue_user(uint32_t pid, uint32_t name, std::span<const uint64_t> ips);
  // Names what is queued, a process's addresses at a time, until `until`.
  // While the recording goes on (`final` false) nothing is read here: an
  // address waits while its file's symbols and DWARF are read on the
  // symbolizer's loader thread (Symbolizer::read_ahead), or when the
  // process's last snapshot does not map it to a file (code mapped since,
  // or JIT code whose perf map grows); kernel addresses wait for the
  // kernel's symbols. `final` names them all as they are.
  void name_queued(bool final, std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max());

  // The names of the kernel's addresses, or of a process's, as indexes
  // into named(): looked up by lookup_address(), once queued and named.
  // Open addressing: a graph's build looks up each frame of each stack (a
  // busy host's 30 s: 1.1 million), and a node map's hashing and pointer
  // chasing were a third of the build (its stacks loop 158-190 ms -> 111-163
  // ms, busy host, 20 s at 999 Hz, four runs each).
  class Names {
   public:
    bool contains(uint64_t address) const { return !slots_.empty() && slots_[find(address)].named_plus_one != 0; }
    // The name of an address stored before (else std::out_of_range).
    uint32_t at(uint64_t address) const;
    void set(uint64_t address, uint32_t named);
    void clear() { *this = {}; }

   private:
    struct Slot {
      uint64_t address = 0;
      uint32_t named_plus_one = 0;  // 0: free
    };
    size_t find(uint64_t address) const;  // its slot, or the free one where it goes
    std::vector<Slot> slots_;
    size_t size_ = 0;
  };
  const Names& kernel() const { return kernel_; }
  const Names& user(uint32_t pid, uint32_t name) const;
  const Named& named(uint32_t index) const { return named_[index]; }
  size_t named_count() const { return named_.size(); }
  const std::vector<flamegraph::FrameId>& frame_ids() const { return frame_ids_; }
  // The frames named so far, by id (a profile used as a frame table).
  const flamegraph::Frame& frame(flamegraph::FrameId id) const { return frames_.frames()[id]; }
  size_t frame_count() const { return frames_.frames().size(); }

  // A window started: its stacks are queued afresh.
  void clear();

 private:
  static uint64_t process_key(uint32_t pid, uint32_t name) { return uint64_t{pid} << 32 | name; }
  void store(std::span<const uint64_t> addresses, std::span<const symbolizer::Symbol> symbols, Names& out);

  symbolizer::Symbolizer& symbolizer_;
  flamegraph::Profile frames_;
  std::vector<flamegraph::FrameId> frame_ids_;
  std::vector<Named> named_;
  Names kernel_;
  std::unordered_map<uint64_t, Names> user_;  // by process_key
  std::unordered_set<uint64_t> kernel_queued_;
  std::unordered_map<uint64_t, std::unordered_set<uint64_t>> user_queued_;
};

}  // namespace ember
