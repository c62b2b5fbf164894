#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/heap_stream.h"
#include "user/java/dominators.h"
#include "user/java/heap_graph.h"
#include "user/java/heap_report.h"

namespace hs = ember::agent::heap_stream;
using ember::heap::DominatorTree;
using ember::heap::dominator_tree;
using ember::heap::HeapAnalysis;
using ember::heap::HeapGraph;
using ember::heap::Successors;

namespace {

// A heap stream as the agent writes it (agent/heap_stream.h).
class Stream {
 public:
  Stream() { s_ = hs::kHeader; }
  Stream& klass(uint64_t id, const std::string& name, uint64_t super = 0, uint64_t base = 0,
                std::vector<std::pair<std::string, bool>> fields = {}) {
    byte(hs::kClass).num(id).str(name).num(super).num(base).num(fields.size());
    for (auto& [f, is_static] : fields) num(is_static ? hs::kFieldStatic : 0).str(f);
    return *this;
  }
  Stream& thread(uint64_t id, const std::string& name) { return byte(hs::kThread).num(id).str(name); }
  Stream& begin(uint64_t first) { return byte(hs::kBegin).num(first); }
  Stream& object(uint64_t klass, uint64_t size) {
    ++objects_;
    return byte(hs::kObject).num(klass).num(size);
  }
  Stream& known(uint64_t id, uint64_t klass, uint64_t size) {
    ++objects_;
    return byte(hs::kKnownObject).num(id).num(klass).num(size);
  }
  Stream& from(uint64_t id) { return byte(hs::kFrom).num(id); }
  Stream& ref(unsigned char kind, uint64_t to, std::vector<uint64_t> info = {}) {
    ++refs_;
    int64_t delta = static_cast<int64_t>(to) - static_cast<int64_t>(last_to_);
    last_to_ = to;
    byte(kind).num((static_cast<uint64_t>(delta) << 1) ^ static_cast<uint64_t>(delta >> 63));
    for (uint64_t v : info) num(v);
    return *this;
  }
  Stream& method(uint64_t key, const std::string& name) { return byte(hs::kMethod).num(key).str(name); }
  Stream& end(uint64_t pause_ns = 1000) { return byte(hs::kEnd).num(objects_).num(refs_).num(pause_ns).num(0); }
  const std::string& str() const { return s_; }

 private:
  Stream& byte(unsigned char b) {
    s_ += static_cast<char>(b);
    return *this;
  }
  Stream& num(uint64_t v) {
    for (; v >= 0x80; v >>= 7) s_ += static_cast<char>(v | 0x80);
    s_ += static_cast<char>(v);
    return *this;
  }
  Stream& str(const std::string& v) {
    num(v.size());
    s_ += v;
    return *this;
  }
  std::string s_;
  uint64_t objects_ = 0, refs_ = 0, last_to_ = 0;
};

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

// A random heap: class objects 1..4, then objects 5..n+4 of classes 1 to 3
// (4 is the class of classes), of a few sizes, each referencing its class
// as the walk reports it; random references and roots, some classes among
// the roots (system classes), some held by their instances only. The same
// graph for the naive computation, with node k for id k and 0 the roots.
struct RandomHeap {
  Stream stream;
  std::vector<std::vector<uint32_t>> succ;
  std::vector<uint64_t> size;
  std::vector<uint32_t> klass;  // class id per node
};

RandomHeap random_heap(std::mt19937& rng, uint32_t n) {
  RandomHeap h;
  constexpr uint32_t kClasses = 4, first = kClasses + 1;
  const uint32_t nodes = n + first;
  for (uint32_t c = 1; c <= kClasses; ++c) h.stream.klass(c, "C" + std::to_string(c));
  h.stream.begin(first);
  h.succ.assign(nodes, {});
  h.size.assign(nodes, 0);
  h.klass.assign(nodes, 0);
  for (uint32_t c = 1; c <= kClasses; ++c) {
    h.size[c] = 8 * (1 + rng() % 10);
    h.klass[c] = kClasses;
    h.stream.known(c, kClasses, h.size[c]);
    if (rng() % 2) h.succ[0].push_back(c);
  }
  std::uniform_int_distribution<uint32_t> node(1, nodes - 1);
  std::vector<uint32_t> class_refs(nodes);  // per object: its first references, to its class
  // Every object is first referenced by the roots or by an object
  // recorded before it, as the walk reports them.
  for (uint32_t k = first; k < nodes; ++k) {
    uint32_t holder = k == first || rng() % 4 == 0 ? 0 : std::uniform_int_distribution<uint32_t>(first, k - 1)(rng);
    h.succ[holder].push_back(k);
    h.size[k] = 8 * (1 + rng() % 10);
    h.klass[k] = 1 + rng() % (kClasses - 1);
    h.succ[k].push_back(h.klass[k]);
    if (rng() % 10 == 0) h.succ[k].push_back(h.klass[k]);  // twice: the second kept as a reference
    class_refs[k] = static_cast<uint32_t>(h.succ[k].size());
  }
  for (uint32_t e = 0, extra = rng() % (2 * n + 1); e < extra; ++e) h.succ[node(rng)].push_back(node(rng));
  // Ids are given in record order: objects first, in order, then their references.
  for (uint32_t k = first; k < nodes; ++k) h.stream.object(h.klass[k], h.size[k]);
  for (uint32_t holder = 0; holder < nodes; ++holder) {
    if (h.succ[holder].empty()) continue;
    h.stream.from(holder);
    for (size_t i = 0; i < h.succ[holder].size(); ++i) {
      uint32_t to = h.succ[holder][i];
      if (!holder)
        h.stream.ref(to < first ? hs::kSystemClass : hs::kJniGlobal, to);
      else if (i < class_refs[holder])
        h.stream.ref(hs::kClassRef, to);
      else
        h.stream.ref(hs::kField, to, {0});
    }
  }
  h.stream.end();
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
    auto g = ember::heap::read_heap_graph(h.stream.str());
    REQUIRE(g);
    HeapAnalysis a = ember::heap::analyze_heap(*g, h.stream.str(), 10).value();
    uint64_t all = bytes_cut_off(h, {0});
    INFO("round " << round);
    REQUIRE(a.bytes == all);
    REQUIRE(a.profile.total() == all);
    std::vector<bool> reachable = reached_without(h.succ, 0, {});
    for (const auto& c : a.classes) {
      uint32_t id = static_cast<uint32_t>(std::stoul(c.name.substr(1)));
      std::set<uint32_t> instances;
      for (uint32_t k = 1; k < h.succ.size(); ++k)
        if (h.klass[k] == id && reachable[k]) instances.insert(k);
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

// A cache held by a static field, as in the JVM: classes with fields, a
// class object reached as a system class, a stack root, a weak reference.
Stream cache_heap() {
  Stream s;
  s.klass(1, "java.lang.Object")
      .klass(2, "java.lang.Class", 1)
      .klass(3, "com.acme.Cache", 1, 0, {{"ENTRIES", true}})
      // Two interface fields come first in a HashMap's numbering.
      .klass(4, "java.util.HashMap", 5, 2, {{"table", false}, {"size", false}})
      .klass(5, "java.util.AbstractMap", 1, 0, {{"keySet", false}})
      .klass(6, "java.util.HashMap$Node[]")
      .klass(7, "byte[]")
      .klass(8, "java.lang.ref.Reference", 1, 0, {{"referent", false}, {"queue", false}})
      .klass(9, "java.lang.ref.WeakReference", 8)
      .klass(10, "com.acme.Worker")
      .thread(11, "worker-1")
      .begin(12);
  s.known(3, 2, 600).from(0).ref(hs::kSystemClass, 3);
  s.object(10, 16).ref(hs::kStackLocal, 12, {11, 2, 0x1234});  // 12: a Worker held by a thread's local
  s.from(3).object(4, 48).ref(hs::kStaticField, 13, {0});       // 13: the HashMap
  s.from(13).object(6, 1040).ref(hs::kField, 14, {3});          // 14: its table (index 2 + keySet)
  s.from(14);
  for (int i = 0; i < 4; ++i) s.object(7, 4096).ref(hs::kArrayElement, 15 + i, {uint64_t(i) * 3});
  s.from(12).object(9, 32).ref(hs::kField, 19, {2});  // 19: a WeakReference in the Worker
  s.from(19).object(7, 100).ref(hs::kField, 20, {0});  // 20: its referent, held by nothing else
  s.method(0x1234, "com.acme.Worker.run");
  s.end(5'000'000);
  return s;
}

}  // namespace

TEST_CASE("a cache held by a static field: retained bytes, path with field names, profile, report") {
  Stream s = cache_heap();
  auto g = ember::heap::read_heap_graph(s.str());
  REQUIRE(g);
  CHECK(g->field_name(4, 3) == "table");  // base 2, AbstractMap.keySet, then HashMap's own
  CHECK(g->field_name(4, 2) == "keySet");
  CHECK(g->field_name(4, 1).empty());     // an interface's field: not named
  CHECK(g->referents() == 1);
  HeapAnalysis a = ember::heap::analyze_heap(*g, s.str(), 5).value();
  CHECK(a.weak_objects == 1);
  CHECK(a.weak_bytes == 104);
  CHECK(a.pause_ns == 5'000'000);
  REQUIRE(!a.retainers.empty());
  const auto& r = a.retainers[0];
  CHECK(r.name == "java.util.HashMap$Node[]");
  CHECK(r.retained == 1040 + 4 * 4096);
  CHECK(r.objects == 5);
  CHECK(r.path == "static com.acme.Cache.ENTRIES → java.util.HashMap.table → java.util.HashMap$Node[]");
  REQUIRE(r.holds.size() == 2);
  CHECK(r.holds[0].name == "byte[]");
  CHECK(r.holds[0].instances == 4);
  // The root's biggest child is the class; its one big child the map; the
  // map's the table, where the memory spreads out.
  std::string report = ember::heap::heap_report(a, 10);
  CHECK(report.find("paused the JVM for 0.005 s\n") != std::string::npos);
  a.free_ns = 250'000'000;
  CHECK(ember::heap::heap_report(a, 10).find("paused the JVM for 0.005 s, freeing its tags for up to 0.250 s more\n") !=
        std::string::npos);
  CHECK(report.find("1 objects (104 B) reachable only through weak or phantom references") != std::string::npos);
  // The profile: root -> dominators -> class, weights are shallow bytes.
  CHECK(a.profile.total() == a.bytes);
  bool found = false;
  for (const auto& st : a.profile.stacks()) {
    std::string path;
    for (auto f : st.frames) path += a.profile.frames()[f].name + ";";
    if (path == "class com.acme.Cache;java.util.HashMap;java.util.HashMap$Node[];byte[];") {
      found = true;
      CHECK(st.weight == 4 * 4096);
    }
  }
  CHECK(found);
}

TEST_CASE("no pass over a stream reads the bytes it said it was done with") {
  // A stream of some megabytes (several windows): a static array of lists,
  // each a chain of nodes with a payload, each list's first payload shared
  // with the next list.
  Stream s;
  s.klass(1, "java.lang.Object").klass(2, "Holder", 1, 0, {{"LISTS", true}}).klass(3, "Node", 1, 0, {{"next", false}, {"payload", false}})
      .klass(4, "byte[]").klass(5, "Node[]").begin(6);
  s.known(2, 0, 504).known(3, 0, 304).from(0).ref(hs::kSystemClass, 2);  // Node's class: held by its instances
  constexpr uint32_t kLists = 2000, kLength = 100;
  s.from(2).object(5, 16 + 4 * kLists).ref(hs::kStaticField, 6, {0});
  // Ids go by record: each list's first node, then list by list.
  uint32_t next = 7, shared_payload = 0;
  std::vector<uint32_t> first(kLists);
  s.from(6);
  for (uint32_t l = 0; l < kLists; ++l) s.object(3, 24).ref(hs::kArrayElement, first[l] = next++, {l});
  for (uint32_t l = 0; l < kLists; ++l)
    for (uint32_t k = 0, node = first[l]; k < kLength; ++k) {
      uint32_t payload = next++;
      s.from(node).ref(hs::kClassRef, 3).object(4, 64).ref(hs::kField, payload, {1});
      if (k == 0 && l) s.ref(hs::kField, shared_payload, {1});  // the previous list's first payload
      if (k == 0) shared_payload = payload;
      if (k + 1 < kLength) {
        node = next++;
        s.object(3, 24).ref(hs::kField, node, {0});
      }
    }
  s.end();
  const std::string& whole = s.str();
  REQUIRE(whole.size() > (size_t{4} << 20));  // past a window of 4 MiB

  // Its bytes in pages of their own, made unreadable below each offset a
  // pass is done with, readable again when a pass ends (it says so with the
  // stream's size): a read of a released byte faults.
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
  auto g = ember::heap::read_heap_graph(guarded, done_with);
  INFO((g ? "" : g.error()));
  REQUIRE(g);
  HeapAnalysis a = ember::heap::analyze_heap(*g, guarded, 5, done_with).value();
  munmap(mem, span);
  // Each pass let go of the bytes before a window's end on its way.
  auto ends = static_cast<size_t>(std::count(offsets.begin(), offsets.end(), whole.size()));
  CHECK(ends >= 2);
  CHECK(offsets.size() - ends >= ends);

  CHECK(a.bytes == 504 + 16 + 4 * kLists + kLists * kLength * (24 + 64) + 304);
  REQUIRE(!a.retainers.empty());
  CHECK(a.retainers[0].path == "static Holder.LISTS → Node[]");
}

TEST_CASE("find_references answers each pair, a pair asked twice too") {
  Stream s = cache_heap();
  std::vector<std::pair<uint32_t, uint32_t>> pairs{{13, 14}, {3, 13}, {13, 14}, {14, 13}};
  auto found = ember::heap::find_references(s.str(), pairs);
  REQUIRE(found.size() == 4);
  CHECK(found[0].kind == hs::kField);
  CHECK(found[0].index == 3);
  CHECK(found[1].kind == hs::kStaticField);
  CHECK(found[2].kind == hs::kField);
  CHECK(found[2].index == 3);
  CHECK(found[3].kind == 0);  // no such reference
}

TEST_CASE("a stack root is named by its method and thread") {
  Stream s;
  s.klass(1, "int[]").thread(2, "holder").begin(3);
  s.from(0).object(1, 1 << 20).ref(hs::kStackLocal, 3, {2, 0, 0x99});
  s.method(0x99, "HeapLeak.hold").end();
  auto g = ember::heap::read_heap_graph(s.str());
  REQUIRE(g);
  HeapAnalysis a = ember::heap::analyze_heap(*g, s.str(), 5).value();
  REQUIRE(a.retainers.size() == 1);
  CHECK(a.retainers[0].path == "local in HeapLeak.hold (thread \"holder\") → int[]");
}

TEST_CASE("a heap stream cut short or corrupt is refused with its reason") {
  Stream s = cache_heap();
  const std::string& whole = s.str();
  REQUIRE(ember::heap::read_heap_graph(whole));
  for (size_t n = 0; n < whole.size(); ++n) {
    auto g = ember::heap::read_heap_graph(whole.substr(0, n));
    INFO("cut at " << n);
    REQUIRE(!g);
  }
  auto cut = ember::heap::read_heap_graph(whole.substr(0, whole.size() - 8));
  REQUIRE(!cut);
  CHECK(cut.error().find("before its end record") != std::string::npos);

  CHECK(ember::heap::read_heap_graph("hello").error().find("not an ember heap stream") != std::string::npos);
  Stream failed;
  failed.klass(1, "X");
  std::string f = failed.str() + static_cast<char>(hs::kFailed) + static_cast<char>(5) + "oops!";
  CHECK(ember::heap::read_heap_graph(f).error() == "the agent's walk failed: oops!");

  Stream ahead;  // a reference to an object with no record yet
  ahead.klass(1, "X").begin(2).from(0).ref(hs::kJniGlobal, 2).end();
  CHECK(ember::heap::read_heap_graph(ahead.str()).error().find("not yet recorded") != std::string::npos);

  Stream twice;  // one object's references in two groups
  twice.klass(1, "X").begin(2).object(1, 8).object(1, 8).from(0).ref(hs::kJniGlobal, 2).from(2).ref(hs::kField, 3, {0});
  twice.from(0).ref(hs::kJniGlobal, 3).end();
  CHECK(ember::heap::read_heap_graph(twice.str()).error().find("come in two groups") != std::string::npos);

  Stream counts;  // an end record that does not add up
  counts.klass(1, "X").begin(2).object(1, 8).from(0).ref(hs::kJniGlobal, 2);
  std::string c = counts.str() + static_cast<char>(hs::kEnd) + '\x02' + '\x01' + '\x00' + '\x00';
  CHECK(ember::heap::read_heap_graph(c).error().find("the end record counts 2 objects") != std::string::npos);

  Stream unknown;
  unknown.klass(1, "X");
  CHECK(ember::heap::read_heap_graph(unknown.str() + "\x7f").error().find("an unknown record 127") != std::string::npos);
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
    Stream s;
    s.klass(1, "X").begin(2);
    const uint32_t objects = 400;
    for (uint32_t k = 0; k < objects; ++k) s.object(1, 16);
    std::vector<std::vector<uint32_t>> want(objects + 2);
    s.from(0);
    for (uint32_t k = 0; k < first_size; ++k) {
      s.ref(hs::kJniGlobal, 2 + k);
      want[0].push_back(2 + k);
    }
    uint32_t holder = 2;
    for (uint32_t size : {1u, 200u, 3u, 64u, 150u}) {
      s.from(holder);
      for (uint32_t k = 0; k < size; ++k) {
        uint32_t to = 2 + (holder * 7 + k) % objects;
        s.ref(hs::kArrayElement, to, {k});
        want[holder].push_back(to);
      }
      holder += 3;
    }
    s.end();
    auto g = ember::heap::read_heap_graph(s.str());
    REQUIRE(g);
    INFO("roots' group of " << first_size);
    for (uint32_t id = 0; id < want.size(); ++id) {
      auto refs = g->refs(id);
      REQUIRE(std::vector<uint32_t>(refs.begin(), refs.end()) == want[id]);
    }
  }
}
