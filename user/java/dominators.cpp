#include "user/java/dominators.h"

namespace ember::heap {

DominatorTree dominator_tree(size_t nodes, uint32_t root, const Successors& successors,
                             const std::function<void()>& successors_done) {
  constexpr uint32_t kUnseen = UINT32_MAX;
  DominatorTree t;
  // Depth-first preorder, iteratively: a frame is a node and how many of
  // its successors have been looked at.
  std::vector<uint32_t> number(nodes, kUnseen);
  std::vector<uint32_t> parent;  // per position: its DFS parent's position
  {
    struct Frame {
      uint32_t node, next;
    };
    std::vector<Frame> stack{{root, 0}};
    number[root] = 0;
    t.order.push_back(root);
    parent.push_back(0);
    while (!stack.empty()) {
      auto succ = successors(stack.back().node);
      if (stack.back().next == succ.size()) {
        stack.pop_back();
        continue;
      }
      uint32_t w = succ[stack.back().next++];
      if (number[w] != kUnseen) continue;
      parent.push_back(number[stack.back().node]);
      number[w] = static_cast<uint32_t>(t.order.size());
      t.order.push_back(w);
      stack.push_back({w, 0});
    }
  }
  const size_t m = t.order.size();

  // Predecessors by position: counted into ends, then placed backwards so
  // that pred_at[k] .. pred_at[k + 1] are k's.
  std::vector<uint32_t> pred_at(m + 1, 0), preds;
  for (size_t i = 0; i < m; ++i)
    for (uint32_t w : successors(t.order[i])) ++pred_at[number[w]];
  for (size_t k = 1; k <= m; ++k) pred_at[k] += pred_at[k - 1];
  preds.resize(pred_at[m]);
  for (size_t i = m; i-- > 0;)
    for (uint32_t w : successors(t.order[i])) preds[--pred_at[number[w]]] = static_cast<uint32_t>(i);
  pred_at[m] = static_cast<uint32_t>(preds.size());
  std::vector<uint32_t>().swap(number);
  if (successors_done) successors_done();

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
    uint32_t s = t.idom[i];  // the parent is a predecessor
    for (uint32_t k = pred_at[i]; k < pred_at[i + 1]; ++k) {
      uint32_t u = eval(preds[k], static_cast<uint32_t>(i + 1));
      if (semi[u] < s) s = semi[u];
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
