#include "user/java/heap_graph.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "agent/heap_stream.h"

namespace ember::heap {
namespace {

namespace hs = agent::heap_stream;

// Ids beyond these are taken for corruption, not for a heap: 16 M classes
// and threads, 4 G objects.
constexpr uint64_t kMaxKnownIds = uint64_t{1} << 24;
constexpr uint64_t kMaxIds = UINT32_MAX - 1;

bool is_kind(unsigned char b) {
  return (b >= hs::kClassRef && b <= hs::kSuperclass) || (b >= hs::kJniGlobal && b <= hs::kOther);
}

// One pass over a stream's records, handing them to a visitor; the first
// flaw ends it with a message.
class Decoder {
 public:
  Decoder(std::string_view s, const DoneWith& done_with) : s_(s), done_with_(done_with) {}

  template <class Visitor>
  std::expected<void, std::string> run(Visitor& v) {
    auto r = decode(v);
    if (done_with_) done_with_(s_.size());
    return r;
  }

 private:
  // The window of the stream a pass holds: a few bytes an object at a
  // million objects, a madvise() call per window.
  static constexpr size_t kWindow = size_t{4} << 20;

  template <class Visitor>
  std::expected<void, std::string> decode(Visitor& v) {
    if (!s_.starts_with(hs::kHeader)) return std::unexpected("not an ember heap stream (no \"ember-heap 1\" header)");
    at_ = std::strlen(hs::kHeader);
    bool begun = false;
    ObjectId from = kNoObject, last_to = 0;
    uint64_t next = 0;  // the id of the next O record
    size_t window_end = kWindow;
    while (at_ < s_.size()) {
      size_t record = at_;
      if (record >= window_end && done_with_) {
        done_with_(record);
        window_end = record + kWindow;
      }
      unsigned char tag = static_cast<unsigned char>(s_[at_++]);
      if (is_kind(tag)) {
        if (from == kNoObject) return flaw(record, "a reference before any F record");
        uint64_t zigzag = number();
        int64_t delta = static_cast<int64_t>(zigzag >> 1) ^ -static_cast<int64_t>(zigzag & 1);
        int64_t to = int64_t{last_to} + delta;
        if (to <= 0 || static_cast<uint64_t>(to) >= next) return flaw(record, "a reference to an object not yet recorded");
        last_to = static_cast<ObjectId>(to);
        Reference r{.object = last_to, .kind = tag};
        switch (tag) {
          case hs::kField:
          case hs::kStaticField:
          case hs::kArrayElement:
          case hs::kConstantPool:
            r.index = static_cast<uint32_t>(std::min<uint64_t>(number(), UINT32_MAX));
            break;
          case hs::kStackLocal:
          case hs::kJniLocal:
            r.thread = static_cast<ObjectId>(std::min<uint64_t>(number(), UINT32_MAX));
            r.depth = static_cast<uint32_t>(std::min<uint64_t>(number(), UINT32_MAX));
            r.method = number();
            break;
          default:
            break;
        }
        if (!ok_) break;
        if (auto e = v.reference(from, r); !e) return flaw(record, e.error());
        continue;
      }
      switch (tag) {
        case hs::kClass: {
          uint64_t id = number();
          HeapClass c;
          c.name = string();
          c.super = static_cast<ObjectId>(std::min<uint64_t>(number(), kMaxKnownIds));
          c.field_base = static_cast<uint32_t>(std::min<uint64_t>(number(), UINT32_MAX));
          uint64_t fields = number();
          if (fields > s_.size() - std::min(at_, s_.size())) return flaw(record, "more fields than bytes");
          for (uint64_t i = 0; i < fields && ok_; ++i) {
            bool is_static = number() & hs::kFieldStatic;
            c.fields.push_back({string(), is_static});
          }
          if (!ok_) break;
          if (begun || id == 0 || id >= kMaxKnownIds) return flaw(record, "a class record out of place or with a bad id");
          c.known = true;
          v.klass(static_cast<ObjectId>(id), std::move(c));
          break;
        }
        case hs::kThread: {
          uint64_t id = number();
          std::string name = string();
          if (!ok_) break;
          if (begun || id == 0 || id >= kMaxKnownIds) return flaw(record, "a thread record out of place or with a bad id");
          v.thread(static_cast<ObjectId>(id), std::move(name));
          break;
        }
        case hs::kBegin:
          next = number();
          if (!ok_) break;
          if (begun || next == 0 || next >= kMaxKnownIds) return flaw(record, "a second B record, or a bad first object");
          begun = true;
          v.begin(static_cast<ObjectId>(next));
          break;
        case hs::kObject: {
          uint64_t klass = number(), size = number();
          if (!ok_) break;
          if (!begun || next >= kMaxIds) return flaw(record, "an object record before B, or too many objects");
          if (klass >= kMaxKnownIds) return flaw(record, "an object of a class id beyond any");
          if (auto e = v.object(static_cast<ObjectId>(next++), static_cast<ObjectId>(klass), size); !e)
            return flaw(record, e.error());
          break;
        }
        case hs::kKnownObject: {
          uint64_t id = number(), klass = number(), size = number();
          if (!ok_) break;
          if (!begun || id == 0 || id >= std::min<uint64_t>(next, kMaxKnownIds) || klass >= kMaxKnownIds)
            return flaw(record, "an X record out of place or with a bad id");
          if (auto e = v.object(static_cast<ObjectId>(id), static_cast<ObjectId>(klass), size); !e)
            return flaw(record, e.error());
          break;
        }
        case hs::kFrom: {
          uint64_t id = number();
          if (!ok_) break;
          if (!begun || id >= next) return flaw(record, "references held by an object not yet recorded");
          if (auto e = v.from(static_cast<ObjectId>(id)); !e) return flaw(record, e.error());
          from = static_cast<ObjectId>(id);
          break;
        }
        case hs::kMethod: {
          uint64_t key = number();
          std::string name = string();
          if (!ok_) break;
          v.method(key, std::move(name));
          break;
        }
        case hs::kEnd: {
          uint64_t objects = number(), references = number(), pause = number(), unknown = number();
          if (!ok_) break;
          if (!begun) return flaw(record, "an end record before B");
          if (at_ != s_.size()) return flaw(at_, "bytes after the end record");
          return v.end(objects, references, pause, unknown);
        }
        case hs::kFailed: {
          std::string message = string();
          if (!ok_) break;
          return std::unexpected("the agent's walk failed: " + message);
        }
        default:
          return flaw(record, "an unknown record " + std::to_string(tag));
      }
      if (!ok_) return flaw(record, "a record cut short");
    }
    return std::unexpected("the stream ends before its end record (the JVM exited during the walk, or the file was cut)");
  }

  uint64_t number() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && at_ < s_.size(); shift += 7) {
      unsigned char b = static_cast<unsigned char>(s_[at_++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  std::string string() {
    uint64_t n = number();
    if (!ok_ || n > s_.size() - at_) {
      ok_ = false;
      return {};
    }
    std::string out(s_.substr(at_, n));
    at_ += n;
    return out;
  }
  std::unexpected<std::string> flaw(size_t at, const std::string& what) const {
    return std::unexpected("heap stream byte " + std::to_string(at) + ": " + what);
  }

  std::string_view s_;
  const DoneWith& done_with_;
  size_t at_ = 0;
  bool ok_ = true;
};

// Which references the graph leaves out: the referents of weak and phantom
// references, which do not keep an object alive through a GC (HotSpot
// reports them as plain fields).
class Referents {
 public:
  explicit Referents(const HeapGraph& g) : g_(g) {}
  bool dropped(ObjectId from, const Reference& r) {
    return r.kind == hs::kField && r.index == referent_index(g_.class_of(from));
  }

 private:
  // The index of the field `referent` in objects of class `klass`, if it
  // is a weak or phantom reference; else none (UINT32_MAX). Soft and
  // finalizer references do keep their referent through a GC (until
  // memory runs short; until it is finalized): they stay in the graph.
  uint32_t referent_index(ObjectId klass) {
    auto [it, added] = referent_.try_emplace(klass, UINT32_MAX);
    if (!added) return it->second;
    const HeapClass* c = g_.find_class(klass);
    bool weak = false;
    const HeapClass* reference = nullptr;
    int depth = 0;  // a corrupt stream may loop its superclasses
    for (const HeapClass* k = c; k && depth < 256 && !reference; k = k->super ? g_.find_class(k->super) : nullptr, ++depth) {
      weak |= k->name == "java.lang.ref.WeakReference" || k->name == "java.lang.ref.PhantomReference";
      if (k->name == "java.lang.ref.Reference") reference = k;
    }
    if (!weak || !reference) return it->second;
    // Counted from java.lang.Object's fields: those of the classes above Reference first.
    uint32_t above = 0;
    for (const HeapClass* s = reference->super ? g_.find_class(reference->super) : nullptr; s && depth < 256;
         s = s->super ? g_.find_class(s->super) : nullptr, ++depth)
      above += static_cast<uint32_t>(s->fields.size());
    for (uint32_t i = 0; i < reference->fields.size(); ++i)
      if (reference->fields[i].name == "referent") it->second = c->field_base + above + i;
    return it->second;
  }
  const HeapGraph& g_;
  std::unordered_map<ObjectId, uint32_t> referent_;
};

}  // namespace

// Builds a graph from a stream; or, given one read from it already, parts
// it dropped (HeapGraph::Part) again.
class GraphBuilder {
 public:
  GraphBuilder() : g(own_) {}
  GraphBuilder(HeapGraph& graph, unsigned parts) : g(graph), reload_(parts) {
    if (parts & HeapGraph::kReferences) {
      g.reference_count_ = g.referents_ = 0;
      g.roots_.clear();
      g.begin_.assign(g.size(), kNoObject);
      g.refs_.reserve(g.dropped_refs_);
      g.group_starts_.reserve(g.dropped_refs_ / 64 + 1);
      g.class_refs_.resize(g.size() / 64 + 1);
    }
    if (parts & HeapGraph::kSizes) g.words_.assign(g.size(), 0);
  }
  HeapGraph& g;

  // Room for exactly what a stream holds (a first pass counts it): grown by
  // doubling, the biggest arrays would hold up to three times that at once.
  // Objects' references to their classes are counted apart: they are bits.
  void reserve(size_t ids, size_t refs, size_t class_refs) {
    g.class_of_.reserve(ids);
    g.words_.reserve(ids);
    g.begin_.reserve(ids);
    g.refs_.reserve(refs - class_refs);
    g.group_starts_.reserve((refs - class_refs) / 64 + 1);
    g.class_refs_.resize(ids / 64 + 1);
  }

  void klass(ObjectId id, HeapClass c) {
    if (!reload_) g.classes_[id] = std::move(c);
  }
  void thread(ObjectId id, std::string name) {
    if (!reload_) g.threads_[id] = std::move(name);
  }
  void method(uint64_t key, std::string name) {
    if (!reload_) g.methods_[key] = std::move(name);
  }
  void begin(ObjectId first) {
    if (reload_) return;
    g.class_of_.assign(first, kNoObject);
    g.words_.assign(first, 0);
    g.begin_.assign(first, kNoObject);
    g.class_of_[kRoots] = 0;
  }
  std::expected<void, std::string> object(ObjectId id, ObjectId klass, uint64_t size) {
    uint32_t words = static_cast<uint32_t>(std::min<uint64_t>((size + 7) / 8, UINT32_MAX));
    if (reload_) {
      if (reload_ & HeapGraph::kSizes) g.words_[id] = words;
      return {};
    }
    if (id >= g.class_of_.size()) {
      g.class_of_.push_back(kNoObject);
      g.words_.push_back(0);
      g.begin_.push_back(kNoObject);
    } else if (g.class_of_[id] != kNoObject) {
      return std::unexpected("object " + std::to_string(id) + " recorded twice");
    }
    g.class_of_[id] = klass;
    g.words_[id] = words;
    g.bytes_ += uint64_t{words} * 8;
    ++g.objects_;
    return {};
  }
  std::expected<void, std::string> from(ObjectId id) {
    if (reload_ && !(reload_ & HeapGraph::kReferences)) return {};
    if (!g.present(id)) return std::unexpected("references held by object " + std::to_string(id) + ", never recorded");
    if (g.begin_[id] != kNoObject) return std::unexpected("the references of object " + std::to_string(id) + " come in two groups");
    close_group();
    group_ = id;
    group_size_ = 0;
    return {};
  }
  std::expected<void, std::string> reference(ObjectId from, const Reference& r) {
    if (reload_ && !(reload_ & HeapGraph::kReferences)) return {};
    if (!g.present(r.object)) return std::unexpected("a reference to object " + std::to_string(r.object) + ", never recorded");
    if (referents_.dropped(from, r)) {
      ++g.referents_;
      return {};
    }
    ++g.reference_count_;
    if (r.kind == hs::kClassRef && from != kRoots && r.object == g.class_of(from) && g.class_ref(from) == kNoObject) {
      if (g.class_refs_.size() <= from / 64) g.class_refs_.resize(from / 64 + 1);
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
    if (from == kRoots) g.roots_.push_back(r);
    return {};
  }
  std::expected<void, std::string> end(uint64_t objects, uint64_t references, uint64_t pause, uint64_t unknown) {
    if (reload_ && !(reload_ & HeapGraph::kReferences)) return {};
    close_group();
    uint64_t held = g.reference_count_ + g.referents_;
    if (objects != g.objects_ || references != held)
      return std::unexpected("the end record counts " + std::to_string(objects) + " objects and " +
                             std::to_string(references) + " references, the stream held " + std::to_string(g.objects_) +
                             " and " + std::to_string(held));
    g.pause_ns_ = pause;
    g.unknown_class_ = unknown;
    return {};
  }

 private:
  // A group without references (all of them referents) leaves its object none.
  void close_group() {
    if (group_ != kNoObject && group_size_ == 0) g.begin_[group_] = kNoObject;
    group_ = kNoObject;
  }
  ObjectId group_ = kNoObject;
  uint64_t group_size_ = 0;

  Referents referents_{g};
  HeapGraph own_;
  unsigned reload_ = 0;  // the parts read again; 0: a whole graph
};

namespace {

// A visitor's base: every record passes by. Visitors define what they want.
struct SkipRecords {
  void klass(ObjectId, HeapClass) {}
  void thread(ObjectId, std::string) {}
  void method(uint64_t, std::string) {}
  void begin(ObjectId) {}
  std::expected<void, std::string> object(ObjectId, ObjectId, uint64_t) { return {}; }
  std::expected<void, std::string> from(ObjectId) { return {}; }
  std::expected<void, std::string> reference(ObjectId, const Reference&) { return {}; }
  std::expected<void, std::string> end(uint64_t, uint64_t, uint64_t, uint64_t) { return {}; }
};

// Counts a stream's ids and references (read_heap_graph's first pass).
struct Counter : SkipRecords {
  uint64_t ids = 0, refs = 0, class_refs = 0;

  void begin(ObjectId first) { ids = first; }
  std::expected<void, std::string> object(ObjectId id, ObjectId, uint64_t) {
    ids = std::max<uint64_t>(ids, uint64_t{id} + 1);
    return {};
  }
  std::expected<void, std::string> reference(ObjectId, const Reference& r) {
    ++refs;
    class_refs += r.kind == hs::kClassRef;
    return {};
  }
};

}  // namespace

std::expected<HeapGraph, std::string> read_heap_graph(std::string_view stream, const DoneWith& done_with) {
  Counter counter;
  if (auto r = Decoder(stream, done_with).run(counter); !r) return std::unexpected(r.error());
  GraphBuilder builder;
  builder.reserve(counter.ids, counter.refs, counter.class_refs);
  if (auto r = Decoder(stream, done_with).run(builder); !r) return std::unexpected(r.error());
  return std::move(builder.g);
}

std::expected<void, std::string> HeapGraph::reload(std::string_view stream, unsigned parts, const DoneWith& done_with) {
  GraphBuilder builder(*this, parts);
  return Decoder(stream, done_with).run(builder);
}

namespace {

// Hands on each reference a graph holds (HeapGraph::for_each_reference).
struct EachReference : SkipRecords {
  const std::function<void(ObjectId, ObjectId)>& f;
  Referents referents;

  std::expected<void, std::string> reference(ObjectId from, const Reference& r) {
    if (!referents.dropped(from, r)) f(from, r.object);
    return {};
  }
};

// Finds how given pairs of objects are linked (find_references).
struct RefFinder : SkipRecords {
  std::unordered_map<uint64_t, Reference> wanted;  // from << 32 | to -> the first such reference (kind 0: none yet)

  std::expected<void, std::string> reference(ObjectId from, const Reference& r) {
    auto it = wanted.find(uint64_t{from} << 32 | r.object);
    if (it != wanted.end() && it->second.kind == 0) it->second = r;
    return {};
  }
};

uint64_t pair_key(const std::pair<ObjectId, ObjectId>& p) { return uint64_t{p.first} << 32 | p.second; }

}  // namespace

std::expected<void, std::string> HeapGraph::for_each_reference(std::string_view stream,
                                                              const std::function<void(ObjectId, ObjectId)>& f,
                                                              const DoneWith& done_with) const {
  EachReference each{{}, f, Referents(*this)};
  return Decoder(stream, done_with).run(each);
}

std::vector<Reference> find_references(std::string_view stream, std::span<const std::pair<ObjectId, ObjectId>> pairs,
                                       const DoneWith& done_with) {
  RefFinder finder;
  for (const auto& p : pairs) finder.wanted.emplace(pair_key(p), Reference{});
  (void)Decoder(stream, done_with).run(finder);
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

const HeapClass* HeapGraph::find_class(ObjectId id) const {
  auto it = classes_.find(id);
  return it == classes_.end() ? nullptr : &it->second;
}

std::string_view HeapGraph::class_name(ObjectId id) const {
  const HeapClass* c = find_class(id);
  return c ? std::string_view(c->name) : std::string_view("[unknown class]");
}

std::string_view HeapGraph::field_name(ObjectId klass, uint32_t index) const {
  const HeapClass* c = find_class(klass);
  if (!c || index < c->field_base) return {};
  // JVMTI counts the fields of java.lang.Object first, then down to the
  // class: the chain from the top.
  std::vector<const HeapClass*> chain;
  for (const HeapClass* k = c; k && chain.size() < 256; k = k->super ? find_class(k->super) : nullptr) chain.push_back(k);
  uint32_t at = index - c->field_base;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (at < (*it)->fields.size()) return (*it)->fields[at].name;
    at -= static_cast<uint32_t>((*it)->fields.size());
  }
  return {};
}

std::string_view HeapGraph::thread_name(ObjectId id) const {
  auto it = threads_.find(id);
  return it == threads_.end() ? std::string_view() : std::string_view(it->second);
}

std::string_view HeapGraph::method_name(uint64_t key) const {
  auto it = methods_.find(key);
  return it == methods_.end() ? std::string_view("[unknown method]") : std::string_view(it->second);
}

std::string_view kind_name(uint8_t kind) {
  switch (kind) {
    case hs::kClassRef: return "class";
    case hs::kField: return "field";
    case hs::kArrayElement: return "array element";
    case hs::kClassLoader: return "class loader";
    case hs::kSigners: return "signers";
    case hs::kProtectionDomain: return "protection domain";
    case hs::kInterface: return "interface";
    case hs::kStaticField: return "static field";
    case hs::kConstantPool: return "constant pool";
    case hs::kSuperclass: return "superclass";
    case hs::kJniGlobal: return "JNI global";
    case hs::kSystemClass: return "system class";
    case hs::kMonitor: return "monitor";
    case hs::kStackLocal: return "stack local";
    case hs::kJniLocal: return "JNI local";
    case hs::kThreadRoot: return "thread";
    case hs::kOther: return "VM internal";
    default: return "unknown";
  }
}

}  // namespace ember::heap
