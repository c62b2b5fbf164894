#include "user/heap/heap_report.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <span>
#include <unordered_map>

#include "user/heap/dominators.h"

namespace ember::heap {
namespace {

// Going down from a big object, a child that retains this much of it is
// where the memory is, not the object itself.
constexpr double kAccumulation = 0.8;
// Root children retaining less than this share of the heap are not looked into.
constexpr double kMinRetainerShare = 0.01;
// Where no child retains kAccumulation of an object, its children that each
// retain this share of it, together kFieldsHold of it, are places of their own.
constexpr double kFieldShare = 0.1;
constexpr double kFieldsHold = 0.5;
// The dominator tree's profile: deeper chains end in their last frame.
constexpr size_t kMaxProfileDepth = 64;
constexpr size_t kHoldsShown = 3;
// A label for a frame: a class id, or a java.lang.Class object's own id
// with this bit (it is shown as the class it stands for).
constexpr uint32_t kMirror = 1u << 31;

uint32_t label_of(const HeapGraph& g, ObjectId o) {
  return g.find_class(o) ? (o | kMirror) : g.class_of(o);
}

std::string label_name(const HeapGraph& g, uint32_t label) {
  if (label & kMirror) return "class " + std::string(g.class_name(label & ~kMirror));
  return std::string(g.class_name(label));
}

// The first reference of the GC roots to `object`.
const Reference* root_reference(const HeapGraph& g, ObjectId object) {
  for (const Reference& r : g.roots())
    if (r.object == object) return &r;
  return nullptr;
}

std::string describe_root(const HeapGraph& g, const Reference& r) {
  std::string thread = r.thread ? std::string(g.thread_name(r.thread)) : "";
  switch (r.kind) {
    case kStackLocal:
    case kJniLocal:
      return std::string(r.kind == kJniLocal ? "JNI local" : "local") + " in " +
             std::string(g.method_name(r.method)) + (thread.empty() ? "" : " (thread \"" + thread + "\")");
    case kNativeStack:
    case kThreadBlock:
      return std::string(kind_name(r.kind)) + (thread.empty() ? "" : " of thread \"" + thread + "\"");
    case kThreadRoot:
      return "thread" + (thread.empty() ? std::string() : " \"" + thread + "\"");
    default:
      return std::string(kind_name(r.kind));
  }
}

// A path's steps as describe_path names them, each with the position in
// `chain` of the object it names (the root's: 0). A static field starts
// the path again: what holds a class (its loader) says little.
// `indices`: array elements by their index ("[12]"), else all as "[]".
struct PathStep {
  std::string text;
  size_t at = 0;
};
std::vector<PathStep> path_steps(const HeapGraph& g, const Reference* root, const std::vector<ObjectId>& chain,
                                 const std::vector<Reference>& links, bool indices) {
  std::vector<PathStep> steps;
  if (root) steps.push_back({describe_root(g, *root), 0});
  for (size_t i = 0; i < chain.size(); ++i) {
    ObjectId o = chain[i];
    std::string name = label_name(g, label_of(g, o));
    if (i + 1 == chain.size()) {
      steps.push_back({name, i});
      break;
    }
    const Reference& link = links[i];
    switch (link.kind) {
      case kStaticField: {
        std::string_view field = g.static_field_name(o, link.index);
        steps.assign(1, {"static " + std::string(g.class_name(o)) + "." +
                             (field.empty() ? "#" + std::to_string(link.index) : std::string(field)),
                         i});
        break;
      }
      case kField: {
        std::string_view field = g.field_name(g.class_of(o), link.index);
        steps.push_back({name + "." + (field.empty() ? "#" + std::to_string(link.index) : std::string(field)), i});
        break;
      }
      case kArrayElement:
        steps.push_back({name + (indices ? " [" + std::to_string(link.index) + "]" : " []"), i});
        break;
      default:
        steps.push_back({name + " (" + std::string(kind_name(link.kind)) + ")", i});
        break;
    }
  }
  return steps;
}

// `chain`: a root's object first, then each object it leads to; `links`:
// how each holds the next. "static com.acme.Cache.ENTRIES → java.util.HashMap.table → ...".
std::string describe_path(const HeapGraph& g, const Reference* root, const std::vector<ObjectId>& chain,
                          const std::vector<Reference>& links) {
  std::string out;
  for (const PathStep& s : path_steps(g, root, chain, links, true)) out += (out.empty() ? "" : " → ") + s.text;
  return out;
}

Successors successors(const HeapGraph& g, ObjectId id) { return {g.class_ref(id), g.refs(id)}; }

// The dominator tree, by position in its depth-first walk: position 0
// stands for the roots; p's children are children[child_at[p] ..
// child_at[p + 1]), each after p.
struct Dominated {
  std::vector<uint32_t> order;  // the object at each position
  std::vector<uint32_t> child_at, children;
  std::vector<uint64_t> retained;  // the bytes each position keeps alive

  std::span<const uint32_t> children_of(uint32_t p) const {
    return {children.data() + child_at[p], children.data() + child_at[p + 1]};
  }
  // Its own bytes: what it retains but its children do.
  uint64_t shallow(uint32_t p) const {
    uint64_t bytes = retained[p];
    for (uint32_t c : children_of(p)) bytes -= retained[c];
    return bytes;
  }
};

// The dominator tree of the heap and what each object retains. The
// references are needed (and the classes: each object references its own)
// in memory for the tree's depth-first walk, from the dump after; `g`
// holds the sizes again at the end.
std::expected<Dominated, std::string> dominate(HeapGraph& g, std::string_view dump, const DoneWith& done_with) {
  g.drop(HeapGraph::kSizes);
  std::expected<void, std::string> edges_read;
  DominatorTree t = dominator_tree(
      g.size(), kRoots, [&](uint32_t n) { return successors(g, n); }, [&] { g.drop(HeapGraph::kReferences); },
      [&](const std::function<void(uint32_t, uint32_t)>& edge) {
        if (edges_read) edges_read = g.for_each_reference(dump, edge, done_with);
      });
  if (!edges_read) return std::unexpected(edges_read.error());
  if (auto r = g.reload(dump, HeapGraph::kSizes, done_with); !r) return std::unexpected(r.error());
  const size_t m = t.order.size();
  Dominated d;
  d.child_at.assign(m + 1, 0);
  d.children.resize(m ? m - 1 : 0);
  for (size_t i = 1; i < m; ++i) ++d.child_at[t.idom[i]];
  for (size_t k = 1; k <= m; ++k) d.child_at[k] += d.child_at[k - 1];
  for (size_t i = m; i-- > 1;) d.children[--d.child_at[t.idom[i]]] = static_cast<uint32_t>(i);
  std::vector<uint32_t>().swap(t.idom);
  d.retained.resize(m);
  for (size_t i = m; i-- > 0;) {
    uint64_t bytes = i ? g.shallow(t.order[i]) : 0;
    for (uint32_t c : d.children_of(static_cast<uint32_t>(i))) bytes += d.retained[c];
    d.retained[i] = bytes;
  }
  d.order = std::move(t.order);
  return d;
}

// One walk down the dominator tree: each class's retained bytes (`classes`
// holds their instances and shallow bytes), and the tree as a profile (a
// trie of labels, a chain of one label merged).
void walk_classes(const HeapGraph& g, const Dominated& d, std::unordered_map<ObjectId, ClassSize>& classes,
                  flamegraph::Profile& profile) {
  std::unordered_map<ObjectId, uint32_t> active;  // instances of the class on the way down
  struct TrieNode {
    uint32_t parent, label, depth;
    uint64_t self;
  };
  std::vector<TrieNode> trie{{0, 0, 0, 0}};
  std::unordered_map<uint64_t, uint32_t> trie_index;
  struct Visit {
    uint32_t pos, next, trie;
  };
  std::vector<Visit> stack{{0, d.child_at[0], 0}};
  while (!stack.empty()) {
    Visit& v = stack.back();
    if (v.next == d.child_at[v.pos + 1]) {
      if (v.pos) --active[g.class_of(d.order[v.pos])];
      stack.pop_back();
      continue;
    }
    uint32_t c = d.children[v.next++];
    ObjectId o = d.order[c];
    uint32_t& on_path = active[g.class_of(o)];
    if (on_path++ == 0) classes[g.class_of(o)].retained += d.retained[c];
    uint32_t label = label_of(g, o), node = v.trie;
    if (trie[node].label != label && trie[node].depth < kMaxProfileDepth) {
      auto [it, added] = trie_index.try_emplace(uint64_t{node} << 32 | label, static_cast<uint32_t>(trie.size()));
      if (added) trie.push_back({node, label, trie[node].depth + 1, 0});
      node = it->second;
    }
    trie[node].self += d.shallow(c);
    stack.push_back({c, d.child_at[c], node});
  }
  profile.event = "heap";
  profile.unit = "bytes";
  std::unordered_map<uint32_t, flamegraph::FrameId> frame_of;
  std::vector<flamegraph::FrameId> frames;
  for (size_t n = 1; n < trie.size(); ++n) {
    if (!trie[n].self) continue;
    frames.clear();
    for (uint32_t k = static_cast<uint32_t>(n); k; k = trie[k].parent) {
      auto [it, added] = frame_of.try_emplace(trie[k].label, 0);
      if (added) it->second = profile.intern({label_name(g, trie[k].label), flamegraph::FrameKind::Alloc, ""});
      frames.push_back(it->second);
    }
    std::reverse(frames.begin(), frames.end());
    profile.add(frames, trie[n].self);
  }
}

// Where memory accumulates: down from the roots' biggest children to
// where it spreads, `top` places at most, the biggest first.
std::vector<uint32_t> accumulation_points(const HeapGraph& g, const Dominated& d, size_t top) {
  const std::vector<uint64_t>& retained = d.retained;
  std::span<const uint32_t> roots = d.children_of(0);
  std::vector<uint32_t> tops(roots.begin(), roots.end());
  std::sort(tops.begin(), tops.end(), [&](uint32_t x, uint32_t y) { return retained[x] > retained[y]; });
  std::vector<uint32_t> points;
  const double min_retained = kMinRetainerShare * static_cast<double>(retained[0]);
  // Down from p while one child retains most of it.
  auto accumulation = [&](uint32_t p) {
    for (uint32_t c : d.children_of(p))
      if (retained[c] >= kAccumulation * static_cast<double>(retained[p])) return c;
    return p;
  };
  // A child of p that retains a big share of it: a place of its own
  // beside p's biggest (a growing list beside a bigger cache).
  auto big = [&](uint32_t p, uint32_t c) {
    return retained[c] >= kFieldShare * static_cast<double>(retained[p]) && retained[c] >= min_retained;
  };
  // An object or class whose memory is in a few of its fields, none holding
  // most of it (two statics of one class): those fields, each a place of
  // its own with its path, rather than the holder alone; none where the
  // fields do not hold most of it. An array's elements are its
  // accumulation: it stays one place.
  auto big_fields = [&](uint32_t p) {
    std::vector<uint32_t> fields;
    if (g.class_name(g.class_of(d.order[p])).ends_with("[]")) return fields;
    uint64_t in_fields = 0;
    for (uint32_t c : d.children_of(p))
      if (big(p, c)) {
        fields.push_back(c);
        in_fields += retained[c];
      }
    if (fields.size() < 2 || in_fields < kFieldsHold * static_cast<double>(retained[p])) fields.clear();
    return fields;
  };
  for (uint32_t top_child : tops) {
    if (points.size() >= top || retained[top_child] < min_retained) break;
    for (std::vector<uint32_t> from{top_child}; !from.empty() && points.size() < top;) {
      uint32_t p = from.back();
      from.pop_back();
      for (uint32_t q = accumulation(p); q != p; q = accumulation(p)) {
        for (uint32_t c : d.children_of(p))
          if (c != q && big(p, c)) from.push_back(c);
        p = q;
      }
      if (std::vector<uint32_t> fields = big_fields(p); !fields.empty()) {
        std::sort(fields.begin(), fields.end(), [&](uint32_t x, uint32_t y) { return retained[x] < retained[y]; });
        from.insert(from.end(), fields.begin(), fields.end());  // the biggest next
      } else if (std::find(points.begin(), points.end(), p) == points.end()) {
        points.push_back(p);
      }
    }
  }
  std::sort(points.begin(), points.end(), [&](uint32_t x, uint32_t y) { return retained[x] > retained[y]; });
  return points;
}

// The retainer at position p, with what it holds: the classes of the
// objects it dominates.
Retainer retainer_at(const HeapGraph& g, const Dominated& d, uint32_t p) {
  Retainer r;
  r.object = d.order[p];
  r.name = label_name(g, label_of(g, r.object));
  r.retained = d.retained[p];
  std::unordered_map<ObjectId, ClassSize> held;
  std::vector<uint32_t> walk{p};
  while (!walk.empty()) {
    uint32_t q = walk.back();
    walk.pop_back();
    ++r.objects;
    ClassSize& c = held[g.class_of(d.order[q])];
    ++c.instances;
    c.shallow += d.shallow(q);
    for (uint32_t k : d.children_of(q)) walk.push_back(k);
  }
  for (auto& [klass, c] : held) {
    c.name = label_name(g, klass);
    r.holds.push_back(std::move(c));
  }
  std::sort(r.holds.begin(), r.holds.end(), [](const ClassSize& x, const ClassSize& y) {
    return x.shallow != y.shallow ? x.shallow > y.shallow : x.name < y.name;
  });
  if (r.holds.size() > kHoldsShown) r.holds.resize(kHoldsShown);
  return r;
}

// Each object's parent on a shortest path from the roots: breadth first,
// in the roots' order; kNoObject where none reaches. Needs the references.
std::vector<ObjectId> shortest_parents(const HeapGraph& g) {
  std::vector<ObjectId> parent(g.size(), kNoObject);
  std::vector<ObjectId> queue{kRoots};
  queue.reserve(g.size());  // never regrown; the pages it does not reach stay untouched
  parent[kRoots] = kRoots;
  for (size_t at = 0; at < queue.size(); ++at)
    successors(g, queue[at]).for_each([&](ObjectId w) {
      if (parent[w] == kNoObject) {
        parent[w] = queue[at];
        queue.push_back(w);
      }
    });
  return parent;
}

// The path to `o` by `parent`: a root's object first, `o` last; empty if
// no root reaches it.
std::vector<ObjectId> chain_to(const std::vector<ObjectId>& parent, ObjectId o) {
  std::vector<ObjectId> chain;
  if (o >= parent.size() || parent[o] == kNoObject) return chain;
  for (; o != kRoots && chain.size() <= parent.size(); o = parent[o]) chain.push_back(o);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// The retainers' shortest paths from the roots (over the references read
// again), and the followed objects' (their chains found already): how
// each object holds the next, found in one pass over the dump.
std::expected<void, std::string> find_paths(HeapGraph& g, std::string_view dump, const DoneWith& done_with,
                                            std::vector<Retainer>& retainers,
                                            const std::vector<std::vector<ObjectId>>& followed_chains,
                                            std::vector<Holding>& followed) {
  std::vector<std::vector<ObjectId>> chains;
  if (!retainers.empty()) {
    if (auto r = g.reload(dump, HeapGraph::kReferences, done_with); !r) return std::unexpected(r.error());
    std::vector<ObjectId> parent = shortest_parents(g);
    g.drop(HeapGraph::kReferences);
    for (const Retainer& r : retainers) chains.push_back(chain_to(parent, r.object));
  }
  chains.insert(chains.end(), followed_chains.begin(), followed_chains.end());
  std::vector<std::pair<ObjectId, ObjectId>> links;
  for (const std::vector<ObjectId>& chain : chains)
    for (size_t i = 0; i + 1 < chain.size(); ++i) links.emplace_back(chain[i], chain[i + 1]);
  std::vector<Reference> found = g.find_references(dump, links, done_with);
  size_t link_at = 0;
  for (size_t i = 0; i < chains.size(); ++i) {
    const std::vector<ObjectId>& chain = chains[i];
    size_t n = chain.empty() ? 0 : chain.size() - 1;
    std::vector<Reference> chain_links(found.begin() + static_cast<long>(link_at),
                                       found.begin() + static_cast<long>(link_at + n));
    link_at += n;
    const Reference* root = chain.empty() ? nullptr : root_reference(g, chain.front());
    if (i < retainers.size()) {
      retainers[i].path = describe_path(g, root, chain, chain_links);
      continue;
    }
    Holding& h = followed[i - retainers.size()];
    std::vector<PathStep> steps = path_steps(g, root, chain, chain_links, false);
    h.shown_from = steps.empty() ? 0 : steps.front().at;
    // A run of objects of one class (a linked chain: a bucket's nodes, a
    // list's) is named by its last, so that objects held alike read alike
    // however deep in the chain each sits.
    for (size_t k = 0; k < steps.size(); ++k) {
      bool chained = k + 1 < steps.size() && steps[k].at + 1 == steps[k + 1].at &&
                     g.class_of(chain[steps[k].at]) == g.class_of(chain[steps[k + 1].at]);
      if (!chained) h.path += (h.path.empty() ? "" : " → ") + steps[k].text;
    }
  }
  return {};
}

}  // namespace

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string object_name(const HeapGraph& g, ObjectId o) { return label_name(g, label_of(g, o)); }

std::vector<HeldAlike> group_holdings(std::span<const Holding* const> holdings) {
  std::map<std::string_view, std::vector<const Holding*>> by_path;
  for (const Holding* h : holdings)
    if (h->reached()) by_path[h->path].push_back(h);
  std::vector<HeldAlike> out;
  for (const auto& [path, group] : by_path) {
    HeldAlike a;
    a.path = std::string(path);
    a.objects = group.size();
    // Paths alike have as many steps from where they are shown; the
    // objects on them agree up to the deepest shared one.
    const Holding& first = *group.front();
    for (size_t k = first.shown_from; k + 1 < first.chain.size(); ++k) {
      size_t depth = k - first.shown_from;
      bool shared = std::all_of(group.begin(), group.end(), [&](const Holding* h) {
        size_t at = h->shown_from + depth;
        return at + 1 < h->chain.size() && h->chain[at].first == first.chain[k].first;
      });
      if (!shared) break;
      a.holder = first.chain[k].first;
      a.holder_retained = first.chain[k].second;
    }
    out.push_back(std::move(a));
  }
  std::stable_sort(out.begin(), out.end(), [](const HeldAlike& x, const HeldAlike& y) { return x.objects > y.objects; });
  return out;
}

std::expected<HeapAnalysis, std::string> analyze_heap(HeapGraph& g, std::string_view dump, size_t top,
                                                      const DoneWith& done_with, std::span<const ObjectId> followed) {
  HeapAnalysis a;
  a.references = g.reference_count();  // before they go
  // The followed objects' paths first, while the graph has its references.
  std::vector<std::vector<ObjectId>> followed_chains;
  if (!followed.empty()) {
    if (!g.has_references())
      if (auto r = g.reload(dump, HeapGraph::kReferences, done_with); !r) return std::unexpected(r.error());
    std::vector<ObjectId> parent = shortest_parents(g);
    for (ObjectId o : followed) followed_chains.push_back(chain_to(parent, o));
  }
  auto d = dominate(g, dump, done_with);
  if (!d) return std::unexpected(d.error());
  if (!followed.empty()) {
    // What each object on their paths retains.
    std::unordered_map<ObjectId, uint64_t> retained;
    for (const auto& chain : followed_chains)
      for (ObjectId o : chain) retained.emplace(o, 0);
    for (size_t p = 1; p < d->order.size(); ++p)
      if (auto it = retained.find(d->order[p]); it != retained.end()) it->second = d->retained[p];
    for (size_t i = 0; i < followed.size(); ++i) {
      Holding& h = a.followed.emplace_back();
      h.object = followed[i];
      for (ObjectId o : followed_chains[i]) h.chain.push_back({o, retained[o]});
    }
  }
  a.bytes = d->retained[0];
  a.objects = d->order.size() - 1;
  a.unreached_objects = g.objects() - a.objects;
  a.unreached_bytes = g.bytes() - a.bytes;

  // Classes: instances and shallow bytes of the objects reached; then the
  // sizes go, retained bytes tell them from here on.
  std::unordered_map<ObjectId, ClassSize> by_class;
  for (size_t i = 1; i < d->order.size(); ++i) {
    ClassSize& c = by_class[g.class_of(d->order[i])];
    ++c.instances;
    c.shallow += g.shallow(d->order[i]);
  }
  g.drop(HeapGraph::kSizes);
  walk_classes(g, *d, by_class, a.profile);
  for (auto& [klass, c] : by_class) {
    c.name = label_name(g, klass);
    a.classes.push_back(std::move(c));
  }
  std::sort(a.classes.begin(), a.classes.end(), [](const ClassSize& x, const ClassSize& y) {
    return x.retained != y.retained ? x.retained > y.retained : x.shallow != y.shallow ? x.shallow > y.shallow : x.name < y.name;
  });
  for (uint32_t p : accumulation_points(g, *d, top)) a.retainers.push_back(retainer_at(g, *d, p));
  // The dominator tree is done with: its memory goes before the paths'.
  *d = {};
  if (auto paths = find_paths(g, dump, done_with, a.retainers, followed_chains, a.followed); !paths)
    return std::unexpected(paths.error());
  return a;
}

std::string heap_report(const HeapAnalysis& a, size_t top) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%s objects, %s reachable, %s references", grouped(a.objects).c_str(),
                human_bytes(a.bytes).c_str(), grouped(a.references).c_str());
  out += line;
  if (a.pause_ns) {
    std::snprintf(line, sizeof line, "; the dump paused the JVM for %s%.3f s", a.pause_at_most ? "up to " : "",
                  static_cast<double>(a.pause_ns) / 1e9);
    out += line;
  }
  out += "\n";
  if (a.unreached_objects)
    out += grouped(a.unreached_objects) + " objects (" + human_bytes(a.unreached_bytes) +
           ") that no GC root reaches are left out: held only through weak or phantom references, or by the JVM "
           "itself\n";
  out += "\nWhere memory accumulates (retained bytes, objects, what holds it):\n";
  if (a.retainers.empty()) out += "  nothing retains 1% of the heap or more\n";
  for (const Retainer& r : a.retainers) {
    double share = a.bytes ? 100.0 * static_cast<double>(r.retained) / static_cast<double>(a.bytes) : 0;
    std::snprintf(line, sizeof line, "  %10s %5.1f%% %12s  %s\n", human_bytes(r.retained).c_str(), share,
                  grouped(r.objects).c_str(), r.name.c_str());
    out += line;
    std::string holds;
    for (const ClassSize& c : r.holds)
      holds += (holds.empty() ? "" : ", ") + grouped(c.instances) + " " + c.name + " " + human_bytes(c.shallow);
    out += "        holds: " + holds + "\n";
    out += "        path:  " + r.path + "\n";
  }
  out += "\nClasses by retained size:\n";
  std::snprintf(line, sizeof line, "  %12s %12s %12s  %s\n", "instances", "shallow", "retained", "class");
  out += line;
  for (size_t i = 0; i < a.classes.size() && i < top; ++i) {
    const ClassSize& c = a.classes[i];
    std::snprintf(line, sizeof line, "  %12s %12s %12s  %s\n", grouped(c.instances).c_str(), human_bytes(c.shallow).c_str(),
                  human_bytes(c.retained).c_str(), c.name.c_str());
    out += line;
  }
  return out;
}

std::string allocation_sites(const HeapAnalysis& a, const flamegraph::Profile& alloc, std::string_view source,
                             size_t top) {
  constexpr size_t kSiteFrames = 2, kSitesShown = 3;
  // Per allocated class (a stack's last frame): weight per site.
  std::unordered_map<std::string_view, std::unordered_map<std::string, uint64_t>> sites;
  std::unordered_map<std::string_view, uint64_t> totals;
  for (const flamegraph::Stack& st : alloc.stacks()) {
    if (st.frames.empty()) continue;
    // The allocated class ends the stack (its kind Alloc is not kept by
    // folded stacks and pprof: a class is known by its name).
    const flamegraph::Frame& leaf = alloc.frames()[st.frames.back()];
    std::string site;
    for (size_t i = st.frames.size() - 1, n = 0; i-- > 0 && n < kSiteFrames;) {
      const flamegraph::Frame& f = alloc.frames()[st.frames[i]];
      if (f.kind != flamegraph::FrameKind::Jit && f.kind != flamegraph::FrameKind::Inlined &&
          f.kind != flamegraph::FrameKind::Interpreted)
        continue;  // the JVM's and native frames of the allocation path
      site += (n++ ? " ← " : "") + f.name;
    }
    if (site.empty()) site = "[no Java frame]";
    sites[leaf.name][site] += st.weight;
    totals[leaf.name] += st.weight;
  }
  std::string out = "\nWhere the classes were allocated (live allocations sampled in " + std::string(source) + "):\n";
  size_t shown = 0;
  for (size_t i = 0; i < a.classes.size() && i < top; ++i) {
    auto it = sites.find(a.classes[i].name);
    if (it == sites.end()) continue;
    std::vector<std::pair<std::string, uint64_t>> ranked(it->second.begin(), it->second.end());
    std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
      return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    out += "  " + a.classes[i].name + ":";
    for (size_t k = 0; k < ranked.size() && k < kSitesShown; ++k) {
      char share[16];
      std::snprintf(share, sizeof share, " %.0f%% ", 100.0 * static_cast<double>(ranked[k].second) /
                                                           static_cast<double>(totals[it->first]));
      out += (k ? ";" : "") + std::string(share) + ranked[k].first;
    }
    if (ranked.size() > kSitesShown) out += "; " + std::to_string(ranked.size() - kSitesShown) + " more sites";
    out += "\n";
    ++shown;
  }
  if (!shown) out += "  none of these classes is in it (was it recorded on this JVM, with -e alloc --live?)\n";
  return out;
}

std::string heap_snapshot_text(const std::vector<ClassSize>& classes, std::string_view comment) {
  std::string out = "# ember heap snapshot: " + std::string(comment) + "\n# instances shallow retained class\n";
  for (const ClassSize& c : classes)
    out += std::to_string(c.instances) + " " + std::to_string(c.shallow) + " " + std::to_string(c.retained) + " " + c.name + "\n";
  return out;
}

std::expected<std::vector<ClassSize>, std::string> parse_heap_snapshot(std::string_view text, std::string_view source) {
  std::vector<ClassSize> out;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == text.npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.starts_with('#')) continue;
    ClassSize c;
    uint64_t* fields[] = {&c.instances, &c.shallow, &c.retained};
    bool ok = true;
    for (uint64_t* f : fields) {
      size_t space = line.find(' ');
      auto [end, ec] = std::from_chars(line.data(), line.data() + std::min(space, line.size()), *f);
      ok = ok && space != line.npos && ec == std::errc() && end == line.data() + space;
      line.remove_prefix(space == line.npos ? line.size() : space + 1);
    }
    if (!ok || line.empty() || line.find(' ') != line.npos)
      return std::unexpected(std::string(source) + ":" + std::to_string(line_no) +
                             ": not a heap snapshot row (INSTANCES SHALLOW RETAINED CLASS)");
    c.name = std::string(line);
    out.push_back(std::move(c));
  }
  if (out.empty()) return std::unexpected(std::string(source) + ": no heap snapshot rows in it");
  return out;
}

std::vector<ClassSizeDelta> diff_heap_snapshots(const std::vector<ClassSize>& before, const std::vector<ClassSize>& now) {
  std::unordered_map<std::string_view, ClassSizeDelta> by_name;
  for (const ClassSize& c : now) {
    ClassSizeDelta& d = by_name[c.name];
    d.now = c;
    d.d_instances += static_cast<int64_t>(c.instances);
    d.d_shallow += static_cast<int64_t>(c.shallow);
    d.d_retained += static_cast<int64_t>(c.retained);
  }
  for (const ClassSize& c : before) {
    ClassSizeDelta& d = by_name[c.name];
    d.now.name = c.name;
    d.d_instances -= static_cast<int64_t>(c.instances);
    d.d_shallow -= static_cast<int64_t>(c.shallow);
    d.d_retained -= static_cast<int64_t>(c.retained);
  }
  std::vector<ClassSizeDelta> out;
  for (auto& [name, d] : by_name)
    if (d.d_instances || d.d_shallow || d.d_retained) out.push_back(std::move(d));
  auto magnitude = [](int64_t v) { return v < 0 ? -static_cast<uint64_t>(v) : static_cast<uint64_t>(v); };
  std::sort(out.begin(), out.end(), [&](const ClassSizeDelta& x, const ClassSizeDelta& y) {
    if (magnitude(x.d_retained) != magnitude(y.d_retained)) return magnitude(x.d_retained) > magnitude(y.d_retained);
    if (x.d_retained != y.d_retained) return x.d_retained > y.d_retained;
    if (magnitude(x.d_shallow) != magnitude(y.d_shallow)) return magnitude(x.d_shallow) > magnitude(y.d_shallow);
    return x.now.name < y.now.name;
  });
  return out;
}

std::string heap_diff_report(const std::vector<ClassSizeDelta>& deltas, size_t top) {
  auto signed_bytes = [](int64_t v) {
    return (v < 0 ? "-" : "+") + human_bytes(v < 0 ? -static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
  };
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "  %12s %13s %12s %12s  %s\n", "retained +/-", "instances +/-", "retained", "instances",
                "class");
  out += line;
  for (size_t i = 0; i < deltas.size() && i < top; ++i) {
    const ClassSizeDelta& d = deltas[i];
    std::snprintf(line, sizeof line, "  %12s %+13lld %12s %12s  %s\n", signed_bytes(d.d_retained).c_str(),
                  static_cast<long long>(d.d_instances), human_bytes(d.now.retained).c_str(),
                  grouped(d.now.instances).c_str(), d.now.name.c_str());
    out += line;
  }
  if (deltas.size() > top) out += "  (" + std::to_string(deltas.size() - top) + " more classes changed)\n";
  return out;
}

}  // namespace ember::heap
