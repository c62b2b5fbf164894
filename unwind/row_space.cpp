#include "unwind/row_space.h"

namespace ember::unwind {

RowSpace::RowSpace(uint32_t capacity) : capacity_(capacity) {
  if (capacity) add_free(0, capacity);
}

std::optional<uint32_t> RowSpace::allocate(uint64_t rows) {
  if (rows == 0 || rows > capacity_) return std::nullopt;
  auto fit = free_by_size_.lower_bound({static_cast<uint32_t>(rows), 0});
  if (fit == free_by_size_.end()) return std::nullopt;
  auto [size, first] = *fit;
  erase_free(free_by_start_.find(first));
  if (size > rows) add_free(first + static_cast<uint32_t>(rows), size - static_cast<uint32_t>(rows));
  used_ += rows;
  return first;
}

void RowSpace::release(uint32_t first, uint32_t rows) {
  if (rows == 0) return;
  waiting_.emplace_back(first, rows);
  used_ -= rows;
  waiting_rows_ += rows;
}

void RowSpace::grace_passed() {
  for (auto [first, rows] : waiting_) add_free(first, rows);
  waiting_.clear();
  waiting_rows_ = 0;
}

uint32_t RowSpace::largest_free() const { return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first; }

void RowSpace::add_free(uint32_t first, uint32_t rows) {
  auto next = free_by_start_.lower_bound(first);
  if (next != free_by_start_.end() && first + rows == next->first) {
    rows += next->second;
    next = std::next(next);
    erase_free(std::prev(next));
  }
  if (next != free_by_start_.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == first) {
      first = before->first;
      rows += before->second;
      erase_free(before);
    }
  }
  free_by_start_.emplace(first, rows);
  free_by_size_.emplace(rows, first);
}

void RowSpace::erase_free(std::map<uint32_t, uint32_t>::iterator range) {
  free_by_size_.erase({range->second, range->first});
  free_by_start_.erase(range);
}

}  // namespace ember::unwind
