// What keeps a heap's memory alive, from its graph (user/heap/heap_graph.h):
// retained sizes over the dominator tree, per class and per object, the
// objects where memory accumulates with their shortest path from a GC
// root, and the dominator tree as a flamegraph profile.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "flamegraph/profile.h"
#include "user/heap/heap_graph.h"

namespace ember::heap {

struct ClassSize {
  std::string name;
  uint64_t instances = 0;
  uint64_t shallow = 0;
  // The retained sizes of its instances not dominated by another instance
  // (Eclipse MAT's quick figure): what they hold each on their own. Objects
  // that only several instances hold together are not counted, so freeing
  // all instances frees at least this.
  uint64_t retained = 0;
};

// An object that holds much of the heap, found by going down the dominator
// tree from the root's biggest children while one child retains most of
// the rest (80%): where the memory spreads out, it accumulates (Eclipse
// MAT's leak suspects do the same). Where it spreads over a few fields of
// an object or class (two static collections), each field's is one.
struct Retainer {
  ObjectId object = 0;
  std::string name;       // its class, or "class X" for a java.lang.Class
  uint64_t retained = 0;  // bytes
  uint64_t objects = 0;   // it dominates, itself included
  // How it is held, from a GC root (or from the last static field on the
  // way): "static com.acme.Cache.ENTRIES → java.util.HashMap.table → ...".
  std::string path;
  // The classes it retains most bytes of: name, instances, bytes.
  std::vector<ClassSize> holds;
};

// How the heap holds an object the caller follows (analyze_heap's
// `followed`: a leak report's sampled objects).
struct Holding {
  ObjectId object = kNoObject;
  // Its shortest path from a GC root, the root's object first and it last,
  // each with the bytes it retains (the dominator tree's); empty when no
  // root reaches it: garbage the next collection frees.
  std::vector<std::pair<ObjectId, uint64_t>> chain;
  // The path as Retainer::path names it, from chain[shown_from] (a static
  // field starts it again), array elements as "[]" whatever their index,
  // a linked chain of objects of one class by its last: objects held
  // alike have the same.
  std::string path;
  size_t shown_from = 0;
  bool reached() const { return !chain.empty(); }
};

// Followed objects held alike: by the same path (Holding::path), how many,
// and the deepest object all their paths pass through (the objects
// themselves left out), with the bytes it retains.
struct HeldAlike {
  std::string path;
  uint64_t objects = 0;
  ObjectId holder = kNoObject;
  uint64_t holder_retained = 0;
};
// The reached ones among `holdings` by path, most objects first (then by path).
std::vector<HeldAlike> group_holdings(std::span<const Holding* const> holdings);

// An object as reports name it: its class, or "class X" for a java.lang.Class.
std::string object_name(const HeapGraph& graph, ObjectId object);
// Bytes for a person: "12.3 MiB".
std::string human_bytes(uint64_t bytes);
// A count with thousands separated: "12,345".
std::string grouped(uint64_t value);

struct HeapAnalysis {
  uint64_t objects = 0, bytes = 0, references = 0;
  // How long the dump stopped the JVM, its GC included (0: not known); the
  // caller measures it. At most that long, where only the dump's whole time
  // is known.
  uint64_t pause_ns = 0;
  bool pause_at_most = false;
  // Objects of the dump no GC root reaches: held only through weak or
  // phantom references (the next GC frees them), or by the JVM's own
  // structures, which the dump does not show. They count for nothing here.
  uint64_t unreached_objects = 0, unreached_bytes = 0;
  std::vector<ClassSize> classes;  // by retained bytes, then shallow
  std::vector<Retainer> retainers;  // by retained bytes
  std::vector<Holding> followed;    // analyze_heap's `followed`, in order
  // The dominator tree by class: root → dominators → class, each frame's
  // width the bytes its objects retain (a chain of one class is one frame).
  flamegraph::Profile profile;
};

// `dump` is the one `graph` was read from; `top`: how many retainers to
// find. Parts of the graph are dropped while the dominator tree is built
// (its arrays need the memory) and read again from the dump after; it
// is left without its references and sizes. An error is the dump's, if
// it no longer reads as it did. `followed`: objects whose paths and
// retained bytes the caller wants (HeapAnalysis::followed).
std::expected<HeapAnalysis, std::string> analyze_heap(HeapGraph& graph, std::string_view dump, size_t top,
                                                      const DoneWith& done_with = {},
                                                      std::span<const ObjectId> followed = {});

// The text report: totals, retainers with their paths, `top` classes.
std::string heap_report(const HeapAnalysis& analysis, size_t top);

// Where the `top` classes of most retained bytes were allocated, from a
// recording of the same JVM (`ember record -e alloc --live`): for each
// class that has stacks ending in it, its sites (the two innermost Java
// frames), the heaviest first, by share of its sampled bytes. `source`
// names the recording.
std::string allocation_sites(const HeapAnalysis& analysis, const flamegraph::Profile& alloc, std::string_view source,
                             size_t top);

// A saved snapshot (`ember jvm --heap --save`): '#' comment lines, then
// "INSTANCES SHALLOW RETAINED CLASS" per class.
std::string heap_snapshot_text(const std::vector<ClassSize>& classes, std::string_view comment);
// Reads one back; `source` names it in errors.
std::expected<std::vector<ClassSize>, std::string> parse_heap_snapshot(std::string_view text, std::string_view source);

// A class whose figures changed between two snapshots: now, and now minus before.
struct ClassSizeDelta {
  ClassSize now;
  int64_t d_instances = 0, d_shallow = 0, d_retained = 0;
};
// The classes that changed, the largest change of retained bytes (gained
// or lost) first.
std::vector<ClassSizeDelta> diff_heap_snapshots(const std::vector<ClassSize>& before, const std::vector<ClassSize>& now);
// The diff as a table of `top` rows.
std::string heap_diff_report(const std::vector<ClassSizeDelta>& deltas, size_t top);

}  // namespace ember::heap
