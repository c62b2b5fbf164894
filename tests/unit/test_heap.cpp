#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "user/heap/dominators.h"
#include "user/heap/heap_graph.h"
#include "user/heap/heap_report.h"
#include "user/heap/hprof.h"

namespace hp = ember::heap::hprof;
using ember::heap::DominatorTree;
using ember::heap::dominator_tree;
using ember::heap::HeapAnalysis;
using ember::heap::HeapGraph;
using ember::heap::HeapLayout;
using ember::heap::Successors;

namespace {

// A heap dump as HotSpot writes it (user/heap/hprof.h), with ids of 8
// bytes: an object's id is its address.
class Hprof {
 public:
  Hprof() {
    s_.append("JAVA PROFILE 1.0.2", 19);
    num(s_, 8, 4);
    num(s_, 0, 8);
  }
  // A class: its name (as the JVM writes it: "java/lang/String", "[B"),
  // superclass, instance fields and static fields (name, type, value).
  Hprof& klass(uint64_t id, const std::string& name, uint64_t super = 0,
               std::vector<std::pair<std::string, uint8_t>> fields = {},
               std::vector<std::tuple<std::string, uint8_t, uint64_t>> statics = {}, uint64_t loader = 0) {
    top(0x02, [&](std::string& b) {
      num(b, ++class_serial_, 4);
      num(b, id, 8);
      num(b, 0, 4);
      num(b, symbol(name), 8);
    });
    serials_[id] = class_serial_;
    supers_[id] = super;
    for (auto& [f, type] : fields) types_[id].push_back(type);
    seg_ += '\x20';
    num(seg_, id, 8);
    num(seg_, 0, 4);
    for (uint64_t v : {super, loader, uint64_t{0}, uint64_t{0}, uint64_t{0}, uint64_t{0}}) num(seg_, v, 8);
    num(seg_, 0, 4);
    num(seg_, 0, 2);
    num(seg_, statics.size(), 2);
    for (auto& [f, type, value] : statics) {
      num(seg_, symbol(f), 8);
      seg_ += static_cast<char>(type);
      num(seg_, value, hp::type_size(type, 8));
    }
    num(seg_, fields.size(), 2);
    for (auto& [f, type] : fields) {
      num(seg_, symbol(f), 8);
      seg_ += static_cast<char>(type);
    }
    return *this;
  }
  // An instance: its fields' values, its class's own first, then up.
  Hprof& instance(uint64_t id, uint64_t klass, std::vector<uint64_t> values = {}) {
    std::string v;
    size_t i = 0;
    for (uint64_t c = klass; c; c = supers_[c])
      for (uint8_t type : types_[c]) num(v, i < values.size() ? values[i++] : 0, hp::type_size(type, 8));
    return instance_values(id, klass, v);
  }
  Hprof& instance_values(uint64_t id, uint64_t klass, const std::string& v) {
    seg_ += '\x21';
    num(seg_, id, 8);
    num(seg_, 0, 4);
    num(seg_, klass, 8);
    num(seg_, v.size(), 4);
    seg_ += v;
    return *this;
  }
  Hprof& array(uint64_t id, uint64_t klass, const std::vector<uint64_t>& elements) {
    seg_ += '\x22';
    num(seg_, id, 8);
    num(seg_, 0, 4);
    num(seg_, elements.size(), 4);
    num(seg_, klass, 8);
    for (uint64_t e : elements) num(seg_, e, 8);
    return *this;
  }
  Hprof& primitives(uint64_t id, uint8_t type, const std::string& data) {
    seg_ += '\x23';
    num(seg_, id, 8);
    num(seg_, 0, 4);
    num(seg_, data.size() / hp::type_size(type, 8), 4);
    seg_ += static_cast<char>(type);
    seg_ += data;
    return *this;
  }
  // A root: tag (hprof::RootTag), object, and for some a thread serial and a depth.
  Hprof& root(uint8_t tag, uint64_t object, uint32_t thread = 0, uint32_t depth = 0) {
    seg_ += static_cast<char>(tag);
    num(seg_, object, 8);
    if (tag == hp::kRootJniGlobal) num(seg_, 0, 8);
    if (tag == hp::kRootJniLocal || tag == hp::kRootJavaFrame || tag == hp::kRootThreadObject ||
        tag == hp::kRootNativeStack || tag == hp::kRootThreadBlock)
      num(seg_, thread, 4);
    if (tag == hp::kRootJniLocal || tag == hp::kRootJavaFrame || tag == hp::kRootThreadObject) num(seg_, depth, 4);
    return *this;
  }
  // A stack trace of frames (id, method, its class).
  Hprof& trace(uint32_t serial, uint32_t thread, const std::vector<std::tuple<uint64_t, std::string, uint64_t>>& frames) {
    for (auto& [id, method, klass] : frames)
      top(0x04, [&](std::string& b) {
        num(b, id, 8);
        num(b, symbol(method), 8);
        num(b, symbol("()V"), 8);
        num(b, 0, 8);
        num(b, serials_[klass], 4);
        num(b, 0, 4);
      });
    return top(0x05, [&](std::string& b) {
      num(b, serial, 4);
      num(b, thread, 4);
      num(b, frames.size(), 4);
      for (auto& f : frames) num(b, std::get<0>(f), 8);
    });
  }
  std::string str() const {
    std::string out = s_;
    out += '\x1c';
    num(out, 0, 4);
    num(out, seg_.size(), 4);
    out += seg_;
    out += '\x2c';
    num(out, 0, 8);
    return out;
  }

  static void num(std::string& s, uint64_t v, uint32_t bytes) {
    for (uint32_t i = bytes; i-- > 0;) s += static_cast<char>(v >> (8 * i));
  }

 private:
  uint64_t symbol(const std::string& text) {
    auto [it, added] = symbols_.try_emplace(text, symbols_.size() + 1);
    if (added)
      top(0x01, [&](std::string& b) {
        num(b, it->second, 8);
        b += text;
      });
    return it->second;
  }
  template <class F>
  Hprof& top(uint8_t tag, F&& body) {
    std::string b;
    body(b);
    s_ += static_cast<char>(tag);
    num(s_, 0, 4);
    num(s_, b.size(), 4);
    s_ += b;
    return *this;
  }
  std::string s_, seg_;
  std::map<std::string, uint64_t> symbols_;
  std::map<uint64_t, uint32_t> serials_;
  std::map<uint64_t, uint64_t> supers_;
  std::map<uint64_t, std::vector<uint8_t>> types_;
  uint32_t class_serial_ = 0;
};

std::expected<HeapGraph, std::string> read(const std::string& dump, const HeapLayout& layout = {}) {
  return ember::heap::read_heap_graph(dump, layout);
}

// The analysis of a dump whose graph the test does not look into.
HeapAnalysis analyzed(const Hprof& d) {
  std::string dump = d.str();
  auto g = read(dump);
  INFO((g ? "" : g.error()));
  REQUIRE(g);
  return ember::heap::analyze_heap(*g, dump, 5).value();
}

// Naive dominance: d dominates n when n cannot be reached from the root
// without d.
std::vector<bool> reached_without(const std::vector<std::vector<uint32_t>>& succ, uint32_t root,
                                  const std::set<uint32_t>& removed) {
  std::vector<bool> seen(succ.size());
  if (removed.count(root)) return seen;
  std::vector<uint32_t> todo{root};
  seen[root] = true;
  while (!todo.empty()) {
    uint32_t n = todo.back();
    todo.pop_back();
    for (uint32_t w : succ[n])
      if (!seen[w] && !removed.count(w)) {
        seen[w] = true;
        todo.push_back(w);
      }
  }
  return seen;
}

std::vector<std::vector<uint32_t>> random_graph(std::mt19937& rng, uint32_t n) {
  std::vector<std::vector<uint32_t>> succ(n);
  std::uniform_int_distribution<uint32_t> node(0, n - 1);
  uint32_t edges = std::uniform_int_distribution<uint32_t>(0, 3 * n)(rng);
  for (uint32_t e = 0; e < edges; ++e) succ[node(rng)].push_back(node(rng));
  return succ;
}

ember::heap::EachEdge edges_of(const std::vector<std::vector<uint32_t>>& succ) {
  return [&succ](const std::function<void(uint32_t, uint32_t)>& edge) {
    for (uint32_t v = 0; v < succ.size(); ++v)
      for (uint32_t w : succ[v]) edge(v, w);
  };
}

}  // namespace

TEST_CASE("dominator_tree agrees with removing each node in turn, on random graphs") {
  std::mt19937 rng(20261127);
  for (int round = 0; round < 400; ++round) {
    uint32_t n = std::uniform_int_distribution<uint32_t>(1, 30)(rng);
    auto succ = random_graph(rng, n);
    // Some nodes' first successor is handed apart, as a heap object's class is.
    std::vector<bool> apart(n);
    for (uint32_t v = 0; v < n; ++v) apart[v] = !succ[v].empty() && rng() % 2;
    DominatorTree t = dominator_tree(
        n, 0,
        [&](uint32_t v) {
          std::span<const uint32_t> all(succ[v]);
          return apart[v] ? Successors{all[0], all.subspan(1)} : Successors{Successors::kNone, all};
        },
        {}, edges_of(succ));
    std::vector<bool> reachable = reached_without(succ, 0, {});
    REQUIRE(t.order.size() == static_cast<size_t>(std::count(reachable.begin(), reachable.end(), true)));
    REQUIRE(t.order[0] == 0);
    // dom[v]: the nodes whose removal cuts v off (v itself included).
    std::vector<std::set<uint32_t>> dom(n);
    for (uint32_t d = 0; d < n; ++d) {
      if (!reachable[d]) continue;
      std::vector<bool> seen = reached_without(succ, 0, {d});
      for (uint32_t v = 0; v < n; ++v)
        if (reachable[v] && !seen[v]) dom[v].insert(d);
    }
    for (size_t i = 1; i < t.order.size(); ++i) {
      uint32_t v = t.order[i], idom = t.order[t.idom[i]];
      INFO("round " << round << " node " << v);
      REQUIRE(dom[v].count(idom));
      REQUIRE(idom != v);
      // The immediate one: dominated by every other strict dominator of v.
      for (uint32_t d : dom[v])
        if (d != v) REQUIRE(dom[idom].count(d));
    }
  }
}

TEST_CASE("dominator_tree walks a chain of a million nodes without recursion") {
  const uint32_t n = 1'000'000;
  std::vector<uint32_t> next(n);
  for (uint32_t i = 0; i < n; ++i) next[i] = (i + 1) % n;  // a cycle back to the root
  DominatorTree t = dominator_tree(
      n, 0, [&](uint32_t v) { return Successors{Successors::kNone, {&next[v], 1}}; }, {},
      [&](const std::function<void(uint32_t, uint32_t)>& edge) {
        for (uint32_t v = 0; v < n; ++v) edge(v, next[v]);
      });
  REQUIRE(t.order.size() == n);
  for (uint32_t i = 1; i < n; ++i) REQUIRE(t.idom[i] == i - 1);
}

namespace {

// Addresses of a test heap: node k at kBase + 64 k, so that its id in the
// graph (by address) is k.
constexpr uint64_t kBase = 0x7f0000000;
uint64_t at(uint32_t node) { return kBase + 64 * uint64_t{node}; }

// A random heap: java.lang.Class (node 1), array classes C1[] to C3[]
// (nodes 2 to 4), then n arrays of them, each referencing its class, its
// elements (random objects, and nulls, for its size) and at times its
// class once more. Classes hold objects in static fields; some are roots
// (sticky), the others held only by what references them (their loader is
// not in the dump). The same graph for the naive computation, with node k
// for id k and 0 the roots.
struct RandomHeap {
  Hprof dump;
  std::vector<std::vector<uint32_t>> succ;
  std::vector<uint64_t> size;
  std::vector<uint32_t> klass;  // class node per node
};

RandomHeap random_heap(std::mt19937& rng, uint32_t n) {
  RandomHeap h;
  constexpr uint32_t kClasses = 3, first = kClasses + 2;
  const uint32_t nodes = n + first;
  h.succ.assign(nodes, {});
  h.size.assign(nodes, 0);
  h.klass.assign(nodes, 1);
  std::uniform_int_distribution<uint32_t> node(1, nodes - 1);
  std::vector<std::vector<uint64_t>> elements(nodes);
  for (uint32_t k = first; k < nodes; ++k) {
    h.klass[k] = 2 + rng() % kClasses;
    h.succ[k].push_back(h.klass[k]);  // its class
    // Every object is held by the roots or by an object before it.
    uint32_t holder = k == first || rng() % 4 == 0 ? 0 : std::uniform_int_distribution<uint32_t>(first, k - 1)(rng);
    if (holder) {
      h.succ[holder].push_back(k);
      elements[holder].push_back(at(k));
    } else {
      h.succ[0].push_back(k);
    }
  }
  std::vector<std::vector<uint32_t>> statics(kClasses + 2);
  for (uint32_t e = 0, extra = rng() % (2 * n + 1); e < extra; ++e) {
    uint32_t from = node(rng), to = node(rng);
    if (from == 1) continue;  // java.lang.Class holds nothing here
    h.succ[from].push_back(to);
    if (from < first)
      statics[from].push_back(to);
    else
      elements[from].push_back(at(to));
  }
  Hprof& d = h.dump;
  d.klass(at(1), "java/lang/Class");  // held by the boot loader: a root
  h.succ[0].push_back(1);
  h.size[1] = 16;  // 12 bytes of header, no fields: 16 with alignment
  for (uint32_t c = 2; c < first; ++c) {
    std::vector<std::tuple<std::string, uint8_t, uint64_t>> fields;
    for (uint32_t to : statics[c]) fields.emplace_back("s" + std::to_string(fields.size()), hp::kObject, at(to));
    d.klass(at(c), "[LC" + std::to_string(c - 1) + ";", 0, {}, fields, /*loader not in the dump*/ 8);
    h.size[c] = (12 + 4 * fields.size() + 7) / 8 * 8;
    if (rng() % 2) {
      d.root(hp::kRootStickyClass, at(c));
      h.succ[0].push_back(c);
    }
  }
  for (uint32_t k = first; k < nodes; ++k) {
    if (rng() % 10 == 0) {
      h.succ[k].push_back(h.klass[k]);  // its class as an element too
      elements[k].push_back(at(h.klass[k]));
    }
    for (uint32_t pad = rng() % 4; pad > 0; --pad) elements[k].push_back(0);
    std::shuffle(elements[k].begin(), elements[k].end(), rng);
    h.size[k] = (16 + 4 * elements[k].size() + 7) / 8 * 8;
    d.array(at(k), at(h.klass[k]), elements[k]);
  }
  for (uint32_t to : h.succ[0])
    if (to >= first) d.root(hp::kRootJniGlobal, at(to));
  return h;
}

uint64_t dominated_by(const RandomHeap& h, uint32_t x) {
  std::vector<bool> all = reached_without(h.succ, 0, {}), kept = reached_without(h.succ, 0, {x});
  uint64_t n = 0;
  for (size_t k = 1; k < h.succ.size(); ++k) n += all[k] && !kept[k];
  return n;
}

uint64_t bytes_cut_off(const RandomHeap& h, const std::set<uint32_t>& removed) {
  std::vector<bool> all = reached_without(h.succ, 0, {}), kept = reached_without(h.succ, 0, removed);
  uint64_t b = 0;
  for (size_t k = 1; k < h.succ.size(); ++k)
    if (all[k] && !kept[k]) b += h.size[k];
  return b;
}

}  // namespace

TEST_CASE("retained bytes per class and per retainer agree with removing them, on random heaps") {
  std::mt19937 rng(42);
  for (int round = 0; round < 150; ++round) {
    uint32_t n = std::uniform_int_distribution<uint32_t>(1, 40)(rng);
    RandomHeap h = random_heap(rng, n);
    std::string dump = h.dump.str();
    auto g = read(dump);
    INFO("round " << round << (g ? "" : ": " + g.error()));
    REQUIRE(g);
    REQUIRE(g->size() == h.succ.size());
    HeapAnalysis a = ember::heap::analyze_heap(*g, dump, 10).value();
    uint64_t all = bytes_cut_off(h, {0});
    REQUIRE(a.bytes == all);
    REQUIRE(a.profile.total() == all);
    std::vector<bool> reachable = reached_without(h.succ, 0, {});
    for (const auto& c : a.classes) {
      uint32_t id = c.name == "java.lang.Class" ? 1 : 1 + static_cast<uint32_t>(std::stoul(c.name.substr(1)));
      std::set<uint32_t> instances;
      for (uint32_t k = 1; k < h.succ.size(); ++k)
        if (h.klass[k] == id && reachable[k]) instances.insert(k);
      REQUIRE(c.instances == instances.size());
      // The instances no other instance dominates, each with what it alone holds.
      uint64_t expected = 0;
      for (uint32_t x : instances) {
        bool nested = false;
        for (uint32_t y : instances) nested |= y != x && !reached_without(h.succ, 0, {y})[x];
        if (!nested) expected += bytes_cut_off(h, {x});
      }
      REQUIRE(c.retained == expected);
      // What all instances hold together is at least that.
      REQUIRE(c.retained <= bytes_cut_off(h, instances));
    }
    for (const auto& r : a.retainers) {
      REQUIRE(r.retained == bytes_cut_off(h, {r.object}));
      REQUIRE(r.objects == dominated_by(h, r.object));
    }
  }
}

namespace {

// Type ids of a test heap's classes, and its threads.
enum : uint64_t {
  kObjectClass = 0x1000, kClassClass = 0x1040, kCache = 0x1080, kHashMap = 0x10c0, kAbstractMap = 0x1100,
  kNodes = 0x1140, kBytes = 0x1180, kReference = 0x11c0, kWeak = 0x1200, kWorker = 0x1240, kThread = 0x1280,
  kString = 0x12c0, kInts = 0x1300,
};

// A thread object named `name` (a java.lang.String of Latin-1 bytes) at
// `id`, its string and bytes after it.
void add_thread(Hprof& d, uint64_t id, const std::string& name, uint32_t serial) {
  d.instance(id, kThread, {id + 0x40});
  d.instance(id + 0x40, kString, {id + 0x80, 0});
  d.primitives(id + 0x80, hp::kByte, name);
  d.root(hp::kRootThreadObject, id, serial, 100 + serial);
}

// The classes the heaps below take from the JDK.
Hprof jdk_heap() {
  Hprof d;
  d.klass(kObjectClass, "java/lang/Object")
      .klass(kClassClass, "java/lang/Class", kObjectClass)
      .klass(kAbstractMap, "java/util/AbstractMap", kObjectClass, {{"keySet", hp::kObject}})
      .klass(kHashMap, "java/util/HashMap", kAbstractMap, {{"table", hp::kObject}, {"size", hp::kInt}})
      .klass(kNodes, "[Ljava/util/HashMap$Node;", kObjectClass)
      .klass(kBytes, "[B", kObjectClass)
      .klass(kInts, "[I", kObjectClass)
      .klass(kReference, "java/lang/ref/Reference", kObjectClass, {{"referent", hp::kObject}, {"queue", hp::kObject}})
      .klass(kWeak, "java/lang/ref/WeakReference", kReference)
      .klass(kThread, "java/lang/Thread", kObjectClass, {{"name", hp::kObject}})
      .klass(kString, "java/lang/String", kObjectClass, {{"value", hp::kObject}, {"coder", hp::kByte}});
  return d;
}

// A cache held by a static field, as in the JVM: classes with fields, a
// class object reached as a system class, a stack root, a weak reference.
// The cache holds 4 byte[payload].
std::string cache_heap(size_t payload = 4096) {
  Hprof d = jdk_heap();
  d.klass(kCache, "com/acme/Cache", kObjectClass, {}, {{"LIMIT", hp::kInt, 5}, {"ENTRIES", hp::kObject, 0x2000}})
      .klass(kWorker, "com/acme/Worker", kObjectClass, {{"weak", hp::kObject}});
  d.instance(0x2000, kHashMap, {0x2040, 4, 0});  // table, size; AbstractMap.keySet
  d.array(0x2040, kNodes, {0x2080, 0x3080, 0x4080, 0x5080});
  for (uint64_t b : {0x2080, 0x3080, 0x4080, 0x5080}) d.primitives(b, hp::kByte, std::string(payload, 'x'));
  d.instance(0x6000, kWorker, {0x6040});
  d.instance(0x6040, kWeak, {0x6080, 0});
  d.primitives(0x6080, hp::kByte, std::string(100, 'w'));  // its referent, held by nothing else
  add_thread(d, 0x7000, "worker-1", 1);
  d.trace(101, 1, {{0x99, "run", kWorker}});
  d.root(hp::kRootJavaFrame, 0x6000, 1, 0);
  return d.str();
}

}  // namespace

TEST_CASE("a cache held by a static field: retained bytes, path with field names, profile, report") {
  std::string dump = cache_heap();
  auto g = read(dump);
  INFO((g ? "" : g.error()));
  REQUIRE(g);
  ember::heap::ObjectId map = g->id_of(kHashMap);
  CHECK(g->class_name(map) == "java.util.HashMap");
  CHECK(g->class_name(g->id_of(kNodes)) == "java.util.HashMap$Node[]");
  CHECK(g->field_name(map, 0) == "table");  // its own fields, then AbstractMap's
  CHECK(g->field_name(map, 2) == "keySet");
  CHECK(g->field_name(map, 3).empty());
  CHECK(g->static_field_name(g->id_of(kCache), 1) == "ENTRIES");
  CHECK(g->shallow(g->id_of(0x2000)) == 24);         // 12 + table 4 + size 4 + keySet 4
  CHECK(g->shallow(g->id_of(0x2040)) == 32);         // 16 + 4 references
  CHECK(g->shallow(g->id_of(0x6080)) == 120);        // 16 + 100 bytes, aligned
  CHECK(g->shallow(g->id_of(kCache)) == 24);         // 12, LIMIT and ENTRIES 4 each
  CHECK(g->thread_name(g->id_of(0x7000)) == "worker-1");
  CHECK(g->referents() == 1);
  HeapAnalysis a = ember::heap::analyze_heap(*g, dump, 5).value();
  CHECK(a.unreached_objects == 1);
  CHECK(a.unreached_bytes == 120);
  REQUIRE(!a.retainers.empty());
  const auto& r = a.retainers[0];
  CHECK(r.name == "java.util.HashMap$Node[]");
  CHECK(r.retained == 32 + 4 * 4112);
  CHECK(r.objects == 5);
  CHECK(r.path == "static com.acme.Cache.ENTRIES → java.util.HashMap.table → java.util.HashMap$Node[]");
  REQUIRE(r.holds.size() == 2);
  CHECK(r.holds[0].name == "byte[]");
  CHECK(r.holds[0].instances == 4);
  std::string report = ember::heap::heap_report(a, 10);
  CHECK(report.find("references\n") != std::string::npos);  // no pause known
  a.pause_ns = 5'000'000;
  report = ember::heap::heap_report(a, 10);
  CHECK(report.find("references; the dump paused the JVM for 0.005 s\n") != std::string::npos);
  a.pause_at_most = true;
  CHECK(ember::heap::heap_report(a, 10).find("references; the dump paused the JVM for up to 0.005 s\n") != std::string::npos);
  CHECK(report.find("1 objects (120 B) that no GC root reaches are left out") != std::string::npos);
  // The profile: root -> dominators -> class, weights are shallow bytes.
  CHECK(a.profile.total() == a.bytes);
  bool found = false;
  for (const auto& st : a.profile.stacks()) {
    std::string path;
    for (auto f : st.frames) path += a.profile.frames()[f].name + ";";
    if (path == "class com.acme.Cache;java.util.HashMap;java.util.HashMap$Node[];byte[];") {
      found = true;
      CHECK(st.weight == 4 * 4112);
    }
  }
  CHECK(found);
}

TEST_CASE("two statics of one class that hold its memory together are each a place, with its path") {
  // As `static Map CACHE` and `static List THINGS` of one class: neither
  // holds 80% of what the class retains, so the walk down stopped at the
  // class and named neither field.
  Hprof d = jdk_heap();
  d.klass(kCache, "com/acme/Hold", kObjectClass, {}, {{"CACHE", hp::kObject, 0x2000}, {"THINGS", hp::kObject, 0x3000}});
  d.instance(0x2000, kHashMap, {0x2040, 4, 0});
  d.array(0x2040, kNodes, {0x4000, 0x5000, 0x6000, 0x7000});
  d.array(0x3000, kNodes, {0x8000, 0x9000, 0xa000});
  for (uint64_t b : {0x4000, 0x5000, 0x6000, 0x7000, 0x8000, 0x9000, 0xa000})
    d.primitives(b, hp::kByte, std::string(4096, 'x'));
  HeapAnalysis a = analyzed(d);
  REQUIRE(a.retainers.size() == 2);
  CHECK(a.retainers[0].path == "static com.acme.Hold.CACHE → java.util.HashMap.table → java.util.HashMap$Node[]");
  CHECK(a.retainers[0].retained == 32 + 4 * 4112);
  CHECK(a.retainers[1].path == "static com.acme.Hold.THINGS → java.util.HashMap$Node[]");
  CHECK(a.retainers[1].retained == 32 + 3 * 4112);
  // One holding most (82%) beside one holding 18%: both places, not the
  // bigger alone (a growing list was left out while a cache held 84%).
  Hprof m = jdk_heap();
  m.klass(kCache, "com/acme/Hold", kObjectClass, {}, {{"CACHE", hp::kObject, 0x2000}, {"THINGS", hp::kObject, 0x3000}});
  m.instance(0x2000, kHashMap, {0x2040, 9, 0});
  m.array(0x2040, kNodes, {0x4000, 0x5000, 0x6000, 0x7000, 0x8000, 0x9000, 0xa000, 0xb000, 0xc000});
  m.array(0x3000, kNodes, {0xd000, 0xe000});
  for (uint64_t b : {0x4000, 0x5000, 0x6000, 0x7000, 0x8000, 0x9000, 0xa000, 0xb000, 0xc000, 0xd000, 0xe000})
    m.primitives(b, hp::kByte, std::string(4096, 'x'));
  a = analyzed(m);
  REQUIRE(a.retainers.size() == 2);
  CHECK(a.retainers[0].path == "static com.acme.Hold.CACHE → java.util.HashMap.table → java.util.HashMap$Node[]");
  CHECK(a.retainers[1].path == "static com.acme.Hold.THINGS → java.util.HashMap$Node[]");
  CHECK(a.retainers[1].retained == 24 + 2 * 4112);
  // An array's elements are one place, however evenly they share it.
  Hprof e = jdk_heap();
  e.klass(kCache, "com/acme/Hold", kObjectClass, {}, {{"ALL", hp::kObject, 0x3000}});
  e.array(0x3000, kNodes, {0x8000, 0x9000});
  for (uint64_t b : {0x8000, 0x9000}) e.primitives(b, hp::kByte, std::string(4096, 'x'));
  a = analyzed(e);
  REQUIRE(a.retainers.size() == 1);
  CHECK(a.retainers[0].path == "static com.acme.Hold.ALL → java.util.HashMap$Node[]");
}

TEST_CASE("shallow sizes follow the JVM's layout; names as Java writes them") {
  Hprof d = jdk_heap();
  d.klass(0x1400, "[J", kObjectClass).klass(0x1440, "[[Ljava/lang/String;", kObjectClass);
  d.klass(0x1480, "com/acme/Foo$$Lambda+0x0000000801001200", kObjectClass, {{"a", hp::kLong}, {"b", hp::kObject}});
  d.primitives(0x3000, hp::kLong, std::string(24, '\0'));  // 3 longs
  d.array(0x3040, 0x1440, {0, 0, 0});
  d.instance(0x3080, 0x1480, {1, 0});
  for (uint64_t id : {0x3000, 0x3040, 0x3080}) d.root(hp::kRootJniGlobal, id);
  std::string dump = d.str();
  auto g = read(dump);
  REQUIRE(g);
  CHECK(g->class_name(g->id_of(0x1400)) == "long[]");
  CHECK(g->class_name(g->id_of(0x1440)) == "java.lang.String[][]");
  CHECK(g->class_name(g->id_of(0x1480)) == "com.acme.Foo$$Lambda/0x0000000801001200");
  // Compressed oops and class pointers (the default layout).
  CHECK(g->shallow(g->id_of(0x3000)) == 16 + 24);
  CHECK(g->shallow(g->id_of(0x3040)) == 32);  // 16 + 12, aligned
  CHECK(g->shallow(g->id_of(0x3080)) == 24);  // 12 + 8 + 4
  // Without compressed oops: 8-byte references, elements from 8-byte boundaries.
  auto wide = read(dump, {.reference = 8, .header = 12, .array_header = 16});
  REQUIRE(wide);
  CHECK(wide->shallow(wide->id_of(0x3040)) == 16 + 24);
  CHECK(wide->shallow(wide->id_of(0x3080)) == 32);  // 12 + 8 + 8, aligned
  // Compact headers (JDK 24 on): 8 bytes, 12 for an array, whose longs start at 16.
  auto compact = read(dump, {.reference = 4, .header = 8, .array_header = 12});
  REQUIRE(compact);
  CHECK(compact->shallow(compact->id_of(0x3000)) == 16 + 24);
  CHECK(compact->shallow(compact->id_of(0x3040)) == 24);  // 12 + 12
  CHECK(compact->shallow(compact->id_of(0x3080)) == 24);  // 8 + 8 + 4, aligned
  // A 16-byte alignment.
  auto sixteen = read(dump, {.alignment = 16});
  REQUIRE(sixteen);
  CHECK(sixteen->shallow(sixteen->id_of(0x3080)) == 32);
}

TEST_CASE("no pass over a dump reads the bytes it said it was done with") {
  // A dump of some megabytes (several windows): a static array of lists,
  // each a chain of nodes with a payload, each list's first payload shared
  // with the next list.
  Hprof d = jdk_heap();
  constexpr uint64_t kHolder = 0x1400, kNode = 0x1440, kNodeArray = 0x1480;
  constexpr uint32_t kLists = 2000, kLength = 40;
  d.klass(kHolder, "Holder", kObjectClass, {}, {{"LISTS", hp::kObject, 0x10000}})
      .klass(kNode, "Node", kObjectClass, {{"next", hp::kObject}, {"payload", hp::kObject}})
      .klass(kNodeArray, "[LNode;", kObjectClass);
  auto node_at = [](uint32_t l, uint32_t k) { return 0x20000 + (uint64_t{l} * kLength + k) * 64; };
  auto payload_at = [](uint32_t l, uint32_t k) { return 0x20000 + (uint64_t{l} * kLength + k) * 64 + 32; };
  std::vector<uint64_t> firsts;
  for (uint32_t l = 0; l < kLists; ++l) firsts.push_back(node_at(l, 0));
  d.array(0x10000, kNodeArray, firsts);
  for (uint32_t l = 0; l < kLists; ++l)
    for (uint32_t k = 0; k < kLength; ++k) {
      d.instance(node_at(l, k), kNode, {k + 1 < kLength ? node_at(l, k + 1) : 0, payload_at(l, k)});
      d.primitives(payload_at(l, k), hp::kByte, std::string(16, 'p'));
    }
  std::string whole = d.str();
  REQUIRE(whole.size() > (size_t{4} << 20));  // past a window of 4 MiB

  // Its bytes in pages of their own, made unreadable below each offset a
  // pass is done with, readable again when a pass ends (it says so with the
  // dump's size): a read of a released byte faults.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), span = (whole.size() + page - 1) / page * page;
  void* mem = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  std::memcpy(mem, whole.data(), whole.size());
  std::string_view guarded(static_cast<const char*>(mem), whole.size());
  std::vector<size_t> offsets;
  auto done_with = [&](size_t offset) {
    offsets.push_back(offset);
    if (offset == whole.size())
      mprotect(mem, span, PROT_READ);
    else
      mprotect(mem, offset / page * page, PROT_NONE);
  };
  auto g = ember::heap::read_heap_graph(guarded, {}, done_with);
  INFO((g ? "" : g.error()));
  REQUIRE(g);
  HeapAnalysis a = ember::heap::analyze_heap(*g, guarded, 5, done_with).value();
  munmap(mem, span);
  // Each pass let go of the bytes before a window's end on its way.
  auto ends = static_cast<size_t>(std::count(offsets.begin(), offsets.end(), whole.size()));
  CHECK(ends >= 2);
  CHECK(offsets.size() - ends >= ends);

  REQUIRE(!a.retainers.empty());
  CHECK(a.retainers[0].path == "static Holder.LISTS → Node[]");
  CHECK(a.retainers[0].retained == 16 + 4 * kLists + uint64_t{kLists} * kLength * (24 + 32));
}

TEST_CASE("find_references answers each pair, a pair asked twice too") {
  std::string dump = cache_heap();
  auto g = read(dump);
  REQUIRE(g);
  auto map = g->id_of(0x2000), table = g->id_of(0x2040), cache = g->id_of(kCache);
  std::vector<std::pair<uint32_t, uint32_t>> pairs{{map, table}, {cache, map}, {map, table}, {table, map}};
  auto found = g->find_references(dump, pairs);
  REQUIRE(found.size() == 4);
  CHECK(found[0].kind == ember::heap::kField);
  CHECK(found[0].index == 0);
  CHECK(found[1].kind == ember::heap::kStaticField);
  CHECK(found[1].index == 1);
  CHECK(found[2].kind == ember::heap::kField);
  CHECK(found[3].kind == 0);  // no such reference
}

TEST_CASE("a stack root is named by its method and thread, a UTF-16 name too") {
  Hprof d = jdk_heap();
  d.klass(0x1400, "HeapLeak", kObjectClass);
  d.primitives(0x3000, hp::kInt, std::string(1 << 20, '\0'));
  d.instance(0x200000, kThread, {0x200040});
  d.instance(0x200040, kString, {0x200080, 1});  // coder 1: UTF-16, in the JVM's order
  d.primitives(0x200080, hp::kByte, std::string("h\0\xe9\0l\0d\0<\xd8\x00\xdf", 12));  // "héld" and U+1F300
  d.root(hp::kRootThreadObject, 0x200000, 7, 107);
  d.trace(107, 7, {{0x50, "main", 0x1400}, {0x51, "hold", 0x1400}});
  d.root(hp::kRootJavaFrame, 0x3000, 7, 1);
  HeapAnalysis a = analyzed(d);
  REQUIRE(a.retainers.size() == 1);
  CHECK(a.retainers[0].path == "local in HeapLeak.hold (thread \"h\xc3\xa9ld\xf0\x9f\x8c\x80\") → int[]");
}

TEST_CASE("classes live as long as their loader: the JDK's for ever, others' through their loader") {
  Hprof d = jdk_heap();
  constexpr uint64_t kLoaderClass = 0x1400, kAppLoaderClass = 0x1440, kApp = 0x1480, kAppArray = 0x14c0,
                     kPlugin = 0x1500, kLoader = 0x3000, kAppLoader = 0x3080;
  d.klass(0x1380, "java/lang/ClassLoader", kObjectClass, {{"parent", hp::kObject}})
      .klass(kLoaderClass, "com/acme/PluginLoader", 0x1380)
      .klass(kAppLoaderClass, "jdk/internal/loader/ClassLoaders$AppClassLoader", 0x1380, {}, {}, 0)
      .klass(kApp, "com/acme/App", kObjectClass, {}, {{"HELD", hp::kObject, 0x3040}}, kAppLoader)
      .klass(kPlugin, "com/acme/Plugin", kObjectClass, {}, {}, kLoader)
      .klass(kAppArray, "[Lcom/acme/Plugin;", kObjectClass, {}, {}, kLoader);
  d.instance(kLoader, kLoaderClass, {kAppLoader});
  d.instance(kAppLoader, kAppLoaderClass, {0});
  d.primitives(0x3040, hp::kByte, std::string(1000, 'h'));
  d.root(hp::kRootJniGlobal, kLoader);
  std::string dump = d.str();
  auto g = read(dump);
  REQUIRE(g);
  // Every class of the boot loader is a root, an array class too, which
  // HotSpot does not dump as a sticky class; so are those of the JDK's
  // application loader.
  std::set<uint32_t> system;
  for (const auto& r : g->roots())
    if (r.kind == ember::heap::kSystemClass) system.insert(r.object);
  CHECK(system.count(g->id_of(kBytes)));
  CHECK(system.count(g->id_of(kNodes)));
  CHECK(system.count(g->id_of(kApp)));
  CHECK(!system.count(g->id_of(kPlugin)));
  // Another loader holds its classes.
  auto loaded = g->refs(g->id_of(kLoader));
  CHECK(std::count(loaded.begin(), loaded.end(), g->id_of(kPlugin)) == 1);
  CHECK(std::count(loaded.begin(), loaded.end(), g->id_of(kAppArray)) == 1);
  CHECK(std::count(loaded.begin(), loaded.end(), g->id_of(kApp)) == 0);
  HeapAnalysis a = ember::heap::analyze_heap(*g, dump, 5).value();
  CHECK(a.unreached_objects == 0);
  auto found = g->find_references(dump, std::vector<std::pair<uint32_t, uint32_t>>{{g->id_of(kLoader), g->id_of(kPlugin)}});
  CHECK(found[0].kind == ember::heap::kLoadedClass);
}

TEST_CASE("a heap dump cut short or corrupt is refused with its reason") {
  std::string whole = cache_heap(16);
  REQUIRE(read(whole));
  for (size_t n = 0; n < whole.size(); ++n) {
    auto g = read(whole.substr(0, n));
    INFO("cut at " << n);
    REQUIRE(!g);
  }
  auto cut = read(whole.substr(0, whole.size() - 9));
  REQUIRE(!cut);
  CHECK(cut.error() == "the dump ends before its HEAP DUMP END record (it was cut short)");
  CHECK(read("hello").error().find("not an HPROF heap dump") != std::string::npos);

  auto refused = [](Hprof d) {
    auto g = read(d.str());
    return g ? std::string() : g.error();
  };
  Hprof twice = jdk_heap();  // two objects at one address
  twice.primitives(0x3000, hp::kByte, "a").primitives(0x3000, hp::kByte, "b");
  CHECK(refused(twice).ends_with("two objects at one address"));
  Hprof unaligned = jdk_heap();
  unaligned.primitives(0x3004, hp::kByte, "a");
  CHECK(refused(unaligned).ends_with("an object at an address not 8-byte aligned"));
  Hprof unknown = jdk_heap();  // an instance of a class not in the dump
  unknown.instance(0x3000, 0x9000);
  CHECK(refused(unknown).ends_with("an instance of a class the dump does not hold"));
  Hprof fields = jdk_heap();  // values that do not fit the class's fields
  fields.instance_values(0x3000, kString, "abc");
  CHECK(refused(fields).ends_with("an instance whose values do not fit its class's fields"));
  Hprof loop = jdk_heap();  // a class that is its own superclass
  loop.klass(0x1400, "Loop", 0x1400, {{"x", hp::kInt}}).instance_values(0x3000, 0x1400, std::string(4, '\0'));
  CHECK(refused(loop).find("loop") != std::string::npos);

  // A sub-record of an unknown kind; a record longer than the dump.
  std::string tagged = whole;
  size_t segment = tagged.find('\x1c', 31);
  REQUIRE(segment != std::string::npos);
  std::string odd = tagged;
  odd[segment + 9] = '\x42';
  CHECK(read(odd).error().ends_with("an unknown heap dump record 66"));
  std::string longer = whole;
  longer[segment + 5] = '\x7f';
  CHECK(read(longer).error().ends_with("a record longer than the rest of the dump"));
}

// A pin array (agent/protocol.h's pin): an Object[] held by a JNI global
// reference, its element 0 the marker string, then objects a caller
// follows. The cache's first two payloads; the weak reference's referent,
// garbage; the head of a linked chain's fourth node's payload. A decoy
// with another marker holds the cache's last payload.
std::string pinned_heap() {
  Hprof d = jdk_heap();
  constexpr uint64_t kObjects = 0x1400, kNode = 0x1440;
  d.klass(kCache, "com/acme/Cache", kObjectClass, {}, {{"LIMIT", hp::kInt, 5}, {"ENTRIES", hp::kObject, 0x2000}})
      .klass(kWorker, "com/acme/Worker", kObjectClass, {{"weak", hp::kObject}, {"chain", hp::kObject}})
      .klass(kObjects, "[Ljava/lang/Object;", kObjectClass)
      .klass(kNode, "com/acme/Node", kObjectClass, {{"next", hp::kObject}, {"payload", hp::kObject}});
  d.instance(0x2000, kHashMap, {0x2040, 4, 0});
  d.array(0x2040, kNodes, {0x2080, 0x3080, 0x4080, 0x5080});
  for (uint64_t b : {0x2080, 0x3080, 0x4080, 0x5080}) d.primitives(b, hp::kByte, std::string(4096, 'x'));
  d.instance(0x6000, kWorker, {0x6040, 0x8000});
  d.instance(0x6040, kWeak, {0x6080, 0});
  d.primitives(0x6080, hp::kByte, std::string(100, 'w'));
  for (uint64_t k = 0; k < 4; ++k)  // Worker.chain: 4 nodes, each with a payload
    d.instance(0x8000 + k * 0x80, kNode, {k < 3 ? 0x8000 + (k + 1) * 0x80 : 0, 0x8040 + k * 0x80});
  for (uint64_t k = 0; k < 4; ++k) d.primitives(0x8040 + k * 0x80, hp::kByte, std::string(8, 'c'));
  add_thread(d, 0x7000, "worker-1", 1);
  d.trace(101, 1, {{0x99, "run", kWorker}});
  d.root(hp::kRootJavaFrame, 0x6000, 1, 0);
  auto pin = [&](uint64_t at, const std::string& marker, std::vector<uint64_t> objects) {
    d.instance(at + 0x40, kString, {at + 0x80, 0});
    d.primitives(at + 0x80, hp::kByte, marker);
    objects.insert(objects.begin(), at + 0x40);
    d.array(at, kObjects, objects);
    d.root(hp::kRootJniGlobal, at);
  };
  pin(0x9000, "ember-pin other", {0x5080});
  pin(0xa000, "ember-pin t0k3n", {0x2080, 0x3080, 0x6080, 0x8040 + 3 * 0x80, 0x8040});
  return d.str();
}

TEST_CASE("a pin array: its objects followed, not held through it; their paths, holders and garbage") {
  std::string dump = pinned_heap();
  auto g = ember::heap::read_heap_graph(dump, {}, {}, "ember-pin t0k3n");
  INFO((g ? "" : g.error()));
  REQUIRE(g);
  REQUIRE(g->pin_found());
  std::vector<ember::heap::ObjectId> want;
  for (uint64_t a : {0x2080, 0x3080, 0x6080, 0x8040 + 3 * 0x80, 0x8040}) want.push_back(g->id_of(a));
  CHECK(g->pinned() == want);
  HeapAnalysis a = ember::heap::analyze_heap(*g, dump, 5, {}, g->pinned()).value();
  // The referent, held only by the weak reference and the pin, is garbage;
  // so are the pin's marker and its bytes.
  CHECK(a.unreached_objects == 3);
  REQUIRE(a.followed.size() == 5);
  CHECK(a.followed[0].reached());
  CHECK(a.followed[0].path == "static com.acme.Cache.ENTRIES → java.util.HashMap.table → java.util.HashMap$Node[] [] → byte[]");
  CHECK(a.followed[1].path == a.followed[0].path);
  CHECK(!a.followed[2].reached());
  // Deep in a chain or at its head: named alike, the chain by its last node.
  const std::string chained = "local in com.acme.Worker.run (thread \"worker-1\") → com.acme.Worker.chain → com.acme.Node.payload → byte[]";
  CHECK(a.followed[3].path == chained);
  CHECK(a.followed[4].path == chained);
  CHECK(a.followed[3].chain.size() == 6);  // the worker, four nodes, the payload
  std::vector<const ember::heap::Holding*> all;
  for (const auto& h : a.followed) all.push_back(&h);
  std::vector<ember::heap::HeldAlike> groups = ember::heap::group_holdings(all);
  REQUIRE(groups.size() == 2);
  // Two objects each: by path then, the chain's first.
  CHECK(groups[0].path == chained);
  CHECK(groups[0].objects == 2);
  // The chain's head and its fourth payload share the worker and the first node.
  CHECK(groups[0].holder == g->id_of(0x8000));
  CHECK(groups[0].holder_retained == 4 * (24 + 24));
  // Both payloads of the cache: through its table, which retains three of
  // its four (the decoy pin, no pin of this reading, holds the last too).
  CHECK(groups[1].objects == 2);
  CHECK(ember::heap::object_name(*g, groups[1].holder) == "java.util.HashMap$Node[]");
  CHECK(groups[1].holder_retained == 32 + 3 * 4112);

  // Read without the pin's marker, the array holds what it pins.
  auto plain = read(dump);
  REQUIRE(plain);
  CHECK(!plain->pin_found());
  CHECK(ember::heap::analyze_heap(*plain, dump, 5).value().unreached_objects == 0);
  // A marker no array has: none found.
  CHECK(!ember::heap::read_heap_graph(dump, {}, {}, "ember-pin gone").value().pin_found());
}

TEST_CASE("heap snapshots: saved, read back, diffed by retained bytes, bad rows refused") {
  using ember::heap::ClassSize;
  std::vector<ClassSize> before{{"byte[]", 100, 4000, 4000}, {"com.acme.Cache", 0, 0, 0}, {"java.util.HashMap", 2, 96, 5000}};
  std::string text = ember::heap::heap_snapshot_text(before, "JVM 1, then");
  CHECK(text.starts_with("# ember heap snapshot: JVM 1, then\n"));
  auto back = ember::heap::parse_heap_snapshot(text, "snap");
  REQUIRE(back);
  REQUIRE(back->size() == 3);
  CHECK((*back)[2].name == "java.util.HashMap");
  CHECK((*back)[2].retained == 5000);
  std::vector<ClassSize> now{{"byte[]", 300, 12000, 12000}, {"java.util.HashMap", 2, 96, 900}, {"Gone.Not", 0, 0, 0}};
  auto d = ember::heap::diff_heap_snapshots(*back, now);
  REQUIRE(d.size() == 2);  // com.acme.Cache and Gone.Not did not change
  CHECK(d[0].now.name == "byte[]");
  CHECK(d[0].d_retained == 8000);
  CHECK(d[0].d_instances == 200);
  CHECK(d[1].now.name == "java.util.HashMap");
  CHECK(d[1].d_retained == -4100);
  std::string report = ember::heap::heap_diff_report(d, 1);
  CHECK(report.find("+7.8 KiB") != std::string::npos);
  CHECK(report.find("(1 more classes changed)") != std::string::npos);
  CHECK(ember::heap::parse_heap_snapshot("1 2 x\n", "f").error() ==
        "f:1: not a heap snapshot row (INSTANCES SHALLOW RETAINED CLASS)");
  CHECK(ember::heap::parse_heap_snapshot("# only\n", "f").error() == "f: no heap snapshot rows in it");
}

TEST_CASE("allocation sites of the classes that retain most, from an allocation profile") {
  using ember::flamegraph::Frame;
  using ember::flamegraph::FrameKind;
  ember::flamegraph::Profile alloc;
  auto f = [&](const char* name, FrameKind kind) { return alloc.intern(Frame{name, kind, ""}); };
  auto process = f("java", FrameKind::Process), main = f("App.main", FrameKind::Jit), init = f("Payload.<init>", FrameKind::Inlined),
       jvm = f("AllocTracer::send", FrameKind::Cpp), other = f("App.other", FrameKind::Interpreted);
  auto bytes = f("byte[]", FrameKind::Native), payload = f("Payload", FrameKind::Native);  // as read back from pprof
  std::vector<ember::flamegraph::FrameId> a{process, main, init, jvm, bytes}, b{process, other, bytes}, c{process, main, payload};
  alloc.add(a, 900);
  alloc.add(b, 100);
  alloc.add(c, 50);
  HeapAnalysis analysis;
  analysis.classes = {{"byte[]", 10, 1000, 1000}, {"Payload", 10, 240, 1240}, {"Unrelated", 1, 16, 16}};
  std::string out = ember::heap::allocation_sites(analysis, alloc, "alloc.pb.gz", 10);
  CHECK(out.find("live allocations sampled in alloc.pb.gz") != std::string::npos);
  CHECK(out.find("  byte[]: 90% Payload.<init> ← App.main; 10% App.other\n") != std::string::npos);
  CHECK(out.find("  Payload: 100% App.main\n") != std::string::npos);
  CHECK(out.find("Unrelated") == std::string::npos);
  HeapAnalysis none;
  none.classes = {{"Other", 1, 8, 8}};
  CHECK(ember::heap::allocation_sites(none, alloc, "x", 10).find("none of these classes is in it") != std::string::npos);
}

TEST_CASE("each object's references, whatever groups' sizes and where they start") {
  // Groups of 1 to 200 references, so that they start and end on either
  // side of 64-reference words, the last one too.
  // 51: the last group starts at reference 319, the last of a 64-bit word.
  for (uint32_t first_size : {1u, 51u, 62u, 63u, 64u, 65u, 127u}) {
    Hprof d;
    d.klass(at(1), "java/lang/Class").klass(at(2), "[LX;");
    const uint32_t objects = 400, first = 3;
    std::vector<std::vector<uint32_t>> want(objects + first);
    std::vector<std::vector<uint64_t>> elements(objects + first);
    for (uint32_t k = 0; k < first_size; ++k) want[0].push_back(first + k);
    uint32_t holder = first;
    for (uint32_t size : {1u, 200u, 3u, 64u, 150u}) {
      for (uint32_t k = 0; k < size; ++k) {
        uint32_t to = first + (holder * 7 + k) % objects;
        elements[holder].push_back(at(to));
        want[holder].push_back(to);
      }
      holder += 3;
    }
    for (uint32_t k = first; k < objects + first; ++k) d.array(at(k), at(2), elements[k]);
    for (uint32_t to : want[0]) d.root(hp::kRootJniGlobal, at(to));
    // The system classes come after the dump's own roots.
    want[0].push_back(1);
    want[0].push_back(2);
    std::string dump = d.str();
    auto g = read(dump);
    REQUIRE(g);
    INFO("roots' group of " << first_size);
    for (uint32_t id = 0; id < want.size(); ++id) {
      auto refs = g->refs(id);
      std::vector<uint32_t> got(refs.begin(), refs.end());
      if (id == 0) std::sort(got.end() - 2, got.end());
      REQUIRE(got == want[id]);
      if (id >= first) REQUIRE(g->class_ref(id) == 2);
    }
  }
}
