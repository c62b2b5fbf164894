// JavaScript function naming: V8's layout read from its postmortem
// constants (node 20's values), and functions read from a process's
// memory: a named function, an anonymous one whose ScopeInfo holds the
// name V8 inferred, names kept as cons and two-byte strings, and what a
// moved or freed function looks like.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "user/runtimes/v8_frames.h"
#include "fake_memory.h"
#include "v8_node20.h"

using namespace ember::runtimes;

namespace {

// A process's heap: objects by untagged address, each 256 bytes.
struct Heap : FakeMemory {
  uint64_t next = 0x100000;

  // A new object whose map says `type`: its tagged address.
  uint64_t object(uint16_t type) {
    uint64_t map = next, at = next + 0x100;
    next += 0x200;
    regions[map].assign(256, 0);
    std::memcpy(regions[map].data() + 12, &type, 2);
    regions[at].assign(256, 0);
    set(at + 1, 0, map + 1);
    return at + 1;
  }
  template <typename T>
  void set(uint64_t tagged, size_t offset, T value) {
    std::memcpy(regions[tagged - 1].data() + offset, &value, sizeof value);
  }
  uint64_t one_byte(const std::string& s) {
    uint64_t o = object(8);  // ONE_BYTE_INTERNALIZED_STRING_TYPE
    set<int32_t>(o, 12, static_cast<int32_t>(s.size()));
    std::memcpy(regions[o - 1].data() + 16, s.data(), s.size());
    return o;
  }
  uint64_t two_byte(const std::u16string& s) {
    uint64_t o = object(32);  // STRING_TYPE
    set<int32_t>(o, 12, static_cast<int32_t>(s.size()));
    std::memcpy(regions[o - 1].data() + 16, s.data(), 2 * s.size());
    return o;
  }
  uint64_t cons(uint64_t first, uint64_t second, int32_t length) {
    uint64_t o = object(41);  // CONS_ONE_BYTE_STRING_TYPE
    set<int32_t>(o, 12, length);
    set(o, 16, first);
    set(o, 24, second);
    return o;
  }
};

uint64_t smi(int64_t v) { return static_cast<uint64_t>(v) << 32; }

}  // namespace

TEST_CASE("node 20's constants give the layout ember reads") {
  auto p = v8_layout(kNode20);
  REQUIRE(p);
  CHECK(p->frames.fp_function == -16);
  CHECK(p->frames.jsfunction_shared == 24);
  CHECK(p->frames.shared_function_info_type == 262);
  CHECK(p->layout.smi_shift == 32);
  auto compressed = kNode20;
  compressed["TaggedSize"] = 4;
  CHECK(v8_layout(compressed).error().find("pointer compression") != std::string::npos);
  // The function and the context or marker are read together.
  auto apart = kNode20;
  apart["off_fp_context_or_frame_type"] = -24;
  CHECK(v8_layout(apart).error().find("describes frames") != std::string::npos);
  auto lacking = kNode20;
  lacking.erase("class_Script__name__Object");
  CHECK(v8_layout(lacking).error() == "its V8 metadata has no v8dbg_class_Script__name__");
}

TEST_CASE("functions are named from their SharedFunctionInfo") {
  V8Layout l = v8_layout(kNode20)->layout;
  Heap heap;
  uint64_t script = heap.object(167);
  heap.set(script, 16, heap.one_byte("/srv/app/server.js"));

  SECTION("a named function, its script") {
    uint64_t shared = heap.object(262);
    heap.set(shared, 16, heap.cons(heap.one_byte("handle"), heap.one_byte("Request"), 13));
    heap.set(shared, 32, script);
    auto f = read_v8_function(l, shared, heap.reader());
    REQUIRE(f);
    CHECK(f->name == "handleRequest");
    CHECK(f->script == "/srv/app/server.js");
  }
  SECTION("an anonymous function: the name V8 inferred, past the context locals") {
    uint64_t scope = heap.object(261);
    heap.set(scope, 8 + 8 * 2, smi(1));                          // one context local
    heap.set(scope, 8 + 8 * 3, heap.one_byte("request"));        // its name
    heap.set(scope, 8 + 8 * 4, smi(0));                          // its info
    heap.set(scope, 8 + 8 * 5, heap.one_byte(""));               // no own name
    heap.set(scope, 8 + 8 * 6, heap.two_byte(u"Router.h\u00e9"));  // inferred
    uint64_t shared = heap.object(262);
    heap.set(shared, 16, scope);
    heap.set(shared, 32, script);
    auto f = read_v8_function(l, shared, heap.reader());
    REQUIRE(f);
    CHECK(f->name == "Router.h\xc3\xa9");
  }
  SECTION("a script's top level and a function without a name") {
    uint64_t scope = heap.object(261);
    heap.set(scope, 8 + 8 * 3, heap.one_byte("/srv/app/server.js"));
    uint64_t top = heap.object(262);
    heap.set(top, 16, scope);
    heap.set(top, 32, script);
    CHECK(read_v8_function(l, top, heap.reader())->name.empty());
    uint64_t unnamed = heap.object(262);
    heap.set(unnamed, 16, smi(0));
    CHECK(read_v8_function(l, unnamed, heap.reader())->name.empty());
  }
  SECTION("a moved or freed function is refused") {
    uint64_t other = heap.object(167);
    CHECK_FALSE(read_v8_function(l, other, heap.reader()));
    CHECK_FALSE(read_v8_function(l, 0x7fff0001, heap.reader()));
    CHECK_FALSE(read_v8_function(l, other - 1, heap.reader()));  // not a tagged pointer
  }
}

TEST_CASE("the fuzz target's seeds hold a function as node lays it out") {
  V8Layout l = v8_layout(kNode20)->layout;
  for (auto [seed, name] : {std::pair{"seed-one-byte", "handleRequest"}, std::pair{"seed-two-byte", "Router.h\xc3\xa9"}}) {
    std::ifstream in(std::string("tests/fuzz/corpus/v8/") + seed, std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    REQUIRE(!bytes.empty());
    FakeMemory memory;
    memory.regions[0x10000].assign(bytes.begin(), bytes.end());
    auto f = read_v8_function(l, 0x10001, memory.reader());
    REQUIRE(f);
    CHECK(f->name == name);
    CHECK(f->script == "app.js");
  }
}
