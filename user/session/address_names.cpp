#include "user/session/address_names.h"

#include <algorithm>
#include <stdexcept>

#include "symbolizer/profile_frames.h"

namespace ember {

namespace {

// User stack entries with the top bit set are the collector's tokens.
bool is_token(uint64_t ip) { return ip >> 63; }

// Addresses named per call: small enough that a pass ends near its deadline.
constexpr size_t kBatch = 4096;

}  // namespace

size_t AddressNames::Names::find(uint64_t address) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = (address * 0x9e3779b97f4a7c15ULL) >> 32 & mask;; i = (i + 1) & mask)
    if (!slots_[i].named_plus_one || slots_[i].address == address) return i;
}

uint32_t AddressNames::Names::at(uint64_t address) const {
  const Slot* s = slots_.empty() ? nullptr : &slots_[find(address)];
  if (!s || !s->named_plus_one) throw std::out_of_range("an address never named");
  return s->named_plus_one - 1;
}

void AddressNames::Names::set(uint64_t address, uint32_t named) {
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Slot> old(std::max<size_t>(64, 2 * slots_.size()));
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.named_plus_one) slots_[find(s.address)] = s;
  }
  Slot& s = slots_[find(address)];
  if (!s.named_plus_one) ++size_;
  s = {address, named + 1};
}

void AddressNames::queue_kernel(std::span<const uint64_t> ips) {
  for (size_t i = 0; i < ips.size(); ++i) {
    uint64_t a = lookup_address(ips, i);
    if (!kernel_.contains(a)) kernel_queued_.insert(a);
  }
}

void AddressNames::queue_user(uint32_t pid, uint32_t name, std::span<const uint64_t> ips) {
  const Names* named = nullptr;
  std::unordered_set<uint64_t>* queued = nullptr;
  for (size_t i = 0; i < ips.size(); ++i) {
    if (is_token(ips[i])) continue;
    if (!queued) {
      auto it = user_.find(process_key(pid, name));
      named = it == user_.end() ? nullptr : &it->second;
      queued = &user_queued_[process_key(pid, name)];
    }
    uint64_t a = lookup_address(ips, i);
    if (!named || !named->contains(a)) queued->insert(a);
  }
}

void AddressNames::store(std::span<const uint64_t> addresses, std::span<const symbolizer::Symbol> symbols,
                         Names& out) {
  for (size_t i = 0; i < addresses.size(); ++i) {
    Named n{static_cast<uint32_t>(frame_ids_.size()), 0, symbols[i].known()};
    for (const flamegraph::Frame& f : profile_frames(symbols[i])) {
      frame_ids_.push_back(frames_.intern(f));
      ++n.count;
    }
    out.set(addresses[i], static_cast<uint32_t>(named_.size()));
    named_.push_back(n);
  }
}

void AddressNames::name_queued(bool final, std::chrono::steady_clock::time_point until) {
  if (!kernel_queued_.empty() && (final || symbolizer_.kernel_ready())) {
    std::vector<uint64_t> addresses(kernel_queued_.begin(), kernel_queued_.end());
    kernel_queued_.clear();
    store(addresses, symbolizer_.symbolize_kernel(addresses), kernel_);
  }
  std::vector<uint64_t> addresses, waiting;
  for (auto it = user_queued_.begin(); it != user_queued_.end();) {
    if (std::chrono::steady_clock::now() >= until) return;
    auto& [process, queued] = *it;
    const auto pid = static_cast<uint32_t>(process >> 32);
    addresses.clear();
    waiting.clear();
    for (auto a = queued.begin(); a != queued.end() && addresses.size() < kBatch;) {
      if (final || symbolizer_.names_at_once(pid, *a)) {
        addresses.push_back(*a);
        a = queued.erase(a);
      } else {
        waiting.push_back(*a);
        ++a;
      }
    }
    if (!waiting.empty()) symbolizer_.read_ahead(pid, waiting);
    if (!addresses.empty()) store(addresses, symbolizer_.symbolize_user(pid, addresses), user_[process]);
    // A process's batches go on at the next turn, after the deadline's check.
    if (queued.empty()) it = user_queued_.erase(it);
    else if (addresses.size() < kBatch) ++it;
  }
}

const AddressNames::Names& AddressNames::user(uint32_t pid, uint32_t name) const {
  static const Names kNone;
  auto it = user_.find(process_key(pid, name));
  return it == user_.end() ? kNone : it->second;
}

void AddressNames::clear() {
  frames_ = {};
  frame_ids_.clear();
  named_.clear();
  kernel_.clear();
  user_.clear();
  kernel_queued_.clear();
  user_queued_.clear();
}

}  // namespace ember
