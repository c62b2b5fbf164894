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

// The successors of a node.
using Successors = std::function<std::span<const uint32_t>(uint32_t)>;

// By the Semi-NCA algorithm (Georgiadis 2005, as LLVM builds its dominator
// trees): semidominators as Lengauer and Tarjan define them, found with a
// path-compressed forest, then each immediate dominator as the nearest
// common ancestor of its semidominator's and its parent's. Near-linear in
// practice; no recursion, so a chain of millions of objects is fine.
// Memory: 24 bytes per node reached and 4 per edge besides the result,
// whose 8 bytes per node reached come first.
// `successors_done`, if given, is called once the successors will not be
// asked for again: their memory may go.
DominatorTree dominator_tree(size_t nodes, uint32_t root, const Successors& successors,
                             const std::function<void()>& successors_done = {});

}  // namespace ember::heap
