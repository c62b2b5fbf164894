// JavaScript function naming: V8's layout read from its postmortem
// constants (node 20's values), and functions read from a process's
// memory: a named function, an anonymous one whose ScopeInfo holds the
// name V8 inferred, names kept as cons and two-byte strings, and what a
// moved or freed function looks like. With --lines: where node 18's and
// 20's frames keep their positions, and a frame's line from its bytecode
// offset, its pc in baseline code, or its pc in optimized code (the
// function's, or code optimized on stack replacement) with the functions
// inlined there.
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
  auto p = v8_layout(kNode20, {11, 3, 244});
  REQUIRE(p);
  CHECK(p->frames.fp_function == -16);
  CHECK(p->frames.jsfunction_shared == 24);
  CHECK(p->frames.shared_function_info_type == 262);
  CHECK(p->layout.smi_shift == 32);
  auto compressed = kNode20;
  compressed["TaggedSize"] = 4;
  CHECK(v8_layout(compressed, {11, 3, 244}).error().find("pointer compression") != std::string::npos);
  // The function and the context or marker are read together.
  auto apart = kNode20;
  apart["off_fp_context_or_frame_type"] = -24;
  CHECK(v8_layout(apart, {11, 3, 244}).error().find("describes frames") != std::string::npos);
  auto lacking = kNode20;
  lacking.erase("class_Script__name__Object");
  CHECK(v8_layout(lacking, {11, 3, 244}).error() == "its V8 metadata has no v8dbg_class_Script__name__");
}

TEST_CASE("functions are named from their SharedFunctionInfo") {
  V8Layout l = v8_layout(kNode20, {11, 3, 244})->layout;
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
  V8Layout l = v8_layout(kNode20, {11, 3, 244})->layout;
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
  // Optimized code with a function inlined where its first two bytes
  // (the fuzz target's position) point.
  std::ifstream in("tests/fuzz/corpus/v8/seed-optimized", std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  REQUIRE(bytes.size() > 2);
  FakeMemory memory;
  memory.regions[0x10000].assign(bytes.begin(), bytes.end());
  uint64_t offset = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8;
  auto places = read_v8_places(l, EMBER_FRAME_V8 | 0x10001 | EMBER_V8_CODE, EMBER_FRAME_V8_PC | offset, memory.reader());
  REQUIRE(places);
  REQUIRE(places->size() == 2);
  CHECK(read_v8_function(l, (*places)[0].shared, memory.reader())->name == "inlined");
  CHECK(read_v8_function(l, (*places)[1].shared, memory.reader())->name == "outer");
  CHECK((*places)[0].script_offset == 30);
  CHECK((*places)[1].script_offset == 20);
}

namespace {

// A source position table as V8 writes it: per entry the code offset's
// and the position's differences from the entry before (the first from
// offset -1), zigzag VLQ, the code offset's negated (minus one) for an
// expression.
std::vector<uint8_t> position_table(const std::vector<std::pair<int64_t, uint64_t>>& entries) {
  std::vector<uint8_t> out;
  auto put = [&](int64_t v) {
    uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
    do {
      out.push_back(static_cast<uint8_t>((z & 0x7f) | (z > 0x7f ? 0x80 : 0)));
      z >>= 7;
    } while (z);
  };
  int64_t offset = -1, position = 0;
  bool statement = true;
  for (auto [code_offset, raw] : entries) {
    int64_t delta = code_offset - offset;
    put(statement ? delta : -delta - 1);
    put(static_cast<int64_t>(raw) - position);
    offset = code_offset, position = static_cast<int64_t>(raw);
    statement = !statement;
  }
  return out;
}

// V8's SourcePosition: the script offset + 1, then the inlining id + 1.
uint64_t source_position(int64_t script_offset, int inlining = -1) {
  return static_cast<uint64_t>(script_offset + 1) << 1 | static_cast<uint64_t>(inlining + 1) << 31;
}

uint64_t byte_array(Heap& heap, const std::vector<uint8_t>& bytes) {
  uint64_t a = heap.object(190);
  heap.set(a, 8, smi(static_cast<int64_t>(bytes.size())));
  std::memcpy(heap.regions[a - 1].data() + 16, bytes.data(), bytes.size());
  return a;
}

}  // namespace

TEST_CASE("node 18's and node 20's constants tell where frames' positions are") {
  auto node20 = v8_layout(kNode20, {11, 3, 244});
  REQUIRE(node20);
  CHECK(node20->no_positions.empty());
  CHECK(node20->layout.positions);
  // 11.3's Code points to its instructions; JSFunction's code follows its
  // feedback cell.
  CHECK(node20->frames.jsfunction_code == 48);
  CHECK_FALSE(node20->frames.instructions_inline);
  CHECK(node20->frames.code_instruction_start == 40);
  CHECK(node20->frames.code_flags == 48);
  CHECK(node20->frames.code_instruction_size == 56);
  CHECK(node20->frames.bytecode_start == 53);
#if !defined(__aarch64__)
  CHECK(node20->frames.offset_in_register);  // r9
#endif
  CHECK(node20->layout.bytecode_source_positions == 32);
  // 10.2's Code holds its instructions, and the constants say where.
  auto constants18 = kNode20;
  constants18.erase("class_Code__source_position_table__ByteArray");
  constants18.erase("class_Code__deoptimization_data__FixedArray");
  constants18["class_Code__instruction_start__uintptr_t"] = 128;
  constants18["class_Code__instruction_size__int"] = 40;
  constants18["class_Code__flags__uint32_t"] = 48;
  constants18["class_JSFunction__code__CodeT"] = 48;
  constants18["class_BytecodeArray__data__uintptr_t"] = 56;
  auto node18 = v8_layout(constants18, {10, 2, 154});
  REQUIRE(node18);
  CHECK(node18->layout.positions);
  CHECK(node18->frames.instructions_inline);
  CHECK(node18->frames.code_instruction_start == 128);
  CHECK(node18->layout.code_source_positions == 24);
  CHECK(node18->layout.code_deoptimization_data == 16);
  CHECK(node18->frames.bytecode_start == 55);
  // A V8 whose Code layout neither the constants nor ember know: its
  // functions are named, their lines not.
  auto unknown = kNode20;
  unknown.erase("class_Code__source_position_table__ByteArray");
  auto v12 = v8_layout(unknown, {12, 4, 254});
  REQUIRE(v12);
  CHECK_FALSE(v12->layout.positions);
  CHECK(v12->no_positions == "V8 12.4 does not say where a Code's instructions lie");
}

TEST_CASE("a frame's position gives its line, and the functions inlined where it runs") {
  V8Layout l = v8_layout(kNode20, {11, 3, 244})->layout;
  Heap heap;
  // Source: line 1 "a", line 2 "function f() {", line 3 "  g();", ...
  const std::string source = "a\nfunction f() {\n  g();\n}\nfunction g() {\n  return 1;\n}\n";
  auto offset_of = [&](const std::string& text) { return static_cast<int64_t>(source.find(text)); };
  uint64_t script = heap.object(167);
  heap.set(script, 16, heap.one_byte("/srv/app.js"));
  heap.set(script, 8, heap.cons(heap.one_byte(source.substr(0, 20)), heap.one_byte(source.substr(20)),
                                static_cast<int32_t>(source.size())));
  heap.set(script, 56, heap.object(131));  // line ends not computed: undefined
  auto function = [&](const std::string& name) {
    uint64_t shared = heap.object(262);
    heap.set(shared, 16, heap.one_byte(name));
    heap.set(shared, 32, script);
    return shared;
  };
  uint64_t f = function("f"), g = function("g");
  auto line = [&](const V8Place& place) {
    auto ends = read_v8_line_ends(l, script, heap.reader());
    REQUIRE(ends);
    return v8_line(*ends, place.script_offset);
  };

  SECTION("interpreted: the bytecode offset's position in the BytecodeArray's table") {
    uint64_t bytecode = heap.object(191);
    // The function's entry (at offset -1, line 1 here), its first
    // statement at 0 (line 2), a call at 7 (line 3).
    heap.set(bytecode, 32, byte_array(heap, position_table({{-1, source_position(offset_of("a"))},
                                                            {0, source_position(offset_of("function f"))},
                                                            {7, source_position(offset_of("g();"))}})));
    heap.set(f, 8, bytecode);
    auto places = read_v8_places(l, EMBER_FRAME_V8 | f, EMBER_FRAME_V8_BYTECODE | 9, heap.reader());
    REQUIRE(places);
    REQUIRE(places->size() == 1);
    CHECK(line(places->front()) == 3);
    for (auto [offset, expected] : {std::pair{0, 2}, std::pair{6, 2}, std::pair{7, 3}})
      CHECK(line(read_v8_places(l, EMBER_FRAME_V8 | f, EMBER_FRAME_V8_BYTECODE | offset, heap.reader())->front()) ==
            expected);
    // Flushed: the function's data is no longer bytecode.
    heap.set(f, 8, heap.object(175));
    CHECK(read_v8_places(l, EMBER_FRAME_V8 | f, EMBER_FRAME_V8_BYTECODE | 9, heap.reader()).error() ==
          "bytecode flushed");
  }
  SECTION("baseline: the bytecode whose machine code holds the pc, walked by the bytecodes' sizes") {
    // Bytecodes 0-3 are the prefixes (Wide, ExtraWide and their debug
    // forms); 4 takes one operand, 5 two, 6 and 7 none.
    l.bytecode_sizes = {1, 1, 1, 1, 2, 3, 1, 1,   // operands of 1 byte
                        1, 1, 1, 1, 3, 5, 1, 1,   // of 2 (after Wide)
                        1, 1, 1, 1, 5, 9, 1, 1};  // of 4 (after ExtraWide)
    const std::vector<uint8_t> code = {5, 1, 2, 6, 0, 5, 1, 0, 2, 0, 7};  // at 0, 3, 4 (Wide 5), 10
    uint64_t bytecode = heap.object(191);
    heap.set(bytecode, 8, smi(static_cast<int64_t>(code.size())));
    std::memcpy(heap.regions[bytecode - 1].data() + 54, code.data(), code.size());
    heap.set(bytecode, 32, byte_array(heap, position_table({{-1, source_position(offset_of("a"))},
                                                            {0, source_position(offset_of("function f"))},
                                                            {4, source_position(offset_of("g();"))},
                                                            {10, source_position(offset_of("}\nfunction g"))}})));
    uint64_t baseline = heap.object(245);
    heap.set<uint32_t>(baseline, 48, 11);  // CodeKind::BASELINE
    heap.set(baseline, 16, bytecode);
    // Machine code: the prologue's 10 bytes, then 20, 5, 30 and 8 for the bytecodes.
    heap.set(baseline, 24, byte_array(heap, {10, 20, 5, 30, 8}));
    heap.set(f, 8, baseline);
    for (auto [pc, expected] : {std::pair{5, 1}, std::pair{12, 2}, std::pair{30, 2}, std::pair{40, 3}, std::pair{70, 4}}) {
      auto places = read_v8_places(l, EMBER_FRAME_V8 | f, EMBER_FRAME_V8_PC | pc, heap.reader());
      REQUIRE(places);
      CHECK(line(places->front()) == expected);
    }
    CHECK_FALSE(read_v8_places(l, EMBER_FRAME_V8 | f, EMBER_FRAME_V8_PC | 100, heap.reader()));
    // Its code flushed, or replaced by another kind: no line.
    heap.set<uint32_t>(baseline, 48, 13);
    CHECK(read_v8_places(l, EMBER_FRAME_V8 | f, EMBER_FRAME_V8_PC | 12, heap.reader()).error() ==
          "baseline code flushed");
  }
  SECTION("optimized: g inlined into f, named above it at its line, f at its call's") {
    uint64_t code = heap.object(245), data = heap.object(175), literals = heap.object(175);
    heap.set(code, 16, data);
    heap.set(code, 24, byte_array(heap, position_table({{0, source_position(offset_of("function f"))},
                                                        {20, source_position(offset_of("return 1"), 0)},
                                                        {40, source_position(offset_of("}\nfunction g"))}})));
    heap.set(data, 16 + 8 * 6, f);
    heap.set(data, 16 + 8 * 2, literals);
    heap.set(literals, 16 + 8 * 1, g | 2);  // a weak reference
    std::vector<uint8_t> inlined(16);
    uint64_t call = source_position(offset_of("g();"));
    int32_t index = 1;
    std::memcpy(inlined.data(), &call, 8);
    std::memcpy(inlined.data() + 8, &index, 4);
    heap.set(data, 16 + 8 * 7, byte_array(heap, inlined));
    uint64_t word = EMBER_FRAME_V8 | code | EMBER_V8_CODE;

    auto places = read_v8_places(l, word, EMBER_FRAME_V8_PC | 25, heap.reader());
    REQUIRE(places);
    REQUIRE(places->size() == 2);
    CHECK((*places)[0].shared == g);
    CHECK(line((*places)[0]) == 6);
    CHECK((*places)[1].shared == f);
    CHECK(line((*places)[1]) == 3);
    places = read_v8_places(l, word, EMBER_FRAME_V8_PC | 19, heap.reader());
    REQUIRE(places->size() == 1);
    CHECK(line(places->front()) == 2);
    places = read_v8_places(l, word, EMBER_FRAME_V8_PC | 40, heap.reader());
    CHECK(line(places->front()) == 4);
    // Without a position (the stack was cut after its word): the function.
    places = read_v8_places(l, word, 0, heap.reader());
    REQUIRE(places->size() == 1);
    CHECK(places->front().shared == f);
    CHECK(places->front().script_offset == -1);
    // Code moved or freed.
    CHECK_FALSE(read_v8_places(l, EMBER_FRAME_V8 | f | EMBER_V8_CODE, EMBER_FRAME_V8_PC | 25, heap.reader()));

    // The same code optimized on stack replacement: f's JSFunction does
    // not hold it, its FeedbackVector does (a weak reference), and the
    // frame gives the pc itself.
    heap.set<uint32_t>(code, 48, 13);            // CodeKind::TURBOFAN
    heap.set<uint64_t>(code, 40, 0x7f0000001000);  // its first instruction
    heap.set<uint32_t>(code, 56, 400);
    uint64_t js_function = heap.object(2066), cell = heap.object(156), vector = heap.object(249);
    heap.regions[vector - 1].resize(1024);
    heap.set(js_function, 24, f);
    heap.set(js_function, 40, cell);
    heap.set(cell, 8, vector);
    heap.set(vector, 8 * 9, code | 2);
    uint64_t osr = EMBER_FRAME_V8 | js_function | EMBER_V8_FUNCTION;
    places = read_v8_places(l, osr, EMBER_FRAME_V8_PC | (0x7f0000001000 + 25), heap.reader());
    REQUIRE(places);
    REQUIRE(places->size() == 2);
    CHECK((*places)[0].shared == g);
    CHECK((*places)[1].shared == f);
    CHECK(line((*places)[1]) == 3);
    // A pc outside it, or code of another function's: not found.
    CHECK(read_v8_places(l, osr, EMBER_FRAME_V8_PC | (0x7f0000001000 + 400), heap.reader()).error() ==
          "code optimized on stack replacement not found");
    heap.set(js_function, 24, g);
    CHECK_FALSE(read_v8_places(l, osr, EMBER_FRAME_V8_PC | (0x7f0000001000 + 25), heap.reader()));
  }
  SECTION("line ends V8 keeps are read as they are") {
    uint64_t ends = heap.object(175);
    heap.set(ends, 8, smi(3));
    for (int i = 0; i < 3; ++i) heap.set(ends, 16 + 8 * i, smi(10 * (i + 1)));
    heap.set(script, 56, ends);
    auto read = read_v8_line_ends(l, script, heap.reader());
    REQUIRE(read);
    CHECK(v8_line(*read, 0) == 1);
    CHECK(v8_line(*read, 10) == 1);  // the newline ends its line
    CHECK(v8_line(*read, 11) == 2);
    CHECK(v8_line(*read, 31) == 4);
    CHECK(v8_line(*read, -1) == 0);
  }
  SECTION("a source outside the heap (node's own modules) is read where the string says") {
    const std::string text = "x\ny\nz";
    uint64_t external = heap.object(42);  // EXTERNAL_ONE_BYTE_STRING_TYPE
    heap.set<int32_t>(external, 12, static_cast<int32_t>(text.size()));
    heap.set<uint64_t>(external, 24, 0x900000);
    heap.put(0x900000, text.data(), text.size());
    heap.set(script, 8, external);
    auto read = read_v8_line_ends(l, script, heap.reader());
    REQUIRE(read);
    CHECK(*read == std::vector<uint32_t>{1, 3});
    heap.set(script, 8, heap.object(42 | 0x10));  // uncached: where its characters are is not kept
    CHECK_FALSE(read_v8_line_ends(l, script, heap.reader()));
  }
}
