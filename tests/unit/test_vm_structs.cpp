#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/code_heap.h"
#include "agent/method_pointers.h"
#include "agent/vm_structs.h"

using ember::agent::BlobFrame;
using ember::agent::CodeHeapReader;
using ember::agent::MethodPointers;
using ember::agent::VmField;
using ember::agent::VmStructs;

namespace {

// Entries as libjvm lays them out (vmStructs.hpp: VMStructEntry, VMTypeEntry).
struct StructEntry {
  const char* type_name;
  const char* field_name;
  const char* type_string;
  int32_t is_static;
  uint64_t offset;
  const void* address;
};
struct TypeEntry {
  const char* type_name;
  const char* superclass_name;
  int32_t is_oop_type, is_integer_type, is_unsigned;
  uint64_t size;
};
struct IntConstantEntry {
  const char* name;
  int32_t value;
};

// A libjvm's exported symbols: the tables, the companions that describe an
// entry's layout, with any of them left out on request.
struct FakeJvm {
  std::vector<StructEntry> structs;
  std::vector<TypeEntry> types{
      {"int", nullptr, 0, 1, 0, 4},      {"int16_t", nullptr, 0, 1, 0, 2}, {"u2", nullptr, 0, 1, 1, 2},
      {"address", nullptr, 0, 1, 1, 8},  {"char*", nullptr, 0, 0, 0, 8},   {"VirtualSpace", nullptr, 0, 0, 0, 112},
      {"HeapBlock", nullptr, 0, 0, 0, 8}};
  std::vector<IntConstantEntry> constants;
  const StructEntry* structs_pointer = nullptr;
  const TypeEntry* types_pointer = nullptr;
  const IntConstantEntry* constants_pointer = nullptr;
  std::map<std::string, uint64_t> companions{
      {"gHotSpotVMStructEntryArrayStride", sizeof(StructEntry)},
      {"gHotSpotVMStructEntryTypeNameOffset", offsetof(StructEntry, type_name)},
      {"gHotSpotVMStructEntryFieldNameOffset", offsetof(StructEntry, field_name)},
      {"gHotSpotVMStructEntryTypeStringOffset", offsetof(StructEntry, type_string)},
      {"gHotSpotVMStructEntryIsStaticOffset", offsetof(StructEntry, is_static)},
      {"gHotSpotVMStructEntryOffsetOffset", offsetof(StructEntry, offset)},
      {"gHotSpotVMStructEntryAddressOffset", offsetof(StructEntry, address)},
      {"gHotSpotVMTypeEntryArrayStride", sizeof(TypeEntry)},
      {"gHotSpotVMTypeEntryTypeNameOffset", offsetof(TypeEntry, type_name)},
      {"gHotSpotVMTypeEntrySizeOffset", offsetof(TypeEntry, size)},
      {"gHotSpotVMTypeEntryIsUnsignedOffset", offsetof(TypeEntry, is_unsigned)},
      {"gHotSpotVMIntConstantEntryArrayStride", sizeof(IntConstantEntry)},
      {"gHotSpotVMIntConstantEntryNameOffset", offsetof(IntConstantEntry, name)},
      {"gHotSpotVMIntConstantEntryValueOffset", offsetof(IntConstantEntry, value)}};
  std::set<std::string> absent;

  void field(const char* type, const char* name, const char* type_string, uint64_t offset) {
    structs.push_back({type, name, type_string, 0, offset, nullptr});
  }
  void static_field(const char* type, const char* name, const char* type_string, const void* address) {
    structs.push_back({type, name, type_string, 1, 0, address});
  }
  // Ends the tables (an entry with null names) and opens them.
  bool open(VmStructs& vm, const char** missing) {
    structs.push_back({});
    types.push_back({});
    constants.push_back({});
    structs_pointer = structs.data();
    types_pointer = types.data();
    constants_pointer = constants.data();
    return vm.open(lookup, this, missing);
  }
  static const void* lookup(const char* name, void* context) {
    auto* self = static_cast<FakeJvm*>(context);
    if (self->absent.count(name)) return nullptr;
    if (std::strcmp(name, "gHotSpotVMStructs") == 0) return &self->structs_pointer;
    if (std::strcmp(name, "gHotSpotVMTypes") == 0) return &self->types_pointer;
    if (std::strcmp(name, "gHotSpotVMIntConstants") == 0) return &self->constants_pointer;
    auto it = self->companions.find(name);
    return it == self->companions.end() ? nullptr : &it->second;
  }
};

// A code cache of one heap, laid out as JDK 25's (blob bounds as offsets,
// int16_t frame-complete offset, 8-byte HeapBlock) or JDK 17's (bounds as
// addresses, int offset, 16-byte HeapBlock), with its segment map.
struct FakeCodeCache {
  static constexpr int kLog2Segment = 4;
  static constexpr size_t kSegments = 1024;
  bool jdk17;
  uint64_t header;  // sizeof(HeapBlock)
  alignas(64) uint8_t memory[kSegments << kLog2Segment] = {};
  uint8_t segmap[kSegments];
  alignas(8) uint8_t heap[336] = {};  // a CodeHeap
  struct {
    int32_t len = 1, capacity = 1;
    const void* data;
  } heaps;  // a GrowableArray<CodeHeap*>
  const void* heap_list[1];
  const void* heaps_pointer = &heaps;  // CodeCache::_heaps

  explicit FakeCodeCache(bool jdk17_layout) : jdk17(jdk17_layout), header(jdk17_layout ? 16 : 8) {
    std::memset(segmap, 0xFF, sizeof segmap);
    heap_list[0] = heap;
    heaps.data = heap_list;
    put<uintptr_t>(heap + 0 + 16, reinterpret_cast<uintptr_t>(memory));                  // _memory._low
    put<uintptr_t>(heap + 0 + 24, reinterpret_cast<uintptr_t>(memory + sizeof memory));  // _memory._high
    put<uintptr_t>(heap + 112 + 16, reinterpret_cast<uintptr_t>(segmap));
    put<uintptr_t>(heap + 112 + 24, reinterpret_cast<uintptr_t>(segmap + sizeof segmap));
    put<int32_t>(heap + 248, kLog2Segment);
  }
  template <typename T>
  static void put(uint8_t* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
  void describe(FakeJvm& jvm) const {
    jvm.static_field("CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", &heaps_pointer);
    jvm.field("GrowableArrayBase", "_len", "int", 0);
    jvm.field("GrowableArray<int>", "_data", "int*", 8);
    jvm.field("CodeHeap", "_memory", "VirtualSpace", 0);
    jvm.field("CodeHeap", "_segmap", "VirtualSpace", 112);
    jvm.field("CodeHeap", "_log2_segment_size", "int", 248);
    jvm.field("VirtualSpace", "_low", "char*", 16);
    jvm.field("VirtualSpace", "_high", "char*", 24);
    jvm.types[6].size = header;
    if (jdk17) {
      jvm.field("CodeBlob", "_frame_complete_offset", "int", 20);
      jvm.field("CodeBlob", "_frame_size", "int", 28);
      jvm.field("CodeBlob", "_code_begin", "address", 32);
      jvm.field("CodeBlob", "_code_end", "address", 40);
    } else {
      jvm.field("CodeBlob", "_code_offset", "int", 36);
      jvm.field("CodeBlob", "_data_offset", "int", 40);
      jvm.field("CodeBlob", "_frame_size", "int", 44);
      jvm.field("CodeBlob", "_frame_complete_offset", "int16_t", 54);
    }
    // Optional: a compiled method's verified entry, a blob's kind.
    if (jdk17) {
      jvm.field("nmethod", "_verified_entry_point", "address", 224);
      jvm.field("CodeBlob", "_name", "char*", 96);
    } else {
      jvm.field("nmethod", "_verified_entry_offset", "u2", 154);
      jvm.field("CodeBlob", "_kind", "CodeBlobKind", 56);
      jvm.types.push_back({"CodeBlobKind", nullptr, 0, 1, 1, 1});
      jvm.constants.push_back({"CodeBlobKind::Vtable", 4});
    }
  }
  // The verified entry of the nmethod at `blob`, `offset` bytes into its code.
  void verified_entry(uint8_t* blob, uint16_t offset) const {
    if (jdk17) {
      uintptr_t code;
      std::memcpy(&code, blob + 32, sizeof code);
      put<uintptr_t>(blob + 224, code + offset);
    } else {
      put<uint16_t>(blob + 154, offset);
    }
  }
  // Names blob's kind: JDK 17 by its name (a pointer, maybe a bad one), later by _kind.
  void kind(uint8_t* blob, const char* name, uint8_t kind) const {
    if (jdk17)
      put<const char*>(blob + 96, name);
    else
      blob[56] = kind;
  }
  // A used block of `segments` at `first`, as CodeHeap::mark_segmap_as_used
  // marks it: 0, then 1, 2, ... 0xFE, 1, 2, ...; its blob's code at
  // [code, code + code_size) from the blob.
  uint8_t* block(size_t first, size_t segments, int code, int code_size, int frame_words, int complete) {
    for (size_t i = 0; i < segments; ++i) segmap[first + i] = i == 0 ? 0 : static_cast<uint8_t>((i - 1) % 0xFE + 1);
    uint8_t* blob = memory + (first << kLog2Segment) + header;
    if (jdk17) {
      put<int32_t>(blob + 20, complete);
      put<int32_t>(blob + 28, frame_words);
      put<uintptr_t>(blob + 32, reinterpret_cast<uintptr_t>(blob + code));
      put<uintptr_t>(blob + 40, reinterpret_cast<uintptr_t>(blob + code + code_size));
    } else {
      put<int32_t>(blob + 36, code);
      put<int32_t>(blob + 40, code + code_size);
      put<int32_t>(blob + 44, frame_words);
      put<int16_t>(blob + 54, static_cast<int16_t>(complete));
    }
    return blob;
  }
  uintptr_t at(size_t segment, size_t offset = 0) const {
    return reinterpret_cast<uintptr_t>(memory) + (segment << kLog2Segment) + offset;
  }
};

}  // namespace

TEST_CASE("vm structs: fields by name, with their type's size and sign") {
  FakeJvm jvm;
  int static_value = 0;
  jvm.field("CodeBlob", "_frame_complete_offset", "int16_t", 54);
  jvm.field("CodeBlob", "_header_size", "u2", 52);
  jvm.field("CodeBlob", "_oddity", "SomethingUndeclared", 60);
  jvm.static_field("CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", &static_value);
  VmStructs vm;
  const char* missing = nullptr;
  REQUIRE(jvm.open(vm, &missing));
  VmField f;
  REQUIRE(vm.field("CodeBlob", "_frame_complete_offset", &f));
  CHECK(f.offset == 54);
  CHECK(f.size == 2);
  CHECK(f.is_signed);
  CHECK(f.address == nullptr);
  REQUIRE(vm.field("CodeBlob", "_header_size", &f));
  CHECK((f.offset == 52 && f.size == 2 && !f.is_signed));
  REQUIRE(vm.field("CodeBlob", "_oddity", &f));
  CHECK(f.size == 0);  // a type the table does not declare: size unknown
  REQUIRE(vm.field("CodeCache", "_heaps", &f));
  CHECK(f.address == &static_value);
  CHECK_FALSE(vm.field("CodeBlob", "_frame_size", &f));
  CHECK_FALSE(vm.field("Nothing", "_frame_complete_offset", &f));
  uint64_t size = 0;
  REQUIRE(vm.type_size("VirtualSpace", &size));
  CHECK(size == 112);
  CHECK_FALSE(vm.type_size("CodeHeap", &size));
}

TEST_CASE("vm structs: a missing table or companion is named; an entry layout it cannot read is refused") {
  for (const char* name : {"gHotSpotVMStructs", "gHotSpotVMTypes", "gHotSpotVMStructEntryOffsetOffset",
                           "gHotSpotVMTypeEntrySizeOffset"}) {
    FakeJvm jvm;
    jvm.absent.insert(name);
    VmStructs vm;
    const char* missing = nullptr;
    CHECK_FALSE(jvm.open(vm, &missing));
    REQUIRE(missing);
    CHECK(std::string(missing) == name);
    VmField f;
    CHECK_FALSE(vm.field("CodeBlob", "_frame_size", &f));
  }
  FakeJvm jvm;
  jvm.companions["gHotSpotVMStructEntryAddressOffset"] = sizeof(StructEntry);  // past the entry
  VmStructs vm;
  const char* missing = nullptr;
  CHECK_FALSE(jvm.open(vm, &missing));
  CHECK(std::string(missing) == "gHotSpotVMStructEntryArrayStride");
}

// A fake code cache, described in fake tables and discovered by the reader.
struct DiscoveredCache {
  FakeCodeCache cache;
  FakeJvm jvm;
  VmStructs vm;
  CodeHeapReader reader;
  explicit DiscoveredCache(bool jdk17) : cache(jdk17) {
    cache.describe(jvm);
    const char* missing = nullptr;
    REQUIRE(jvm.open(vm, &missing));
    char why[128] = "";
    REQUIRE(reader.discover(vm, why, sizeof why));
  }
};

TEST_CASE("code heap: the blob of a pc and its frame, through the segment map") {
  for (bool jdk17 : {true, false}) {
    CAPTURE(jdk17);
    DiscoveredCache discovered(jdk17);
    FakeCodeCache& cache = discovered.cache;
    CodeHeapReader& reader = discovered.reader;
    // A small method at segment 3, a large one (600 segments: the map's
    // distances wrap past 0xFE) at 10, a stub never complete at 700.
    uint8_t* small = cache.block(3, 4, 48, 40, 6, 27);
    uint8_t* large = cache.block(10, 600, 64, 9000, 12, 44);
    uint8_t* stub = cache.block(700, 2, 32, 16, 2, -1);

    BlobFrame f;
    REQUIRE(reader.blob_at(cache.at(3, 60), &f));
    CHECK(f.code_begin == reinterpret_cast<uintptr_t>(small + 48));
    CHECK(f.code_end == reinterpret_cast<uintptr_t>(small + 88));
    CHECK(f.frame_words == 6);
    CHECK(f.frame_complete == 27);
    for (size_t segment : {10, 11, 264, 265, 500, 609}) {  // every hop pattern, to the last segment
      CAPTURE(segment);
      REQUIRE(reader.blob_at(cache.at(segment, 5), &f));
      CHECK(f.code_begin == reinterpret_cast<uintptr_t>(large + 64));
      CHECK(f.frame_words == 12);
      CHECK(f.frame_complete == 44);
    }
    REQUIRE(reader.blob_at(cache.at(701), &f));
    CHECK(f.code_begin == reinterpret_cast<uintptr_t>(stub + 32));
    CHECK(f.frame_words == 2);
    CHECK(f.frame_complete == -1);

    // What JVMTI says a method's code is must lie within its blob's.
    uintptr_t begin = reinterpret_cast<uintptr_t>(large + 64);
    CHECK(f.covers(begin, 9000) == false);  // f is the stub's now
    REQUIRE(reader.blob_at(begin, &f));
    CHECK(f.covers(begin, 9000));
    CHECK(f.covers(begin + 8, 8992));
    CHECK_FALSE(f.covers(begin, 9001));
    CHECK_FALSE(f.covers(begin - 1, 10));
    CHECK_FALSE(f.covers(begin + 9001, 0));  // in the blob, past its code (its data)

    CHECK_FALSE(reader.blob_at(cache.at(0), &f));     // a free segment
    CHECK_FALSE(reader.blob_at(cache.at(650), &f));   // free, between blocks
    CHECK_FALSE(reader.blob_at(cache.at(1024), &f));  // past the heap
    CHECK_FALSE(reader.blob_at(cache.at(0) - 16, &f));
  }
}

TEST_CASE("code heap: a compiled method's verified entry; the blob of the vtable stubs, by kind or by name") {
  for (bool jdk17 : {true, false}) {
    CAPTURE(jdk17);
    DiscoveredCache discovered(jdk17);
    FakeCodeCache& cache = discovered.cache;
    CodeHeapReader& reader = discovered.reader;
    uint8_t* method = cache.block(3, 30, 256, 200, 6, 44);
    uint8_t* vtables = cache.block(40, 30, 256, 200, 0, -1);
    uint8_t* interpreter = cache.block(80, 30, 256, 200, 0, -1);
    uint8_t* broken = cache.block(120, 30, 256, 200, 0, -1);
    cache.verified_entry(method, 32);
    cache.kind(method, "nmethod", 1);
    cache.kind(vtables, "vtable chunks", 4);
    cache.kind(interpreter, "Interpreter", 2);
    cache.kind(broken, reinterpret_cast<const char*>(16), 0);  // a name pointer to nowhere: no fault

    BlobFrame f;
    REQUIRE(reader.blob_at(reinterpret_cast<uintptr_t>(method + 300), &f));
    CHECK(reader.verified_entry(f) == reinterpret_cast<uintptr_t>(method + 256 + 32));
    CHECK_FALSE(reader.is_vtable_blob(f));
    REQUIRE(reader.blob_at(reinterpret_cast<uintptr_t>(vtables + 300), &f));
    CHECK(reader.is_vtable_blob(f));
    REQUIRE(reader.blob_at(reinterpret_cast<uintptr_t>(interpreter + 300), &f));
    CHECK_FALSE(reader.is_vtable_blob(f));
    REQUIRE(reader.blob_at(reinterpret_cast<uintptr_t>(broken + 300), &f));
    CHECK_FALSE(reader.is_vtable_blob(f));
    // An entry outside the method's code is none.
    cache.verified_entry(method, 200);
    REQUIRE(reader.blob_at(reinterpret_cast<uintptr_t>(method + 300), &f));
    CHECK(reader.verified_entry(f) == 0);
  }
}

TEST_CASE("code heap: broken maps and blobs give no answer, never a read outside the heap") {
  DiscoveredCache discovered(false);
  FakeCodeCache& cache = discovered.cache;
  CodeHeapReader& reader = discovered.reader;
  BlobFrame f;
  // A distance back past the map's start.
  cache.segmap[2] = 5;
  CHECK_FALSE(reader.blob_at(cache.at(2), &f));
  // Code bounds outside the heap, or before the blob.
  cache.block(20, 2, 0x7fff0000, 16, 4, 0);
  CHECK_FALSE(reader.blob_at(cache.at(20), &f));
  cache.block(30, 2, -64, 16, 4, 0);
  CHECK_FALSE(reader.blob_at(cache.at(30), &f));
  // A block in the last segment: its blob's fields would lie past the heap's end.
  cache.segmap[1023] = 0;
  CHECK_FALSE(reader.blob_at(cache.at(1023), &f));
  // No heaps yet (before the code cache is set up), or a heap count that is not one.
  cache.heaps_pointer = nullptr;
  CHECK_FALSE(reader.blob_at(cache.at(20), &f));
  cache.heaps_pointer = &cache.heaps;
  cache.heaps.len = 100000;
  CHECK_FALSE(reader.blob_at(cache.at(20), &f));
  // A frame-complete offset past the code: unknown.
  cache.heaps.len = 1;
  cache.block(40, 2, 16, 8, 4, 100);
  REQUIRE(reader.blob_at(cache.at(40), &f));
  CHECK(f.frame_complete == -1);
}

// What discovery over `jvm`'s tables says they lack (it must fail).
std::string lacking(FakeJvm& jvm, CodeHeapReader& reader) {
  VmStructs vm;
  const char* missing = nullptr;
  REQUIRE(jvm.open(vm, &missing));
  char why[128] = "";
  CHECK_FALSE(reader.discover(vm, why, sizeof why));
  return why;
}

TEST_CASE("code heap: the first entry the tables lack is named") {
  for (const char* name : {"CodeBlob::_frame_size", "CodeBlob::_frame_complete_offset", "CodeHeap::_segmap",
                           "CodeCache::_heaps", "CodeBlob::_code_offset"}) {
    CAPTURE(name);
    FakeCodeCache cache(false);
    FakeJvm jvm;
    cache.describe(jvm);
    std::string type(name, std::strchr(name, ':')), field(std::strrchr(name, ':') + 1);
    for (auto& e : jvm.structs)
      if (type == e.type_name && field == e.field_name) e.field_name = "_renamed";
    CodeHeapReader reader;
    CHECK(lacking(jvm, reader) == name);
    CHECK_FALSE(reader.ready());
    BlobFrame f;
    CHECK_FALSE(reader.blob_at(cache.at(0), &f));
  }
  // A field of a type whose size the tables do not give, read as an integer.
  FakeCodeCache cache(false);
  FakeJvm jvm;
  cache.describe(jvm);
  for (auto& e : jvm.structs)
    if (std::strcmp(e.field_name, "_frame_size") == 0) e.type_string = "SomethingNew";
  CodeHeapReader reader;
  CHECK(lacking(jvm, reader) == "CodeBlob::_frame_size");
}

namespace {

// The chain from a jmethodID to its Method* and back, as HotSpot lays it
// out (offsets of this fake's choosing, given through the tables):
// jmethodID -> Method* -> ConstMethod (idnum, constant pool) -> pool holder
// (an InstanceKlass) -> its jmethodID cache: [length, id of idnum 0, ...].
struct FakeMethods {
  alignas(8) uint8_t method[64] = {}, const_method[64] = {}, pool[64] = {}, klass[512] = {};
  const void* slot = method;  // what a jmethodID points at
  uintptr_t cache[4] = {3, 0, 0, 0};

  template <typename T>
  static void put(uint8_t* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
  FakeMethods() {
    put<const void*>(method + 8, const_method);
    put<const void*>(const_method + 8, pool);
    put<uint16_t>(const_method + 42, 2);  // idnum
    put<const void*>(pool + 24, klass);
    put<const void*>(klass + 400, cache);
    cache[2 + 1] = reinterpret_cast<uintptr_t>(&slot);
  }
  void describe(FakeJvm& jvm) const {
    jvm.field("Method", "_constMethod", "ConstMethod*", 8);
    jvm.field("ConstMethod", "_constants", "ConstantPool*", 8);
    jvm.field("ConstMethod", "_method_idnum", "u2", 42);
    jvm.field("ConstantPool", "_pool_holder", "InstanceKlass*", 24);
    jvm.field("InstanceKlass", "_methods_jmethod_ids", "jmethodID*", 400);
    jvm.constants.push_back({"frame::interpreter_frame_sender_sp_offset", -1});
    jvm.constants.push_back({"frame::interpreter_frame_last_sp_offset", -2});
  }
};

// Discovers `pointers` over the tables of `jvm`; what they lack goes to `what`.
bool discover(FakeJvm& jvm, MethodPointers& pointers, std::string& what) {
  VmStructs vm;
  const char* missing = nullptr;
  REQUIRE(jvm.open(vm, &missing));
  char lacking[128] = {};
  bool found = pointers.discover(vm, lacking, sizeof lacking);
  what = lacking;
  return found;
}

}  // namespace

TEST_CASE("method pointers: a jmethodID's Method*, checked through the holder's jmethodID cache") {
  FakeMethods m;
  FakeJvm jvm;
  m.describe(jvm);
  MethodPointers pointers;
  std::string what;
  REQUIRE(discover(jvm, pointers, what));
  CHECK(pointers.frame_slot() == -3);  // the slot below last sp
  CHECK(pointers.method_of(&m.slot) == reinterpret_cast<uintptr_t>(m.method));

  // The cache holds another jmethodID at this idnum: not this method's Method*.
  const void* other = m.method;
  m.cache[3] = reinterpret_cast<uintptr_t>(&other);
  CHECK(pointers.method_of(&m.slot) == 0);
  m.cache[3] = reinterpret_cast<uintptr_t>(&m.slot);
  // An idnum past the cache's length.
  FakeMethods::put<uint16_t>(m.const_method + 42, 3);
  CHECK(pointers.method_of(&m.slot) == 0);
  FakeMethods::put<uint16_t>(m.const_method + 42, 2);
  // A jmethodID that is no pointer (JDK-8268406), or points at garbage: no
  // answer, no fault.
  CHECK(pointers.method_of(reinterpret_cast<const void*>(uintptr_t{0x1234})) == 0);
  const void* garbage = reinterpret_cast<const void*>(uintptr_t{0x10});
  CHECK(pointers.method_of(&garbage) == 0);
  CHECK(pointers.method_of(&m.slot) == reinterpret_cast<uintptr_t>(m.method));
}

TEST_CASE("method pointers: the first entry the tables lack is named") {
  FakeMethods m;
  for (std::string drop : {"InstanceKlass::_methods_jmethod_ids", "frame::interpreter_frame_last_sp_offset"}) {
    FakeJvm jvm;
    m.describe(jvm);
    std::erase_if(jvm.structs, [&](const StructEntry& e) { return std::string(e.type_name) + "::" + e.field_name == drop; });
    std::erase_if(jvm.constants, [&](const IntConstantEntry& e) { return drop == e.name; });
    MethodPointers pointers;
    std::string what;
    CHECK_FALSE(discover(jvm, pointers, what));
    CHECK(what == drop);
    CHECK(pointers.method_of(&m.slot) == 0);
  }
}
