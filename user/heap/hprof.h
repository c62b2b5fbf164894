// HotSpot's heap dump, the HPROF binary format (`jcmd PID GC.heap_dump`,
// the attach command `dumpheap`), read one record at a time.
//
// THE FORMAT (heapDumper.cpp in HotSpot; numbers big-endian)
//   "JAVA PROFILE 1.0.2\0" (or 1.0.1), u4 id size, u8 time in ms
//   records: u1 tag, u4 time, u4 length, body. Those read here:
//     UTF8          id, the bytes (a class, field or method name)
//     LOAD CLASS    u4 class serial, id class, u4 trace serial, id name
//     FRAME         id frame, id method name, id signature, id source file,
//                   u4 class serial, u4 line
//     TRACE         u4 serial, u4 thread serial, u4 frames, id frame...
//     HEAP DUMP SEGMENT (and HEAP DUMP): sub-records, u1 tag then
//       ROOT UNKNOWN, STICKY CLASS, MONITOR USED   id
//       ROOT JNI GLOBAL    id, id of the global ref
//       ROOT JNI LOCAL, JAVA FRAME   id, u4 thread serial, u4 frame depth
//       ROOT NATIVE STACK, THREAD BLOCK   id, u4 thread serial
//       ROOT THREAD OBJECT  id, u4 thread serial, u4 trace serial
//       CLASS DUMP   id class, u4 trace, id super, loader, signers,
//                    protection domain, 2 reserved, u4 instance size,
//                    u2 constants (type + value each), u2 statics (id name,
//                    u1 type, value each), u2 fields (id name, u1 type each)
//       INSTANCE DUMP  id, u4 trace, id class, u4 bytes, the field values:
//                    the class's own fields, then its superclass's, up
//       OBJ ARRAY DUMP   id, u4 trace, u4 length, id class, ids
//       PRIM ARRAY DUMP  id, u4 trace, u4 length, u1 type, values
//     HEAP DUMP END  the last record
// An object's id is its address in the JVM; a class's, its java.lang.Class
// object's. Ids are 8 bytes from a 64-bit JVM.
#pragma once

#include <cstdint>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>

#include "user/heap/heap_graph.h"

namespace ember::heap::hprof {

// Basic types of fields and array elements.
enum Type : uint8_t { kObject = 2, kBoolean = 4, kChar = 5, kFloat = 6, kDouble = 7, kByte = 8, kShort = 9, kInt = 10, kLong = 11 };

// A value's bytes in the dump: 0 for no such type.
inline uint32_t type_size(uint8_t type, uint32_t id_size) {
  switch (type) {
    case kObject: return id_size;
    case kBoolean: case kByte: return 1;
    case kChar: case kShort: return 2;
    case kFloat: case kInt: return 4;
    case kDouble: case kLong: return 8;
    default: return 0;
  }
}

// Root sub-record tags.
enum RootTag : uint8_t {
  kRootJniGlobal = 0x01, kRootJniLocal = 0x02, kRootJavaFrame = 0x03, kRootNativeStack = 0x04, kRootStickyClass = 0x05,
  kRootThreadBlock = 0x06, kRootMonitorUsed = 0x07, kRootThreadObject = 0x08, kRootUnknown = 0xff,
};

// A class dump's fixed part; its statics and fields are read by ClassFields.
struct ClassDump {
  uint64_t id = 0, super = 0, loader = 0, signers = 0, protection_domain = 0;
  std::string_view statics;  // u2 count, then (id name, u1 type, value) each
  std::string_view fields;   // u2 count, then (id name, u1 type) each
};

// Big-endian numbers of a dump's bytes; an id is 4 or 8 bytes. Every
// reference of every pass is read here: whole words, not bytes.
inline uint64_t be(const char* p, uint32_t n) {
  switch (n) {
    case 8: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return __builtin_bswap64(v);
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return __builtin_bswap32(v);
    }
    default: {
      uint64_t v = 0;
      for (uint32_t i = 0; i < n; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
      return v;
    }
  }
}

// The records of a dump, handed to a visitor in the file's order. A
// visitor derives from Skip and defines what it wants; the first flaw in
// the dump, or an error a visitor returns, ends the pass with a message.
class Records {
 public:
  Records(std::string_view dump, const DoneWith& done_with) : s_(dump), done_with_(done_with) {}

  template <class Visitor>
  std::expected<void, std::string> run(Visitor& v) {
    auto r = records(v);
    if (done_with_) done_with_(s_.size());
    return r;
  }

  struct Skip {
    void header(uint32_t /*id_size*/) {}
    void utf8(uint64_t, std::string_view) {}
    void load_class(uint32_t, uint64_t, uint64_t) {}
    void frame(uint64_t, uint64_t, uint32_t) {}
    // A trace's frames: ids of the header's size each.
    void trace(uint32_t, uint32_t, std::string_view) {}
    std::expected<void, std::string> root(uint8_t, uint64_t, uint32_t, uint32_t) { return {}; }
    std::expected<void, std::string> class_dump(const ClassDump&) { return {}; }
    std::expected<void, std::string> instance(uint64_t, uint64_t, std::string_view) { return {}; }
    std::expected<void, std::string> object_array(uint64_t, uint64_t, std::string_view) { return {}; }
    std::expected<void, std::string> primitive_array(uint64_t, uint8_t, uint32_t, std::string_view) { return {}; }
  };

 private:
  static constexpr uint8_t kUtf8 = 0x01, kLoadClass = 0x02, kFrame = 0x04, kTrace = 0x05, kHeapDump = 0x0c,
                           kHeapDumpSegment = 0x1c, kHeapDumpEnd = 0x2c;
  static constexpr uint8_t kClassDump = 0x20, kInstanceDump = 0x21, kObjArrayDump = 0x22, kPrimArrayDump = 0x23;
  // The window of the dump a pass holds: a madvise() call per window.
  static constexpr size_t kWindow = size_t{4} << 20;

  template <class Visitor>
  std::expected<void, std::string> records(Visitor& v) {
    constexpr std::string_view k102("JAVA PROFILE 1.0.2\0", 19), k101("JAVA PROFILE 1.0.1\0", 19);
    if (!s_.starts_with(k102) && !s_.starts_with(k101))
      return std::unexpected("not an HPROF heap dump (no \"JAVA PROFILE 1.0.2\" header)");
    at_ = k102.size();
    if (!have(12)) return flaw(at_, "a header cut short");
    id_ = static_cast<uint32_t>(u4());
    if (id_ != 4 && id_ != 8) return flaw(at_ - 4, "ids of " + std::to_string(id_) + " bytes");
    at_ += 8;  // the time
    v.header(id_);
    size_t window_end = kWindow;
    while (at_ < s_.size()) {
      size_t record = at_;
      if (!have(9)) return flaw(record, "a record header cut short");
      uint8_t tag = u1();
      at_ += 4;  // the time
      uint64_t length = u4();
      if (length > s_.size() - at_) return flaw(record, "a record longer than the rest of the dump");
      std::string_view body = s_.substr(at_, length);
      size_t end = at_ + length;
      switch (tag) {
        case kUtf8:
          if (length < id_) return flaw(record, "a UTF8 record cut short");
          v.utf8(id(), body.substr(id_));
          break;
        case kLoadClass: {
          if (length < 8 + 2 * id_) return flaw(record, "a LOAD CLASS record cut short");
          auto serial = static_cast<uint32_t>(u4());
          uint64_t klass = id();
          at_ += 4;
          v.load_class(serial, klass, id());
          break;
        }
        case kFrame: {
          if (length < 8 + 4 * id_) return flaw(record, "a FRAME record cut short");
          uint64_t frame = id(), method = id();
          at_ += 2 * id_;  // signature, source file
          v.frame(frame, method, static_cast<uint32_t>(u4()));
          break;
        }
        case kTrace: {
          if (length < 12) return flaw(record, "a TRACE record cut short");
          auto serial = static_cast<uint32_t>(u4()), thread = static_cast<uint32_t>(u4());
          uint64_t frames = u4();
          if (frames * id_ != length - 12) return flaw(record, "a TRACE record whose frames do not fill it");
          v.trace(serial, thread, s_.substr(at_, frames * id_));
          break;
        }
        case kHeapDump:
        case kHeapDumpSegment:
          while (at_ < end) {
            size_t sub = at_;
            if (sub >= window_end && done_with_) {
              done_with_(sub);
              window_end = sub + kWindow;
            }
            if (auto r = sub_record(v, end); !r) return flaw(sub, r.error());
          }
          break;
        case kHeapDumpEnd:
          if (end != s_.size()) return flaw(end, "bytes after the HEAP DUMP END record");
          return {};
        default:
          break;  // allocation sites, CPU samples, threads...: not needed
      }
      at_ = end;
    }
    return std::unexpected("the dump ends before its HEAP DUMP END record (it was cut short)");
  }

  // One heap dump sub-record, from its tag to `end` at most.
  template <class Visitor>
  std::expected<void, std::string> sub_record(Visitor& v, size_t end) {
    auto cut = [] { return std::unexpected(std::string("a heap dump record cut short")); };
    if (at_ >= end) return cut();
    uint8_t tag = u1();
    auto need = [&](uint64_t n) { return n <= end - at_; };
    switch (tag) {
      case kRootUnknown:
      case kRootStickyClass:
      case kRootMonitorUsed:
        if (!need(id_)) return cut();
        return v.root(tag, id(), 0, 0);
      case kRootJniGlobal: {
        if (!need(2 * id_)) return cut();
        uint64_t object = id();
        at_ += id_;
        return v.root(tag, object, 0, 0);
      }
      case kRootJniLocal:
      case kRootJavaFrame:
      case kRootThreadObject: {
        if (!need(id_ + 8)) return cut();
        uint64_t object = id();
        auto a = static_cast<uint32_t>(u4()), b = static_cast<uint32_t>(u4());
        return v.root(tag, object, a, b);
      }
      case kRootNativeStack:
      case kRootThreadBlock: {
        if (!need(id_ + 4)) return cut();
        uint64_t object = id();
        return v.root(tag, object, static_cast<uint32_t>(u4()), 0);
      }
      case kClassDump: {
        if (!need(7 * id_ + 10)) return cut();
        ClassDump c;
        c.id = id();
        at_ += 4;
        c.super = id();
        c.loader = id();
        c.signers = id();
        c.protection_domain = id();
        at_ += 2 * id_ + 4;  // reserved, instance size
        for (uint64_t constants = u2(), i = 0; i < constants; ++i) {
          if (!need(3)) return cut();
          at_ += 2;
          uint32_t size = type_size(u1(), id_);
          if (!size || !need(size)) return std::unexpected("a class dump's constant of an unknown type, or cut short");
          at_ += size;
        }
        size_t statics = at_;
        if (!need(2)) return cut();
        for (uint64_t n = u2(), i = 0; i < n; ++i) {
          if (!need(id_ + 1)) return cut();
          at_ += id_;
          uint32_t size = type_size(u1(), id_);
          if (!size || !need(size)) return std::unexpected("a static field of an unknown type, or cut short");
          at_ += size;
        }
        c.statics = s_.substr(statics, at_ - statics);
        size_t fields = at_;
        if (!need(2)) return cut();
        uint64_t n = u2();
        if (!need(n * (id_ + 1))) return cut();
        at_ += n * (id_ + 1);
        c.fields = s_.substr(fields, at_ - fields);
        return v.class_dump(c);
      }
      case kInstanceDump: {
        if (!need(2 * id_ + 8)) return cut();
        uint64_t object = id();
        at_ += 4;
        uint64_t klass = id(), bytes = u4();
        if (!need(bytes)) return cut();
        std::string_view values = s_.substr(at_, bytes);
        at_ += bytes;
        return v.instance(object, klass, values);
      }
      case kObjArrayDump: {
        if (!need(2 * id_ + 8)) return cut();
        uint64_t object = id();
        at_ += 4;
        uint64_t length = u4(), klass = id();
        if (!need(length * id_)) return cut();
        std::string_view elements = s_.substr(at_, length * id_);
        at_ += length * id_;
        return v.object_array(object, klass, elements);
      }
      case kPrimArrayDump: {
        if (!need(id_ + 9)) return cut();
        uint64_t object = id();
        at_ += 4;
        auto length = static_cast<uint32_t>(u4());
        uint8_t type = u1();
        uint32_t size = type_size(type, id_);
        if (!size || type == kObject) return std::unexpected("a primitive array of type " + std::to_string(type));
        if (!need(uint64_t{length} * size)) return cut();
        std::string_view data = s_.substr(at_, uint64_t{length} * size);
        at_ += data.size();
        return v.primitive_array(object, type, length, data);
      }
      default:
        return std::unexpected("an unknown heap dump record " + std::to_string(tag));
    }
  }

  bool have(size_t n) const { return n <= s_.size() - at_; }
  uint8_t u1() { return static_cast<uint8_t>(s_[at_++]); }
  uint64_t u2() { return take(2); }
  uint64_t u4() { return take(4); }
  uint64_t id() { return take(id_); }
  uint64_t take(uint32_t n) {
    uint64_t v = be(s_.data() + at_, n);
    at_ += n;
    return v;
  }
  std::unexpected<std::string> flaw(size_t at, const std::string& what) const {
    return std::unexpected("heap dump byte " + std::to_string(at) + ": " + what);
  }

  std::string_view s_;
  const DoneWith& done_with_;
  size_t at_ = 0;
  uint32_t id_ = 8;
};

}  // namespace ember::heap::hprof
