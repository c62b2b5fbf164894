// A JVM's heap as HotSpot dumps it (HPROF, user/heap/hprof.h): objects
// with their class and shallow size, the references between them, and the
// GC roots with their kind.
//
// Objects are known by dense ids, not by their addresses: id 0 stands for
// the GC roots, and the objects of the dump are 1 to objects() in the
// order of their addresses. The graph keeps what the analysis needs most
// (each object's class, size and references) in arrays of that id; what
// it needs seldom (how a reference is held) it reads from the dump again.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember::heap {

// Told, as a pass over a dump goes, that it is done with the bytes before
// `offset`: a mapped dump can let their pages go, so that ember holds a
// window of the dump, not all of it (a next pass maps them again, from the
// page cache).
using DoneWith = std::function<void(size_t offset)>;

using ObjectId = uint32_t;
inline constexpr ObjectId kRoots = 0;
inline constexpr ObjectId kNoObject = UINT32_MAX;

// How one object references another, or how a GC root holds one.
enum Kind : uint8_t {
  kClassRef = 1,      // an object's reference to its class
  kField,             // index: the field, counted as the dump lists them (HeapGraph::field_name)
  kArrayElement,      // index: the element
  kStaticField,       // from a class; index: its static field
  kSuperclass,        // from a class
  kClassLoader,       // from a class
  kSigners,           // from a class
  kProtectionDomain,  // from a class
  kLoadedClass,       // from a class loader: a class it defined, which it keeps loaded
  // The GC roots.
  kJniGlobal,
  kJniLocal,     // thread, depth, method
  kStackLocal,   // thread, depth, method
  kNativeStack,  // thread
  kSystemClass,
  kThreadBlock,  // thread
  kMonitor,
  kThreadRoot,  // thread
  kUnknownRoot,
};

// The layout of objects in the JVM the dump came from, which the dump does
// not tell: shallow sizes are worked out from it and from the fields.
struct HeapLayout {
  uint32_t reference = 4;     // a reference: 4 bytes with compressed oops, else 8
  uint32_t header = 12;       // an object's mark word and class pointer
  uint32_t array_header = 16; // an array's, its length included
  uint32_t alignment = 8;     // ObjectAlignmentInBytes
  // What HotSpot adds to every java.lang.Class object beyond the fields
  // the dump lists (fields it injects: the Klass*, the size...).
  uint32_t mirror_extra = 0;
};

// A field as a class dump declares it; type: HPROF's basic type (hprof.h).
struct Field {
  std::string name;
  uint8_t type = 0;
};

struct HeapClass {
  std::string name;  // "java.util.HashMap", "byte[]"
  ObjectId super = 0;
  std::vector<Field> fields;   // the instance fields it declares, in the dump's order
  std::vector<Field> statics;  // its static fields (and HotSpot's <resolved_references>)
};

// A reference as the dump gives it: to which object, of which kind, and
// where it is held.
struct Reference {
  ObjectId object = 0;
  uint8_t kind = 0;     // Kind
  uint32_t index = 0;   // field, static field or array element index
  ObjectId thread = 0;  // roots on a thread: the thread's id, 0 unknown
  uint32_t depth = 0;   // stack and JNI locals: the frame's depth
  uint64_t method = 0;  // its method's key (HeapGraph::method_name)
};

class HeapIndex;

class HeapGraph {
 public:
  HeapGraph();
  HeapGraph(HeapGraph&&) noexcept;
  HeapGraph& operator=(HeapGraph&&) noexcept;
  ~HeapGraph();

  // Ids run to size(): the roots, then the objects.
  size_t size() const { return class_of_.size(); }
  ObjectId class_of(ObjectId id) const { return class_of_[id]; }
  uint64_t shallow(ObjectId id) const { return id < words_.size() ? uint64_t{words_[id]} * 8 : 0; }
  // The objects `id` references (the roots' for kRoots), in the dump's
  // order, but for its reference to its class: that is class_ref(id).
  std::span<const ObjectId> refs(ObjectId id) const;
  // Its class, for an object that is not a class itself; else kNoObject.
  // Kept as a bit: each object has one, and storing it would cost 4 bytes
  // an object.
  ObjectId class_ref(ObjectId id) const {
    return id / 64 < class_refs_.size() && class_refs_[id / 64] >> (id % 64) & 1 ? class_of_[id] : kNoObject;
  }
  size_t reference_count() const { return reference_count_; }
  // Parts of the graph an analysis can let go of while it needs the memory
  // (refs() and class_ref(), or shallow(), answer nothing meanwhile), and
  // read again from the dump the graph was read from.
  enum Part : unsigned { kReferences = 1, kSizes = 2 };
  void drop(unsigned parts);
  // Whether it holds the references now (none dropped, or read again).
  bool has_references() const { return !begin_.empty() || size() == 0; }
  std::expected<void, std::string> reload(std::string_view dump, unsigned parts, const DoneWith& done_with = {});
  // Each reference the graph holds (those refs() and class_ref() give) as
  // (from, to), read from the dump again: references dropped or not.
  std::expected<void, std::string> for_each_reference(std::string_view dump,
                                                      const std::function<void(ObjectId, ObjectId)>& f,
                                                      const DoneWith& done_with = {}) const;
  // For each (from, to) pair, how `from` references `to` in the dump (the
  // first such reference); kind 0 where it does not. The graph keeps no
  // per-reference details, which few references ever need (the paths shown).
  std::vector<Reference> find_references(std::string_view dump, std::span<const std::pair<ObjectId, ObjectId>> pairs,
                                         const DoneWith& done_with = {}) const;

  // The id of the object at `address` in the dump; kNoObject if none.
  ObjectId id_of(uint64_t address) const;
  // A class by the id of its java.lang.Class object; its name, or
  // "[unknown class]".
  const HeapClass* find_class(ObjectId id) const;
  std::string_view class_name(ObjectId id) const;
  // The name of field `index` of an object of class `klass`: its own
  // fields first, then its superclass's, as the dump lists their values;
  // "" if not known.
  std::string_view field_name(ObjectId klass, uint32_t index) const;
  std::string_view static_field_name(ObjectId klass, uint32_t index) const;
  std::string_view thread_name(ObjectId id) const;
  std::string_view method_name(uint64_t key) const;

  // With read_heap_graph's `pin`: whether the dump holds the pin array,
  // and its elements after the marker, in order (kNoObject: null, or an
  // object the dump does not hold).
  bool pin_found() const { return pin_found_; }
  const std::vector<ObjectId>& pinned() const { return pinned_; }

  // The GC roots' references, in the dump's order.
  const std::vector<Reference>& roots() const { return roots_; }
  uint64_t objects() const { return size() ? size() - 1 : 0; }
  uint64_t bytes() const { return bytes_; }  // shallow, of all objects
  // References left out of the graph: the referents of weak and phantom
  // references, which do not keep an object alive through a GC (HotSpot
  // dumps them as plain fields).
  uint64_t referents() const { return referents_; }

 private:
  friend class GraphBuilder;
  friend std::expected<HeapGraph, std::string> read_heap_graph(std::string_view, const HeapLayout&, const DoneWith&,
                                                               const std::string&);
  std::unique_ptr<HeapIndex> index_;  // what the dump's passes need: classes, addresses, roots
  std::vector<ObjectId> class_of_;    // per id
  std::vector<uint32_t> words_;       // shallow size in 8-byte words
  // Each id's references are refs_[begin_[id]] up to the next group's
  // start: a bit per reference in group_starts_ (4 bytes an object less
  // than a count each).
  std::vector<uint32_t> begin_;
  std::vector<uint64_t> group_starts_;
  std::vector<ObjectId> refs_;
  std::vector<uint64_t> class_refs_;  // a bit per id: it references its class
  size_t dropped_refs_ = 0;           // refs_.size() when they were dropped
  uint64_t reference_count_ = 0;
  std::vector<Reference> roots_;
  uint64_t bytes_ = 0, referents_ = 0;
  bool pin_found_ = false;
  std::vector<ObjectId> pinned_;
};

// Reads a whole dump, or says why it is refused (not HPROF, truncated or
// corrupt). Shallow sizes are worked out with `layout`. `pin`: the marker
// of a pin array (the text of its element 0, a String: agent/protocol.h's
// `pin`), an Object[] held by a JNI global reference that holds objects a
// caller follows without keeping them alive: the graph has its elements
// (pinned()), not its references to them, so that what holds them is what
// the program does.
std::expected<HeapGraph, std::string> read_heap_graph(std::string_view dump, const HeapLayout& layout,
                                                      const DoneWith& done_with = {}, const std::string& pin = {});

// The name a reference's kind is shown by ("static field", "JNI global").
std::string_view kind_name(uint8_t kind);

}  // namespace ember::heap
