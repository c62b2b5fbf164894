// Immediate dominators of a directed graph: node d dominates node n when
// every path from the root to n passes through d. For a heap, the objects
// an object dominates are what the GC would free with it: its retained size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ember::heap {

struct DominatorTree {
  // The nodes reachable from the root, in depth-first preorder: order[0]
  // is the root. A node's dominators come before it.
  std::vector<uint32_t> order;
  // Per position in `order`: the position of its immediate dominator
  // (the root's is itself, 0).
  std::vector<uint32_t> idom;
};

// A node's successors: `first` unless it is kNone, then `rest`. (A heap
// object's reference to its class is kept apart from its others: every
// object has one, and storing it would cost 4 bytes an object.)
struct Successors {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t first = kNone;
  std::span<const uint32_t> rest;

  size_t size() const { return rest.size() + (first != kNone); }
  uint32_t operator[](size_t k) const { return first == kNone ? rest[k] : k ? rest[k - 1] : first; }
  template <class F>
  void for_each(F f) const {
    if (first != kNone) f(first);
    for (uint32_t w : rest) f(w);
  }
};
using SuccessorsOf = std::function<Successors(uint32_t)>;
// Hands every edge of the graph to a visitor, as (from, to).
using EachEdge = std::function<void(const std::function<void(uint32_t from, uint32_t to)>&)>;

// By the Semi-NCA algorithm (Georgiadis 2005, as LLVM builds its dominator
// trees): semidominators as Lengauer and Tarjan define them, found with a
// path-compressed forest, then each immediate dominator as the nearest
// common ancestor of its semidominator's and its parent's. Near-linear in
// practice; no recursion, so a chain of millions of objects is fine.
//
// The graph comes twice: node by node (`successors`) for a depth-first
// walk, then, once `successors_done` says the successors will not be asked
// for again (their memory may go), edge by edge (`edges`, called twice) for
// the predecessor lists. A heap gives the first from its graph in memory,
// the second from its stream: the two are not held at once.
//
// Memory: 12 bytes per node reached besides the result's 8, and 4 per
// edge into a node that has two referrers or more, the root not one of
// them: in a heap, a minority (most objects have a single referrer).
DominatorTree dominator_tree(size_t nodes, uint32_t root, const SuccessorsOf& successors,
                             const std::function<void()>& successors_done, const EachEdge& edges);

}  // namespace ember::heap
