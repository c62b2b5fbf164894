#include "user/heap/dominators.h"

#include <bit>

namespace ember::heap {
namespace {

// One bit per position.
class Bits {
 public:
  explicit Bits(size_t n) : words_((n + 63) / 64) {}
  void set(size_t k) { words_[k / 64] |= uint64_t{1} << (k % 64); }
  bool test(size_t k) const { return words_[k / 64] >> (k % 64) & 1; }

  // The bits set, numbered 0, 1, ... in position order: rank(k) counts
  // those before k. Call index() once the bits are all set.
  void index() {
    rank_.resize(words_.size());
    uint32_t before = 0;
    for (size_t w = 0; w < words_.size(); ++w) {
      rank_[w] = before;
      before += static_cast<uint32_t>(std::popcount(words_[w]));
    }
    count_ = before;
  }
  uint32_t rank(size_t k) const {
    return rank_[k / 64] + static_cast<uint32_t>(std::popcount(words_[k / 64] & ((uint64_t{1} << (k % 64)) - 1)));
  }
  uint32_t count() const { return count_; }

 private:
  std::vector<uint64_t> words_;
  std::vector<uint32_t> rank_;  // per word: the bits set before it
  uint32_t count_ = 0;
};

}  // namespace

DominatorTree dominator_tree(size_t nodes, uint32_t root, const SuccessorsOf& successors,
                             const std::function<void()>& successors_done, const EachEdge& edges) {
  constexpr uint32_t kUnseen = UINT32_MAX;
  DominatorTree t;
  // Depth-first preorder, iteratively: a frame is a node and how many of
  // its successors have been looked at. The edges it meets also tell which
  // positions the root references (`rooted`), and which have a referrer
  // besides their DFS parent (`shared`): only the shared ones, not rooted,
  // need their predecessors listed.
  std::vector<uint32_t> number(nodes, kUnseen);
  std::vector<uint32_t> parent;  // per position: its DFS parent's position
  // Never regrown (a copy would hold both for a while); the pages the
  // nodes reached do not need stay untouched.
  t.order.reserve(nodes);
  parent.reserve(nodes);
  Bits rooted(nodes), shared(nodes);
  {
    struct Frame {
      uint32_t node, next;
    };
    std::vector<Frame> stack{{root, 0}};
    number[root] = 0;
    t.order.push_back(root);
    parent.push_back(0);
    while (!stack.empty()) {
      Successors succ = successors(stack.back().node);
      if (stack.back().next == succ.size()) {
        stack.pop_back();
        continue;
      }
      uint32_t w = succ[stack.back().next++];
      bool from_root = stack.back().node == root;
      if (number[w] == kUnseen) {
        parent.push_back(number[stack.back().node]);
        number[w] = static_cast<uint32_t>(t.order.size());
        t.order.push_back(w);
        stack.push_back({w, 0});
      } else if (!from_root) {
        shared.set(number[w]);
      }
      if (from_root) rooted.set(number[w]);
    }
  }
  const size_t m = t.order.size();
  if (successors_done) successors_done();

  // The shared positions' predecessors (from the nodes reached), counted,
  // then placed: preds[pred_at[r] .. pred_at[r + 1]) are those of the
  // shared position of rank r.
  auto listed = [&](uint32_t from, uint32_t to) {
    return number[from] != kUnseen && number[to] != kUnseen && shared.test(number[to]) && !rooted.test(number[to]);
  };
  shared.index();
  std::vector<uint32_t> pred_at(shared.count() + 1, 0), preds;
  edges([&](uint32_t from, uint32_t to) {
    if (listed(from, to)) ++pred_at[shared.rank(number[to]) + 1];
  });
  for (size_t r = 1; r < pred_at.size(); ++r) pred_at[r] += pred_at[r - 1];
  preds.resize(pred_at.back());
  edges([&](uint32_t from, uint32_t to) {
    if (listed(from, to)) preds[pred_at[shared.rank(number[to])]++] = number[from];
  });
  // Each cursor has moved to the next list's start.
  for (size_t r = pred_at.size() - 1; r > 0; --r) pred_at[r] = pred_at[r - 1];
  pred_at[0] = 0;
  std::vector<uint32_t>().swap(number);

  // Semidominators. `ancestor` starts as the DFS parent and is compressed;
  // a position is linked into the forest once processed (>= last_linked).
  t.idom = parent;
  std::vector<uint32_t>& ancestor = parent;
  std::vector<uint32_t> semi(m), label(m), path;
  for (size_t i = 0; i < m; ++i) semi[i] = label[i] = static_cast<uint32_t>(i);
  auto eval = [&](uint32_t v, uint32_t last_linked) {
    if (ancestor[v] < last_linked) return label[v];
    path.clear();
    do {
      path.push_back(v);
      v = ancestor[v];
    } while (ancestor[v] >= last_linked);
    uint32_t p = v, p_label = label[v];
    while (!path.empty()) {
      uint32_t x = path.back();
      path.pop_back();
      ancestor[x] = ancestor[p];
      if (semi[p_label] < semi[label[x]])
        label[x] = p_label;
      else
        p_label = label[x];
      p = x;
    }
    return label[p];
  };
  for (size_t i = m; i-- > 1;) {
    // The root and the parent are predecessors, and the lowest there can be
    // for a position that has no other.
    uint32_t s = rooted.test(i) ? 0 : t.idom[i];
    if (s && shared.test(i)) {
      uint32_t r = shared.rank(i);
      for (uint32_t k = pred_at[r]; k < pred_at[r + 1]; ++k) {
        uint32_t u = eval(preds[k], static_cast<uint32_t>(i + 1));
        if (semi[u] < s) s = semi[u];
      }
    }
    semi[i] = s;
  }
  // Each immediate dominator: the nearest ancestor of the parent (on the
  // tree built so far) at or above the semidominator.
  for (size_t i = 1; i < m; ++i) {
    uint32_t d = t.idom[i];
    while (d > semi[i]) d = t.idom[d];
    t.idom[i] = d;
  }
  return t;
}

}  // namespace ember::heap
