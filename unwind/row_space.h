// Where tables lie in the kernel's rows map (bpf/unwind.h): ranges of
// contiguous rows, handed out as binaries and JVMs' code arrive and given
// back as they leave, so that a session that sees processes come and go
// for weeks reuses the same rows.
//
// A range given back is not handed out again at once: the kernel reads
// rows without a lock, through a process entry it looked up before
// userspace replaced or deleted it, so a walk still running could read a
// table half rewritten. It waits until the caller says that every walk
// that began before it gave the range back has ended (grace_passed()).
// Rows in use are never moved.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace ember::unwind {

class RowSpace {
 public:
  explicit RowSpace(uint32_t capacity);

  // The first of `rows` (> 0) contiguous free rows, at the start of the
  // smallest free range that holds them (best fit: large ranges stay whole
  // for large tables). None if no free range is large enough.
  std::optional<uint32_t> allocate(uint64_t rows);
  // Gives back a range allocate() returned; it is free again after the
  // next grace_passed().
  void release(uint32_t first, uint32_t rows);
  // Every walk that could read a range given back before now has ended.
  void grace_passed();

  uint32_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }              // handed out, not given back
  uint64_t waiting() const { return waiting_rows_; }   // given back, until grace_passed()
  size_t free_ranges() const { return free_by_start_.size(); }
  uint32_t largest_free() const;

 private:
  // Marks [first, first + rows) free, merged with free neighbours.
  void add_free(uint32_t first, uint32_t rows);
  void erase_free(std::map<uint32_t, uint32_t>::iterator range);

  uint32_t capacity_;
  uint64_t used_ = 0, waiting_rows_ = 0;
  std::map<uint32_t, uint32_t> free_by_start_;            // first -> rows
  std::set<std::pair<uint32_t, uint32_t>> free_by_size_;  // (rows, first)
  std::vector<std::pair<uint32_t, uint32_t>> waiting_;    // (first, rows)
};

}  // namespace ember::unwind
