#include "user/heap/heap_graph.h"

#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <unordered_set>

#include "flamegraph/utf8.h"
#include "user/heap/hprof.h"

namespace ember::heap {
namespace {

namespace hp = hprof;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// A class's name as Java writes it, from the JVM's internal one:
// "java/util/HashMap" → "java.util.HashMap", "[[B" → "byte[][]", and a
// hidden class's "Foo$$Lambda+0x..." → "Foo$$Lambda/0x..." (as
// Class.getName() and the class histogram give it).
std::string java_name(std::string_view internal) {
  size_t dims = 0;
  while (dims < internal.size() && internal[dims] == '[') ++dims;
  std::string_view element = internal.substr(dims);
  std::string out;
  if (dims && element.size() == 1) {
    switch (element[0]) {
      case 'Z': out = "boolean"; break;
      case 'C': out = "char"; break;
      case 'F': out = "float"; break;
      case 'D': out = "double"; break;
      case 'B': out = "byte"; break;
      case 'S': out = "short"; break;
      case 'I': out = "int"; break;
      case 'J': out = "long"; break;
      default: out = element; break;
    }
  } else {
    if (dims && element.starts_with('L') && element.ends_with(';')) element = element.substr(1, element.size() - 2);
    out = element;
    std::replace(out.begin(), out.end(), '/', '.');
    std::replace(out.begin(), out.end(), '+', '/');
  }
  for (size_t i = 0; i < dims; ++i) out += "[]";
  return out;
}

// Objects' ids by their addresses: id 1 + the number of objects at lower
// addresses. A bit per 8 bytes of the heap, in chunks of 1 MiB where
// objects are, with each 64-bit word's rank: 2.3% of the heap the dump
// covers, and an id in a few instructions, which every reference needs.
class AddressIds {
 public:
  // The first pass: each object's address, once.
  std::expected<void, std::string> add(uint64_t address) {
    if (address % 8) return std::unexpected("an object at an address not 8-byte aligned");
    uint64_t chunk = address >> kChunkBits;
    if (chunk != last_chunk_ || !last_) {
      auto [it, added] = building_.try_emplace(chunk, static_cast<uint32_t>(chunks_.size()));
      if (added) chunks_.push_back({chunk, std::vector<uint64_t>(kWords), {}});
      last_chunk_ = chunk;
      last_ = &chunks_[it->second];
    }
    uint64_t bit = (address & kChunkMask) >> 3;
    uint64_t& word = last_->bits[bit / 64];
    if (word >> (bit % 64) & 1) return std::unexpected("two objects at one address");
    word |= uint64_t{1} << (bit % 64);
    ++count_;
    return {};
  }
  // After the first pass: ranks and the table of chunks.
  std::expected<void, std::string> finish() {
    building_ = {};
    last_ = nullptr;
    if (count_ >= kNoObject - 1) return std::unexpected("more than 4 G objects");
    std::sort(chunks_.begin(), chunks_.end(), [](const Chunk& a, const Chunk& b) { return a.number < b.number; });
    if (chunks_.empty()) return {};
    first_ = chunks_.front().number;
    if (chunks_.back().number - first_ >= kMaxChunks)
      return std::unexpected("objects spread over more than 1 TiB of addresses");
    table_.assign(chunks_.back().number - first_ + 1, 0);
    uint32_t rank = 0;
    for (size_t i = 0; i < chunks_.size(); ++i) {
      Chunk& c = chunks_[i];
      table_[c.number - first_] = static_cast<uint32_t>(i + 1);
      c.rank.resize(kWords);
      for (size_t w = 0; w < kWords; ++w) {
        c.rank[w] = rank;
        rank += static_cast<uint32_t>(std::popcount(c.bits[w]));
      }
    }
    return {};
  }
  ObjectId id(uint64_t address) const {
    uint64_t chunk = (address >> kChunkBits) - first_;
    if (address % 8 || chunk >= table_.size() || !table_[chunk]) return kNoObject;
    const Chunk& c = chunks_[table_[chunk] - 1];
    uint64_t bit = (address & kChunkMask) >> 3, word = c.bits[bit / 64], below = (uint64_t{1} << (bit % 64)) - 1;
    if (!(word >> (bit % 64) & 1)) return kNoObject;
    return 1 + c.rank[bit / 64] + static_cast<ObjectId>(std::popcount(word & below));
  }
  uint64_t count() const { return count_; }

 private:
  static constexpr unsigned kChunkBits = 20;
  static constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1, kWords = (uint64_t{1} << kChunkBits) / 8 / 64;
  static constexpr uint64_t kMaxChunks = uint64_t{1} << 20;
  struct Chunk {
    uint64_t number;
    std::vector<uint64_t> bits;
    std::vector<uint32_t> rank;
  };
  std::vector<Chunk> chunks_;
  std::unordered_map<uint64_t, uint32_t> building_;  // chunk number → its index, while adding
  uint64_t last_chunk_ = 0;
  Chunk* last_ = nullptr;
  uint64_t first_ = 0, count_ = 0;
  std::vector<uint32_t> table_;  // per chunk number from first_: 1 + its index in chunks_, 0 none
};

}  // namespace

// What the passes over a dump need, found by the first: the objects'
// addresses, the classes and how to read their instances, the roots.
class HeapIndex {
 public:
  // How to read the instances of a class (or the elements of an array class).
  struct Reading {
    ObjectId klass = kNoObject;
    uint32_t values = 0;  // bytes of an instance's field values in the dump
    uint64_t size = 0;    // an instance's shallow size; for an array class, an element's
    uint64_t base = 0;    // for an array class: where its elements start
    // The reference fields: offset among the values, field index.
    std::vector<std::pair<uint32_t, uint32_t>> references;
    uint32_t referent = UINT32_MAX;  // a weak or phantom reference's referent field
    bool loader = false;             // a class loader: it keeps the classes it defined
  };

  uint32_t id_size = 8;
  HeapLayout layout;
  AddressIds ids;
  std::unordered_map<ObjectId, HeapClass> classes;
  std::unordered_map<uint64_t, Reading> readings;  // by class address
  std::unordered_map<ObjectId, uint64_t> mirror_sizes;
  ObjectId class_class = kNoObject;                // java.lang.Class
  ObjectId primitive_arrays[hp::kLong + 1] = {};   // by element type: byte[]...
  std::unordered_map<ObjectId, std::vector<ObjectId>> defined;  // by class loader: the classes it defined
  std::unordered_map<ObjectId, std::string> threads;
  std::unordered_map<uint64_t, std::string> methods;  // by frame id
  uint64_t pin = 0;  // the pin array's address (read_heap_graph's `pin`): its elements are no references

  // How to read the instances of the class at `klass`; nothing if the dump
  // holds no such class. Asked for every object of every pass: a small
  // cache by address before the table.
  const Reading* reading(uint64_t klass) const {
    auto& [address, found] = cache_[(klass >> 3) % cache_.size()];
    if (address != klass) {
      auto it = readings.find(klass);
      address = klass;
      found = it == readings.end() ? nullptr : &it->second;
    }
    return found;
  }

 private:
  mutable std::array<std::pair<uint64_t, const Reading*>, 1024> cache_{};  // address 0: no class
};

namespace {

// A class dump's static fields: (name id, type, value) each.
template <class F>
void each_static(std::string_view statics, uint32_t id_size, F&& f) {
  const char* p = statics.data();
  uint64_t n = hp::be(p, 2);
  p += 2;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t name = hp::be(p, id_size);
    auto type = static_cast<uint8_t>(p[id_size]);
    uint32_t size = hp::type_size(type, id_size);
    f(static_cast<uint32_t>(i), name, type, hp::be(p + id_size + 1, size));
    p += id_size + 1 + size;
  }
}

// Reads a dump's records for its graph: each object with its class and
// size, then (if it has any) its references, the roots' first. Referents of
// weak and phantom references are left out, and counted; so are references
// to objects the dump does not hold (CDS's archived objects of classes not
// loaded yet), uncounted.
template <class Sink>
class GraphPass : public hp::Records::Skip {
 public:
  GraphPass(const HeapIndex& index, Sink& sink, const std::vector<Reference>& roots)
      : x_(index), sink_(sink), roots_(roots) {}
  uint64_t referents = 0;

  std::expected<void, std::string> run(std::string_view dump, const DoneWith& done_with) {
    sink_.from(kRoots);
    for (const Reference& r : roots_)
      if (auto e = sink_.reference(kRoots, r); !e) return e;
    return hp::Records(dump, done_with).run(*this);
  }

  std::expected<void, std::string> class_dump(const hp::ClassDump& c) {
    ObjectId id = x_.ids.id(c.id);
    auto size = x_.mirror_sizes.find(id);
    if (id == kNoObject || size == x_.mirror_sizes.end()) return std::unexpected("a class dump the first pass did not see");
    sink_.object(id, x_.class_class, size->second);
    sink_.from(id);
    for (auto [to, kind] : {std::pair{c.super, kSuperclass}, {c.loader, kClassLoader}, {c.signers, kSigners},
                            {c.protection_domain, kProtectionDomain}})
      if (auto r = refer(id, to, kind, 0); !r) return r;
    std::expected<void, std::string> r;
    each_static(c.statics, x_.id_size, [&](uint32_t i, uint64_t, uint8_t type, uint64_t value) {
      if (type == hp::kObject && r) r = refer(id, value, kStaticField, i);
    });
    return r;
  }
  std::expected<void, std::string> instance(uint64_t address, uint64_t klass, std::string_view values) {
    const HeapIndex::Reading* k = x_.reading(klass);
    if (!k) return std::unexpected("an instance of a class the dump does not hold");
    if (values.size() != k->values) return std::unexpected("an instance whose values do not fit its class's fields");
    ObjectId id = x_.ids.id(address);
    sink_.object(id, k->klass, k->size);
    if (auto r = held(id, k->klass); !r) return r;
    for (auto [offset, index] : k->references) {
      if (index == k->referent) {
        referents += hp::be(values.data() + offset, x_.id_size) != 0;
        continue;
      }
      if (auto r = refer(id, hp::be(values.data() + offset, x_.id_size), kField, index); !r) return r;
    }
    if (k->loader)
      if (auto defined = x_.defined.find(id); defined != x_.defined.end())
        for (ObjectId c : defined->second)
          if (auto r = sink_.reference(id, {.object = c, .kind = kLoadedClass}); !r) return r;
    return {};
  }
  std::expected<void, std::string> object_array(uint64_t address, uint64_t klass, std::string_view elements) {
    const HeapIndex::Reading* k = x_.reading(klass);
    if (!k) return std::unexpected("an array of a class the dump does not hold");
    ObjectId id = x_.ids.id(address);
    uint64_t length = elements.size() / x_.id_size;
    sink_.object(id, k->klass, align_up(k->base + length * k->size, x_.layout.alignment));
    if (auto r = held(id, k->klass); !r) return r;
    if (address == x_.pin) return {};
    for (uint64_t i = 0; i < length; ++i)
      if (auto r = refer(id, hp::be(elements.data() + i * x_.id_size, x_.id_size), kArrayElement, static_cast<uint32_t>(i)); !r)
        return r;
    return {};
  }
  std::expected<void, std::string> primitive_array(uint64_t address, uint8_t type, uint32_t length, std::string_view) {
    ObjectId klass = x_.primitive_arrays[type];
    if (!klass) return std::unexpected("a primitive array whose class the dump does not hold");
    uint64_t element = hp::type_size(type, x_.id_size);
    uint64_t base = element == 8 ? align_up(x_.layout.array_header, 8) : x_.layout.array_header;
    ObjectId id = x_.ids.id(address);
    sink_.object(id, klass, align_up(base + length * element, x_.layout.alignment));
    return held(id, klass);
  }

 private:
  // The object's group of references begins with its class.
  std::expected<void, std::string> held(ObjectId id, ObjectId klass) {
    sink_.from(id);
    return sink_.reference(id, {.object = klass, .kind = kClassRef});
  }
  std::expected<void, std::string> refer(ObjectId from, uint64_t address, uint8_t kind, uint32_t index) {
    if (!address) return {};
    ObjectId to = x_.ids.id(address);
    if (to == kNoObject) return {};
    return sink_.reference(from, {.object = to, .kind = kind, .index = index});
  }

  const HeapIndex& x_;
  Sink& sink_;
  const std::vector<Reference>& roots_;
};

// A sink's base: what it does not define passes by.
struct SkipGraph {
  void object(ObjectId, ObjectId, uint64_t) {}
  void from(ObjectId) {}
  std::expected<void, std::string> reference(ObjectId, const Reference&) { return {}; }
};

}  // namespace

// Builds a graph's arrays from a dump; or, given one read from it already,
// parts it dropped (HeapGraph::Part) again.
class GraphBuilder {
 public:
  GraphBuilder(HeapGraph& graph, unsigned parts) : g(graph), parts_(parts) {
    if (parts & HeapGraph::kReferences) {
      g.reference_count_ = 0;
      g.begin_.assign(g.size(), kNoObject);
      g.refs_.reserve(g.dropped_refs_);
      g.group_starts_.reserve(g.dropped_refs_ / 64 + 1);
      g.class_refs_.assign(g.size() / 64 + 1, 0);
    }
    if (parts & HeapGraph::kSizes) g.words_.assign(g.size(), 0);
  }
  HeapGraph& g;

  void object(ObjectId id, ObjectId klass, uint64_t size) {
    uint32_t words = static_cast<uint32_t>(std::min<uint64_t>((size + 7) / 8, UINT32_MAX));
    if (parts_ & HeapGraph::kSizes) g.words_[id] = words;
    if (whole_) {
      g.class_of_[id] = klass;
      g.bytes_ += uint64_t{words} * 8;
    }
  }
  // Each object's references come together (the first pass refused two
  // objects at one address).
  void from(ObjectId id) {
    if (!(parts_ & HeapGraph::kReferences)) return;
    close_group();
    group_ = id;
    group_size_ = 0;
  }
  std::expected<void, std::string> reference(ObjectId from, const Reference& r) {
    if (!(parts_ & HeapGraph::kReferences)) return {};
    ++g.reference_count_;
    if (r.kind == kClassRef && g.class_ref(from) == kNoObject) {
      g.class_refs_[from / 64] |= uint64_t{1} << (from % 64);
      return {};
    }
    if (g.refs_.size() >= UINT32_MAX - 1) return std::unexpected("more than 4 G references");
    if (group_size_++ == 0) {  // the group's first reference marks where it begins
      g.begin_[from] = static_cast<uint32_t>(g.refs_.size());
      if (g.group_starts_.size() <= g.refs_.size() / 64) g.group_starts_.resize(g.refs_.size() / 64 + 1, 0);
      g.group_starts_[g.refs_.size() / 64] |= uint64_t{1} << (g.refs_.size() % 64);
    }
    g.refs_.push_back(r.object);
    return {};
  }
  void end() { close_group(); }

  // A whole graph's arrays, sized to the dump's ids and (at most) references.
  void whole(size_t ids, size_t refs) {
    whole_ = true;
    g.class_of_.assign(ids, 0);
    g.words_.assign(ids, 0);
    g.begin_.assign(ids, kNoObject);
    g.class_refs_.assign(ids / 64 + 1, 0);
    g.refs_.reserve(refs);
    g.group_starts_.reserve(refs / 64 + 1);
  }

 private:
  // A group without references leaves its object none.
  void close_group() {
    if (group_ != kNoObject && group_size_ == 0) g.begin_[group_] = kNoObject;
    group_ = kNoObject;
  }
  ObjectId group_ = kNoObject;
  uint64_t group_size_ = 0;
  bool whole_ = false;
  unsigned parts_;
};

namespace {

// The first pass: what the others need (HeapIndex), and how many ids and
// references the graph will hold.
class FirstPass : public hp::Records::Skip {
 public:
  explicit FirstPass(HeapIndex& index) : x_(index) {}
  uint64_t references = 0;  // at most: non-null reference values and classes
  std::vector<uint64_t> threads;  // the threads' objects (ROOT THREAD OBJECT)
  std::vector<uint64_t> jni_globals;  // the objects of JNI global references

  void header(uint32_t id_size) { x_.id_size = id_size; }
  void utf8(uint64_t id, std::string_view text) { symbols_[id] = text; }
  void load_class(uint32_t serial, uint64_t klass, uint64_t name) {
    class_serials_[serial] = klass;
    class_names_[klass] = name;
  }
  void frame(uint64_t frame, uint64_t method, uint32_t class_serial) { frames_[frame] = {method, class_serial}; }
  void trace(uint32_t serial, uint32_t, std::string_view ids) {
    auto& frames = traces_[serial];
    for (size_t at = 0; at + x_.id_size <= ids.size(); at += x_.id_size) frames.push_back(hp::be(ids.data() + at, x_.id_size));
  }
  std::expected<void, std::string> root(uint8_t tag, uint64_t object, uint32_t a, uint32_t b) {
    raw_roots_.push_back({tag, object, a, b});
    if (tag == hp::kRootThreadObject) threads.push_back(object);
    if (tag == hp::kRootJniGlobal) jni_globals.push_back(object);
    ++references;
    return {};
  }
  std::expected<void, std::string> class_dump(const hp::ClassDump& c) {
    if (auto r = x_.ids.add(c.id); !r) return r;
    RawClass& k = raw_classes_[c.id];
    k.super = c.super;
    k.loader = c.loader;
    if (c.loader) loaders_.insert(c.loader);
    const char* p = c.fields.data();
    for (uint64_t n = hp::be(p, 2), i = 0; i < n; ++i)
      k.fields.push_back({hp::be(p + 2 + i * (x_.id_size + 1), x_.id_size),
                          static_cast<uint8_t>(p[2 + i * (x_.id_size + 1) + x_.id_size])});
    each_static(c.statics, x_.id_size, [&](uint32_t, uint64_t name, uint8_t type, uint64_t value) {
      k.statics.push_back({name, type});
      references += type == hp::kObject && value;
    });
    references += 4;
    return {};
  }
  std::expected<void, std::string> instance(uint64_t address, uint64_t klass, std::string_view values) {
    // Class dumps come first in HotSpot's dumps: their loaders are known.
    if (loaders_.contains(address)) loader_classes_[address] = klass;
    references += 1 + values.size() / x_.id_size;  // at most
    return x_.ids.add(address);
  }
  std::expected<void, std::string> object_array(uint64_t address, uint64_t, std::string_view elements) {
    references += 1;
    for (size_t at = 0; at + x_.id_size <= elements.size(); at += x_.id_size)
      references += hp::be(elements.data() + at, x_.id_size) != 0;
    return x_.ids.add(address);
  }
  std::expected<void, std::string> primitive_array(uint64_t address, uint8_t, uint32_t, std::string_view) {
    references += 1;
    return x_.ids.add(address);
  }

  // After the pass: the index's classes, readings, names, and the roots.
  std::expected<std::vector<Reference>, std::string> finish();

 private:
  struct RawField {
    uint64_t name;
    uint8_t type;
  };
  struct RawClass {
    uint64_t super = 0, loader = 0;
    std::vector<RawField> fields, statics;
  };
  struct RawRoot {
    uint8_t tag;
    uint64_t object;
    uint32_t a, b;
  };
  std::string symbol(uint64_t id) const {
    auto it = symbols_.find(id);
    return it == symbols_.end() ? std::string() : std::string(it->second);
  }
  std::expected<void, std::string> read_class(uint64_t address, const RawClass& raw);

  HeapIndex& x_;
  std::unordered_map<uint64_t, std::string_view> symbols_;
  std::unordered_map<uint32_t, uint64_t> class_serials_;
  std::unordered_map<uint64_t, uint64_t> class_names_;  // class address → name id
  std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> frames_;  // frame → method name id, class serial
  std::unordered_map<uint32_t, std::vector<uint64_t>> traces_;
  std::unordered_map<uint64_t, RawClass> raw_classes_;
  std::vector<RawRoot> raw_roots_;
  std::unordered_map<ObjectId, uint64_t> fields_bytes_;  // a class's instance fields' bytes, its superclasses' too
  std::unordered_set<uint64_t> loaders_;                  // the class loaders of the classes seen
  std::unordered_map<uint64_t, uint64_t> loader_classes_;  // a class loader → its class
};


std::expected<void, std::string> FirstPass::read_class(uint64_t address, const RawClass& raw) {
  ObjectId id = x_.ids.id(address);
  HeapClass& c = x_.classes[id];
  c.name = java_name(symbol(class_names_.contains(address) ? class_names_[address] : 0));
  if (c.name.empty()) c.name = "[unknown class]";
  c.super = raw.super ? x_.ids.id(raw.super) : 0;
  if (c.super == kNoObject) c.super = 0;
  for (const RawField& f : raw.fields) c.fields.push_back({symbol(f.name), f.type});
  for (const RawField& f : raw.statics) c.statics.push_back({symbol(f.name), f.type});

  HeapIndex::Reading& k = x_.readings[address];
  k.klass = id;
  const HeapLayout& l = x_.layout;
  if (c.name.ends_with("[]")) {  // an array class: its elements are references
    k.size = l.reference;
    k.base = l.reference == 8 ? align_up(l.array_header, 8) : l.array_header;
    return {};
  }
  // The values: its own fields, then its superclass's, up. A weak or
  // phantom reference's referent does not keep an object alive; soft and
  // finalizer references do keep theirs through a GC (until memory runs
  // short; until it is finalized).
  uint64_t bytes = 0;
  uint32_t index = 0;
  bool weak = false;
  int depth = 0;
  for (uint64_t a = address; a; ++depth) {
    auto r = raw_classes_.find(a);
    if (r == raw_classes_.end()) break;
    if (depth > 1000) return std::unexpected("the superclasses of " + c.name + " loop");
    std::string name = a == address ? c.name : java_name(symbol(class_names_.contains(a) ? class_names_[a] : 0));
    weak |= name == "java.lang.ref.WeakReference" || name == "java.lang.ref.PhantomReference";
    k.loader |= name == "java.lang.ClassLoader";
    for (const RawField& f : r->second.fields) {
      uint32_t size = hp::type_size(f.type, x_.id_size);
      if (!size) return std::unexpected("a field of an unknown type in " + c.name);
      if (f.type == hp::kObject) {
        k.references.push_back({k.values, index});
        if (weak && name == "java.lang.ref.Reference" && symbol(f.name) == "referent") k.referent = index;
      }
      k.values += size;
      bytes += f.type == hp::kObject ? l.reference : size;
      ++index;
    }
    a = r->second.super;
  }
  k.size = align_up(l.header + bytes, l.alignment);
  fields_bytes_[id] = bytes;
  return {};
}

std::expected<std::vector<Reference>, std::string> FirstPass::finish() {
  if (auto r = x_.ids.finish(); !r) return std::unexpected(r.error());
  for (const auto& [address, raw] : raw_classes_)
    if (auto r = read_class(address, raw); !r) return std::unexpected(r.error());
  for (const auto& [id, c] : x_.classes) {
    if (c.name == "java.lang.Class") x_.class_class = id;
    static constexpr std::pair<std::string_view, uint8_t> kPrimitive[] = {
        {"boolean[]", hp::kBoolean}, {"char[]", hp::kChar}, {"float[]", hp::kFloat}, {"double[]", hp::kDouble},
        {"byte[]", hp::kByte},       {"short[]", hp::kShort}, {"int[]", hp::kInt},   {"long[]", hp::kLong}};
    for (auto [name, type] : kPrimitive)
      if (c.name == name) x_.primitive_arrays[type] = id;
  }
  if (x_.class_class == kNoObject && !x_.classes.empty()) return std::unexpected("the dump holds no java.lang.Class");
  // A class's object holds java.lang.Class's fields, those HotSpot injects
  // and its static fields (not the constant pool's resolved references,
  // which HotSpot dumps as one).
  const HeapLayout& l = x_.layout;
  uint64_t mirror = l.header + fields_bytes_[x_.class_class] + l.mirror_extra;
  for (const auto& [id, c] : x_.classes) {
    uint64_t statics = 0;
    for (const Field& f : c.statics)
      if (f.name != "<resolved_references>") statics += f.type == hp::kObject ? l.reference : hp::type_size(f.type, x_.id_size);
    x_.mirror_sizes[id] = align_up(mirror + statics, l.alignment);
  }

  // Threads by their serial number; the frames of their traces.
  struct Thread {
    ObjectId id;
    const std::vector<uint64_t>* frames;
  };
  std::unordered_map<uint32_t, Thread> threads;
  for (const RawRoot& r : raw_roots_)
    if (r.tag == hp::kRootThreadObject) {
      auto trace = traces_.find(r.b);
      threads[r.a] = {x_.ids.id(r.object), trace == traces_.end() ? nullptr : &trace->second};
    }
  // A class lives as long as its loader. The JDK's own loaders (boot,
  // platform, application) live as long as the JVM: their classes are
  // system classes, roots, as JVMTI reports them. HotSpot dumps the boot
  // loader's (no loader object) that are not arrays as such (STICKY CLASS).
  // Other loaders hold their classes, as the JVM does without a field the
  // dump would show.
  std::unordered_set<uint64_t> sticky;
  for (const RawRoot& r : raw_roots_)
    if (r.tag == hp::kRootStickyClass) sticky.insert(r.object);
  auto builtin = [&](uint64_t loader) {
    auto klass = loader_classes_.find(loader);
    if (klass == loader_classes_.end() || !class_names_.contains(klass->second)) return false;
    std::string name = java_name(symbol(class_names_[klass->second]));
    return name == "jdk.internal.loader.ClassLoaders$AppClassLoader" ||
           name == "jdk.internal.loader.ClassLoaders$PlatformClassLoader" ||
           name == "sun.misc.Launcher$AppClassLoader" || name == "sun.misc.Launcher$ExtClassLoader";
  };
  for (const auto& [address, raw] : raw_classes_) {
    if ((!raw.loader || builtin(raw.loader)) && !sticky.contains(address))
      raw_roots_.push_back({hp::kRootStickyClass, address, 0, 0});
    ObjectId loader = raw.loader && !builtin(raw.loader) ? x_.ids.id(raw.loader) : kNoObject;
    if (loader != kNoObject) x_.defined[loader].push_back(x_.ids.id(address));
  }
  for (auto& [loader, classes] : x_.defined) std::sort(classes.begin(), classes.end());
  std::vector<Reference> roots;
  for (const RawRoot& raw : raw_roots_) {
    Reference r{.object = x_.ids.id(raw.object)};
    if (r.object == kNoObject) continue;  // not in the dump
    auto thread = threads.find(raw.a);
    switch (raw.tag) {
      case hp::kRootJniGlobal: r.kind = kJniGlobal; break;
      case hp::kRootJniLocal: r.kind = kJniLocal; break;
      case hp::kRootJavaFrame: r.kind = kStackLocal; break;
      case hp::kRootNativeStack: r.kind = kNativeStack; break;
      case hp::kRootStickyClass: r.kind = kSystemClass; break;
      case hp::kRootThreadBlock: r.kind = kThreadBlock; break;
      case hp::kRootMonitorUsed: r.kind = kMonitor; break;
      case hp::kRootThreadObject: r.kind = kThreadRoot; r.thread = r.object; break;
      default: r.kind = kUnknownRoot; break;
    }
    if ((r.kind == kJniLocal || r.kind == kStackLocal || r.kind == kNativeStack || r.kind == kThreadBlock) &&
        thread != threads.end()) {
      r.thread = thread->second.id == kNoObject ? 0 : thread->second.id;
      const auto* frames = thread->second.frames;
      if (r.kind != kNativeStack && r.kind != kThreadBlock && frames && raw.b < frames->size()) {
        r.depth = raw.b;
        r.method = (*frames)[raw.b];
      }
    }
    roots.push_back(r);
  }
  // The methods of the frames the roots are in: "com.acme.Worker.run".
  for (const Reference& r : roots) {
    auto f = frames_.find(r.method);
    if (!r.method || f == frames_.end() || x_.methods.contains(r.method)) continue;
    auto klass = class_serials_.find(f->second.second);
    std::string holder = klass == class_serials_.end() || !class_names_.contains(klass->second)
                             ? "[unknown class]"
                             : java_name(symbol(class_names_[klass->second]));
    x_.methods[r.method] = holder + "." + symbol(f->second.first);
  }
  return roots;
}

// Finds given objects in a dump: an instance's class and values, a
// primitive array's type and data, an object array's elements (copies:
// the pass lets the dump go).
struct FindObjects : hp::Records::Skip {
  struct Found {
    uint64_t klass = 0;
    uint8_t type = 0;  // of a primitive array
    std::string bytes;
    bool objects = false;  // an object array: `bytes` are its elements
  };
  std::unordered_map<uint64_t, Found> wanted;

  std::expected<void, std::string> instance(uint64_t address, uint64_t klass, std::string_view values) {
    if (auto it = wanted.find(address); it != wanted.end()) it->second = {klass, 0, std::string(values)};
    return {};
  }
  std::expected<void, std::string> primitive_array(uint64_t address, uint8_t type, uint32_t, std::string_view data) {
    if (auto it = wanted.find(address); it != wanted.end()) it->second = {0, type, std::string(data)};
    return {};
  }
  std::expected<void, std::string> object_array(uint64_t address, uint64_t klass, std::string_view elements) {
    if (auto it = wanted.find(address); it != wanted.end()) it->second = {klass, 0, std::string(elements), true};
    return {};
  }
};

// The value of field `name` of an instance of the class at `klass`, with
// its type; nothing if it has none.
std::optional<std::pair<uint8_t, uint64_t>> field_value(const HeapIndex& x, uint64_t klass, std::string_view values,
                                                        std::string_view name) {
  size_t at = 0;
  int depth = 0;
  for (ObjectId c = x.ids.id(klass); c && c != kNoObject && depth < 1000; ++depth) {
    auto it = x.classes.find(c);
    if (it == x.classes.end()) break;
    for (const Field& f : it->second.fields) {
      uint32_t size = hp::type_size(f.type, x.id_size);
      if (at + size > values.size()) return std::nullopt;
      if (f.name == name) return std::pair{f.type, hp::be(values.data() + at, size)};
      at += size;
    }
    c = it->second.super;
  }
  return std::nullopt;
}

// A java.lang.String's text from its value array: bytes of Latin-1 or
// UTF-16 in the JVM's order (coder 0 or 1, JDK 9 on), or chars (written
// big-endian).
std::string string_text(uint8_t type, std::string_view data, uint64_t coder) {
  std::string out;
  std::vector<uint16_t> units;
  if (type == hp::kByte && coder == 0) {
    for (unsigned char b : data) flamegraph::append_utf8(out, b);
    return out;
  }
  for (size_t i = 0; i + 1 < data.size(); i += 2) {
    auto lo = static_cast<unsigned char>(data[i]), hi = static_cast<unsigned char>(data[i + 1]);
    units.push_back(type == hp::kChar ? static_cast<uint16_t>(lo << 8 | hi) : static_cast<uint16_t>(hi << 8 | lo));
  }
  for (size_t i = 0; i < units.size(); ++i) {
    uint32_t c = units[i];
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < units.size() && units[i + 1] >= 0xdc00 && units[i + 1] < 0xe000)
      c = 0x10000 + ((c - 0xd800) << 10) + (units[++i] - 0xdc00);
    flamegraph::append_utf8(out, c);
  }
  return out;
}

// The texts of the strings at `addresses` (those that are strings), in two
// passes over the dump: the strings, then their arrays.
std::expected<std::unordered_map<uint64_t, std::string>, std::string> string_texts(
    const HeapIndex& x, const std::vector<uint64_t>& addresses, std::string_view dump, const DoneWith& done_with) {
  FindObjects strings, arrays;
  for (uint64_t a : addresses) strings.wanted[a];
  std::unordered_map<uint64_t, std::string> texts;
  if (strings.wanted.empty()) return texts;
  if (auto r = hp::Records(dump, done_with).run(strings); !r) return std::unexpected(r.error());
  for (const auto& [a, s] : strings.wanted)
    if (auto value = field_value(x, s.klass, s.bytes, "value"); value && value->first == hp::kObject && value->second)
      arrays.wanted[value->second];
  if (auto r = hp::Records(dump, done_with).run(arrays); !r) return std::unexpected(r.error());
  for (const auto& [a, s] : strings.wanted) {
    auto value = field_value(x, s.klass, s.bytes, "value");
    auto coder = field_value(x, s.klass, s.bytes, "coder");
    auto array = value ? arrays.wanted.find(value->second) : arrays.wanted.end();
    if (array == arrays.wanted.end() || !array->second.type) continue;
    texts[a] = string_text(array->second.type, array->second.bytes, coder ? coder->second : 0);
  }
  return texts;
}

// The names of the threads among the roots: their name strings' texts.
std::expected<void, std::string> name_threads(HeapIndex& x, const std::vector<uint64_t>& addresses,
                                              std::string_view dump, const DoneWith& done_with) {
  FindObjects threads;
  for (uint64_t a : addresses) threads.wanted[a];
  if (threads.wanted.empty()) return {};
  if (auto r = hp::Records(dump, done_with).run(threads); !r) return r;
  std::unordered_map<uint64_t, uint64_t> name_of;  // thread → its name string
  std::vector<uint64_t> names;
  for (const auto& [a, t] : threads.wanted)
    if (auto name = field_value(x, t.klass, t.bytes, "name"); name && name->first == hp::kObject && name->second) {
      name_of[a] = name->second;
      names.push_back(name->second);
    }
  auto texts = string_texts(x, names, dump, done_with);
  if (!texts) return std::unexpected(texts.error());
  for (const auto& [thread, string] : name_of)
    if (auto text = texts->find(string); text != texts->end()) x.threads[x.ids.id(thread)] = text->second;
  return {};
}

// The pin array among the objects of JNI global references: an Object[]
// whose element 0 is the string `marker`. Sets x.pin to its address and
// returns its other elements' addresses, in order; none if there is none.
std::expected<std::vector<uint64_t>, std::string> find_pin(HeapIndex& x, const std::vector<uint64_t>& globals,
                                                           const std::string& marker, std::string_view dump,
                                                           const DoneWith& done_with) {
  FindObjects arrays;
  for (uint64_t a : globals) arrays.wanted[a];
  if (arrays.wanted.empty()) return std::vector<uint64_t>{};
  if (auto r = hp::Records(dump, done_with).run(arrays); !r) return std::unexpected(r.error());
  std::vector<uint64_t> firsts;
  for (const auto& [a, found] : arrays.wanted)
    if (found.objects && found.bytes.size() >= x.id_size) firsts.push_back(hp::be(found.bytes.data(), x.id_size));
  auto texts = string_texts(x, firsts, dump, done_with);
  if (!texts) return std::unexpected(texts.error());
  for (const auto& [a, found] : arrays.wanted) {
    if (!found.objects || found.bytes.size() < x.id_size) continue;
    auto text = texts->find(hp::be(found.bytes.data(), x.id_size));
    if (text == texts->end() || text->second != marker) continue;
    x.pin = a;
    std::vector<uint64_t> elements;
    for (size_t at = x.id_size; at + x.id_size <= found.bytes.size(); at += x.id_size)
      elements.push_back(hp::be(found.bytes.data() + at, x.id_size));
    return elements;
  }
  return std::vector<uint64_t>{};
}

}  // namespace

HeapGraph::HeapGraph() = default;
HeapGraph::HeapGraph(HeapGraph&&) noexcept = default;
HeapGraph& HeapGraph::operator=(HeapGraph&&) noexcept = default;
HeapGraph::~HeapGraph() = default;

std::expected<HeapGraph, std::string> read_heap_graph(std::string_view dump, const HeapLayout& layout,
                                                      const DoneWith& done_with, const std::string& pin) {
  HeapGraph g;
  g.index_ = std::make_unique<HeapIndex>();
  HeapIndex& x = *g.index_;
  x.layout = layout;
  uint64_t references = 0;
  {
    FirstPass first(x);
    if (auto r = hp::Records(dump, done_with).run(first); !r) return std::unexpected(r.error());
    auto roots = first.finish();
    if (!roots) return std::unexpected(roots.error());
    g.roots_ = std::move(*roots);
    references = first.references;
    if (auto r = name_threads(x, first.threads, dump, done_with); !r) return std::unexpected(r.error());
    if (!pin.empty()) {
      auto elements = find_pin(x, first.jni_globals, pin, dump, done_with);
      if (!elements) return std::unexpected(elements.error());
      g.pin_found_ = x.pin != 0;
      for (uint64_t a : *elements) g.pinned_.push_back(a ? x.ids.id(a) : kNoObject);
    }
  }
  GraphBuilder builder(g, HeapGraph::kReferences | HeapGraph::kSizes);
  builder.whole(x.ids.count() + 1, references);
  GraphPass pass(x, builder, g.roots_);
  if (auto r = pass.run(dump, done_with); !r) return std::unexpected(r.error());
  builder.end();
  g.referents_ = pass.referents;
  return g;
}

std::expected<void, std::string> HeapGraph::reload(std::string_view dump, unsigned parts, const DoneWith& done_with) {
  GraphBuilder builder(*this, parts);
  GraphPass pass(*index_, builder, roots_);
  auto r = pass.run(dump, done_with);
  builder.end();
  return r;
}

namespace {

// Hands on each reference a graph holds (HeapGraph::for_each_reference).
struct EachReference : SkipGraph {
  const std::function<void(ObjectId, ObjectId)>& f;
  std::expected<void, std::string> reference(ObjectId from, const Reference& r) {
    f(from, r.object);
    return {};
  }
};

// Finds how given pairs of objects are linked (find_references).
struct RefFinder : SkipGraph {
  std::unordered_map<uint64_t, Reference> wanted;  // from << 32 | to -> the first such reference (kind 0: none yet)
  std::vector<bool> holders;                       // by id: some pair starts there (most references are not looked up)
  std::expected<void, std::string> reference(ObjectId holder, const Reference& r) {
    if (!holders[holder]) return {};
    auto it = wanted.find(uint64_t{holder} << 32 | r.object);
    if (it != wanted.end() && it->second.kind == 0) it->second = r;
    return {};
  }
};

uint64_t pair_key(const std::pair<ObjectId, ObjectId>& p) { return uint64_t{p.first} << 32 | p.second; }

}  // namespace

std::expected<void, std::string> HeapGraph::for_each_reference(std::string_view dump,
                                                              const std::function<void(ObjectId, ObjectId)>& f,
                                                              const DoneWith& done_with) const {
  EachReference each{{}, f};
  return GraphPass(*index_, each, roots_).run(dump, done_with);
}

std::vector<Reference> HeapGraph::find_references(std::string_view dump,
                                                  std::span<const std::pair<ObjectId, ObjectId>> pairs,
                                                  const DoneWith& done_with) const {
  RefFinder finder;
  finder.holders.assign(size(), false);
  for (const auto& p : pairs) {
    finder.wanted.emplace(pair_key(p), Reference{});
    if (p.first < size()) finder.holders[p.first] = true;
  }
  (void)GraphPass(*index_, finder, roots_).run(dump, done_with);
  std::vector<Reference> out;
  out.reserve(pairs.size());
  for (const auto& p : pairs) out.push_back(finder.wanted[pair_key(p)]);
  return out;
}

std::span<const ObjectId> HeapGraph::refs(ObjectId id) const {
  if (id >= begin_.size() || begin_[id] == kNoObject) return {};
  size_t begin = begin_[id], end = refs_.size();
  for (size_t word = (begin + 1) / 64, bit = (begin + 1) % 64; word < group_starts_.size(); ++word, bit = 0)
    if (uint64_t bits = group_starts_[word] & (~uint64_t{0} << bit)) {
      end = word * 64 + static_cast<size_t>(std::countr_zero(bits));
      break;
    }
  return std::span(refs_).subspan(begin, end - begin);
}

void HeapGraph::drop(unsigned parts) {
  if (parts & kReferences) {
    dropped_refs_ = refs_.size();
    std::vector<uint32_t>().swap(begin_);
    std::vector<uint64_t>().swap(group_starts_);
    std::vector<ObjectId>().swap(refs_);
    std::vector<uint64_t>().swap(class_refs_);
  }
  if (parts & kSizes) std::vector<uint32_t>().swap(words_);
}

ObjectId HeapGraph::id_of(uint64_t address) const { return index_ ? index_->ids.id(address) : kNoObject; }

const HeapClass* HeapGraph::find_class(ObjectId id) const {
  if (!index_) return nullptr;
  auto it = index_->classes.find(id);
  return it == index_->classes.end() ? nullptr : &it->second;
}

std::string_view HeapGraph::class_name(ObjectId id) const {
  const HeapClass* c = find_class(id);
  return c ? std::string_view(c->name) : std::string_view("[unknown class]");
}

std::string_view HeapGraph::field_name(ObjectId klass, uint32_t index) const {
  int depth = 0;
  for (const HeapClass* c = find_class(klass); c && depth < 1000; c = c->super ? find_class(c->super) : nullptr, ++depth) {
    if (index < c->fields.size()) return c->fields[index].name;
    index -= static_cast<uint32_t>(c->fields.size());
  }
  return {};
}

std::string_view HeapGraph::static_field_name(ObjectId klass, uint32_t index) const {
  const HeapClass* c = find_class(klass);
  return c && index < c->statics.size() ? std::string_view(c->statics[index].name) : std::string_view();
}

std::string_view HeapGraph::thread_name(ObjectId id) const {
  if (!index_) return {};
  auto it = index_->threads.find(id);
  return it == index_->threads.end() ? std::string_view() : std::string_view(it->second);
}

std::string_view HeapGraph::method_name(uint64_t key) const {
  if (index_)
    if (auto it = index_->methods.find(key); it != index_->methods.end()) return it->second;
  return "[unknown method]";
}

std::string_view kind_name(uint8_t kind) {
  switch (kind) {
    case kClassRef: return "class";
    case kField: return "field";
    case kArrayElement: return "array element";
    case kStaticField: return "static field";
    case kSuperclass: return "superclass";
    case kClassLoader: return "class loader";
    case kSigners: return "signers";
    case kProtectionDomain: return "protection domain";
    case kLoadedClass: return "loaded class";
    case kJniGlobal: return "JNI global";
    case kJniLocal: return "JNI local";
    case kStackLocal: return "stack local";
    case kNativeStack: return "native stack";
    case kSystemClass: return "system class";
    case kThreadBlock: return "thread block";
    case kMonitor: return "monitor";
    case kThreadRoot: return "thread";
    case kUnknownRoot: return "VM internal";
    default: return "unknown";
  }
}

}  // namespace ember::heap
