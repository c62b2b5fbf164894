// A JVM's heap as the agent streams it (agent/heap_stream.h): objects
// with their class and shallow size, the references between them, and
// the GC roots with their kind.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember::heap {

// Told, as a pass over a stream goes, that it is done with the bytes before
// `offset`: a mapped stream can let their pages go, so that ember holds a
// window of the stream, not all of it (a next pass maps them again, from
// the page cache).
using DoneWith = std::function<void(size_t offset)>;

// Objects are known by their id in the stream; id 0 stands for the GC roots.
using ObjectId = uint32_t;
inline constexpr ObjectId kRoots = 0;
inline constexpr ObjectId kNoObject = UINT32_MAX;

struct Field {
  std::string name;
  bool is_static = false;
};

struct HeapClass {
  std::string name;  // "java.util.HashMap", "byte[]"
  ObjectId super = 0;
  uint32_t field_base = 0;
  std::vector<Field> fields;  // declared, in JVMTI's order
  bool known = false;         // a C record named it
};

// A reference as the stream gives it: to which object, of which kind, and
// where it is held.
struct Reference {
  ObjectId object = 0;
  uint8_t kind = 0;     // agent::heap_stream::Kind
  uint32_t index = 0;   // field, array element or constant pool index
  ObjectId thread = 0;  // stack and JNI locals: the thread's id, 0 unknown
  uint32_t depth = 0;   // its frame's depth
  uint64_t method = 0;  // its method's key (HeapGraph::method_name)
};

class HeapGraph {
 public:
  // Ids run to size(); ids the walk did not reach are absent.
  size_t size() const { return class_of_.size(); }
  bool present(ObjectId id) const { return id < size() && class_of_[id] != kNoObject; }
  ObjectId class_of(ObjectId id) const { return class_of_[id]; }  // 0: unknown
  uint64_t shallow(ObjectId id) const { return id < words_.size() ? uint64_t{words_[id]} * 8 : 0; }
  // The objects `id` references (the roots' for kRoots), as reported, but
  // for its reference to its class: that is class_ref(id).
  std::span<const ObjectId> refs(ObjectId id) const;
  // Its class, if the walk reported that `id` references it (JVMTI reports
  // it for every object but a class); else kNoObject. Kept as a bit: each
  // object has one, and storing it would cost 4 bytes an object.
  ObjectId class_ref(ObjectId id) const {
    return id / 64 < class_refs_.size() && class_refs_[id / 64] >> (id % 64) & 1 ? class_of_[id] : kNoObject;
  }
  size_t reference_count() const { return reference_count_; }
  // Parts of the graph an analysis can let go of while it needs the memory
  // (refs() and class_ref(), or shallow(), answer nothing meanwhile), and
  // read again from the stream the graph was read from.
  enum Part : unsigned { kReferences = 1, kSizes = 2 };
  void drop(unsigned parts);
  std::expected<void, std::string> reload(std::string_view stream, unsigned parts, const DoneWith& done_with = {});
  // Each reference the graph holds (those refs() and class_ref() give) as
  // (from, to), read from the stream again: references dropped or not.
  std::expected<void, std::string> for_each_reference(std::string_view stream,
                                                      const std::function<void(ObjectId, ObjectId)>& f,
                                                      const DoneWith& done_with = {}) const;

  // A class by the id of its java.lang.Class object; its name, or
  // "[unknown class]".
  const HeapClass* find_class(ObjectId id) const;
  std::string_view class_name(ObjectId id) const;
  // The name of the field `index` of JVMTI's numbering (agent/heap_stream.h)
  // in an object of class `klass`, or in the statics of `klass`; "" if not known.
  std::string_view field_name(ObjectId klass, uint32_t index) const;
  std::string_view thread_name(ObjectId id) const;
  std::string_view method_name(uint64_t key) const;

  // The GC roots' references, in the stream's order.
  const std::vector<Reference>& roots() const { return roots_; }
  uint64_t objects() const { return objects_; }
  uint64_t pause_ns() const { return pause_ns_; }
  uint64_t unknown_class() const { return unknown_class_; }
  uint64_t bytes() const { return bytes_; }  // shallow, of all objects
  // References left out of the graph: the referents of weak and phantom
  // references, which do not keep an object alive through a GC (HotSpot
  // reports them as plain fields).
  uint64_t referents() const { return referents_; }

 private:
  friend class GraphBuilder;
  std::vector<ObjectId> class_of_;  // per id; kNoObject: absent
  std::vector<uint32_t> words_;     // shallow size in 8-byte words
  // Each id's references are refs_[begin_[id]] up to the next group's
  // start: a bit per reference in group_starts_ (4 bytes an object less
  // than a count each).
  std::vector<uint32_t> begin_;
  std::vector<uint64_t> group_starts_;
  std::vector<ObjectId> refs_;
  std::vector<uint64_t> class_refs_;  // a bit per id: it references its class
  size_t dropped_refs_ = 0;           // refs_.size() when they were dropped
  uint64_t reference_count_ = 0;
  std::unordered_map<ObjectId, HeapClass> classes_;
  std::unordered_map<ObjectId, std::string> threads_;
  std::unordered_map<uint64_t, std::string> methods_;
  std::vector<Reference> roots_;
  uint64_t objects_ = 0, pause_ns_ = 0, unknown_class_ = 0, bytes_ = 0, referents_ = 0;
};

// Reads a whole stream, or says why it is refused (truncated, corrupt, or
// the walk failed in the JVM).
std::expected<HeapGraph, std::string> read_heap_graph(std::string_view stream, const DoneWith& done_with = {});

// For each (from, to) pair, how `from` references `to` in the stream (the
// first such reference); kind 0 where it does not. A second pass over a
// stream read_heap_graph accepted: the graph keeps no per-reference
// details, which few references ever need (the paths shown).
std::vector<Reference> find_references(std::string_view stream, std::span<const std::pair<ObjectId, ObjectId>> pairs,
                                       const DoneWith& done_with = {});

// The name JVMTI's reference kind is shown by ("static field", "JNI global").
std::string_view kind_name(uint8_t kind);

}  // namespace ember::heap
