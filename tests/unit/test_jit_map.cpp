#include <catch2/catch.hpp>

#include "symbolizer/jit_map.h"

using ember::symbolizer::FrameKind;
using ember::symbolizer::JitMap;

namespace {

std::string_view kind_name(FrameKind k) {
  switch (k) {
    case FrameKind::Native: return "native";
    case FrameKind::Jit: return "jit";
    case FrameKind::Inlined: return "inlined";
    case FrameKind::Interpreted: return "interpreted";
    default: return "other";
  }
}

std::vector<std::string> names(const JitMap& map, uint64_t address, uint64_t time) {
  std::vector<std::string> out;
  auto at = map.locate(address, time);
  if (!at) return out;
  for (const auto& f : map.frames(at)) out.push_back(f.name + "/" + std::string(kind_name(f.kind)));
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("jit map: compiled methods, inlining by pc, stubs") {
  JitMap map;
  map.feed(
      "# ember-jitmap 1 pid 42\n"
      "M 1 Foo.outer\n"
      "M 2 Foo.inner\n"
      "M 3 Foo.leaf\n"
      "S 100 7f0000001000 800 Interpreter\n"
      "S 100 7f0000002000 40 StubRoutines::call_stub\n"
      "L 200 7f0000010000 400 1\n"
      "I 20 3,2,1\n"
      "I 80 2,1\n");
  CHECK(names(map, 0x7f0000001100, 300) == V{"Interpreter/interpreted"});
  CHECK(names(map, 0x7f0000002010, 300) == V{"StubRoutines::call_stub/native"});
  // Before the first debug pc: the frames recorded there, innermost first.
  CHECK(names(map, 0x7f0000010010, 300) == V{"Foo.leaf/inlined", "Foo.inner/inlined", "Foo.outer/jit"});
  CHECK(names(map, 0x7f0000010050, 300) == V{"Foo.inner/inlined", "Foo.outer/jit"});
  // After the last debug pc: the method itself.
  CHECK(names(map, 0x7f0000010200, 300) == V{"Foo.outer/jit"});
  CHECK(names(map, 0x7f0000010400, 300).empty());  // one past the end
  CHECK(names(map, 0x7f0000000100, 300).empty());
  CHECK(map.methods() == 3);
  CHECK(map.bad_lines() == 0);
}

TEST_CASE("jit map: freed code keeps its name for samples taken before, not after") {
  JitMap map;
  map.feed(
      "M 1 Gen.old\n"
      "M 2 Gen.new\n"
      "L 100 7f0000010000 100 1\n"
      "U 500 7f0000010000\n"
      "L 600 7f0000010000 100 2\n");
  CHECK(names(map, 0x7f0000010010, 300) == V{"Gen.old/jit"});  // sampled while the old code lived
  CHECK(names(map, 0x7f0000010010, 700) == V{"Gen.new/jit"});
  // Between free and reuse: the new code, which may have run before its
  // (late) load event.
  CHECK(names(map, 0x7f0000010010, 550) == V{"Gen.new/jit"});

  // Overlapping new code retires the old without an explicit unload.
  map.feed("M 3 Gen.third\nL 900 7f0000010040 100 3\n");
  CHECK(names(map, 0x7f0000010050, 800) == V{"Gen.new/jit"});
  CHECK(names(map, 0x7f0000010050, 950) == V{"Gen.third/jit"});
  CHECK(names(map, 0x7f0000010010, 950).empty());  // Gen.new is gone

  map.forget_before(1000);
  CHECK(names(map, 0x7f0000010010, 300).empty());

  // Far older than any load event (more than the 1 s of slack): not this code.
  map.feed("M 4 Gen.late\nL 5000000000 7f0000030000 100 4\n");
  CHECK(names(map, 0x7f0000030010, 1000000000).empty());
  CHECK(names(map, 0x7f0000030010, 4500000000) == V{"Gen.late/jit"});
}

TEST_CASE("jit map: partial lines wait, garbage is counted, code published late still names") {
  JitMap map;
  map.feed("M 1 A.b\nL 10 7f00");
  CHECK(map.live_blobs() == 0);
  map.feed("00010000 100 1\nthis is not a line\nL x y z\nI 5\n");
  CHECK(map.live_blobs() == 1);
  CHECK(map.bad_lines() == 3);
  // JDK 17 posts loads from its service thread: a sample can predate the event.
  CHECK(names(map, 0x7f0000010010, 5) == V{"A.b/jit"});
  // A method id with no name yet.
  map.feed("L 20 7f0000020000 10 9\n");
  CHECK(names(map, 0x7f0000020001, 30) == V{"[unknown method]/jit"});
}

TEST_CASE("jit map: code replayed at attach (time 0) names samples taken before it was published") {
  JitMap map;
  // The recording started at 1e9; the agent attached and replayed at 5e9,
  // far past the publishing slack; a method compiled later has its time.
  map.feed(
      "# ember-jitmap 1 pid 42\n"
      "M 1 Foo.old\n"
      "M 2 Foo.fresh\n"
      "S 0 7f0000001000 800 Interpreter\n"
      "L 0 7f0000010000 400 1\n"
      "L 9000000000 7f0000020000 400 2\n");
  CHECK(names(map, 0x7f0000001100, 1'000'000'000) == V{"Interpreter/interpreted"});
  CHECK(names(map, 0x7f0000010010, 1'000'000'000) == V{"Foo.old/jit"});
  CHECK(names(map, 0x7f0000020010, 1'000'000'000).empty());
  CHECK(names(map, 0x7f0000020010, 9'000'000'000) == V{"Foo.fresh/jit"});
}

TEST_CASE("jit map: the frames of live code, for the unwinder") {
  using Kind = JitMap::Code::Kind;
  JitMap map;
  map.feed(
      "M 1 Foo.hot\n"
      "M 2 MethodHandle.linkToStatic\n"
      "S 0 7f0000001000 800 Interpreter\n"
      "S 0 7f0000002000 40 call_stub\n"
      "S 0 7f0000003000 100 I2C/C2I adapters\n"
      "S 0 7f0000004000 20 vtable stub\n"
      "G 7f0000004000 0 0\n"
      "L 0 7f0000010000 400 1\n"
      "G 7f0000010000 12 44\n"
      "L 0 7f0000020000 80 2\n"
      "G 7f0000020000 0 -1\n");
  uint64_t version = map.code_version();
  auto code = map.live_code();
  REQUIRE(code.size() == 6);
  CHECK(code[0].kind == Kind::Interpreter);
  CHECK(code[1].kind == Kind::CallStub);
  CHECK(code[2].kind == Kind::Other);
  CHECK(code[2].frame_words == -1);  // no G line: not published
  CHECK(code[3].kind == Kind::Other);
  CHECK(code[3].frame_words == 0);  // frameless, as the agent says (not by its name)
  CHECK(code[4].kind == Kind::Compiled);
  CHECK(code[4].frame_words == 12);
  CHECK(code[4].complete == 44);
  CHECK(code[5].frame_words == 0);  // frameless
  CHECK(map.locate(0x7f0000010100, 1).framed);
  CHECK(map.locate(0x7f0000020010, 1).framed);
  CHECK_FALSE(map.locate(0x7f0000003010, 1).framed);
  CHECK(map.frames_unavailable().empty());

  // A frameless method-handle intrinsic: HotSpot puts its complete offset
  // at the end of its code.
  map.feed("L 0 7f0000030000 20 2\nG 7f0000030000 0 32\n");
  CHECK(map.live_code().back().frame_words == 0);
  CHECK(map.bad_lines() == 0);
  version = map.code_version();
  // A G line for no live code, past the code's end, or malformed: bad lines.
  map.feed("G 7f0000040000 4 0\nG 7f0000010000 4 4096\nG 7f0000010000 x 1\n");
  CHECK(map.bad_lines() == 3);
  CHECK(map.code_version() == version);
  // Freed code leaves the live code; the version says it changed.
  map.feed("U 5 7f0000010000\n");
  CHECK(map.code_version() != version);
  CHECK(map.live_code().size() == 6);

  JitMap old_jdk;
  old_jdk.feed("O frames-unavailable CodeBlob::_frame_size\nL 0 7f0000010000 400 1\n");
  CHECK(old_jdk.frames_unavailable() == "CodeBlob::_frame_size");
  CHECK_FALSE(old_jdk.locate(0x7f0000010100, 1).framed);
  CHECK(old_jdk.bad_lines() == 0);
}

TEST_CASE("jit map: a prologue's steps (G lines): where the frame is half built") {
  using Step = JitMap::FrameStep;
  JitMap map;
  map.feed(
      "M 1 Foo.hot\n"
      "L 0 7f0000010000 400 1\n"
      "G 7f0000010000 10 44 40:2:-2\n"
      "L 0 7f0000020000 400 1\n"
      "G 7f0000020000 4 12 7:4:0\n"
      "L 0 7f0000030000 400 1\n"
      "G 7f0000030000 4 12\n");
  auto code = map.live_code();
  REQUIRE(code.size() == 3);
  CHECK(code[0].steps == std::vector<Step>{{40, 2, -2}});
  CHECK(code[1].steps == std::vector<Step>{{7, 4, 0}});
  CHECK(code[2].steps.empty());
  CHECK(map.bad_lines() == 0);
  // Past complete, out of order, larger than the frame, rbp in the return
  // address's slot or above the caller's rsp, malformed, more than 4.
  for (const char* bad : {"G 7f0000010000 10 44 44:2:-2\n", "G 7f0000010000 10 44 20:2:-2 10:3:-2\n",
                          "G 7f0000010000 10 44 20:11:-2\n", "G 7f0000010000 10 44 20:2:-1\n",
                          "G 7f0000010000 10 44 20:2:-3\n", "G 7f0000010000 10 44 20:2\n",
                          "G 7f0000010000 10 44 20:2:-2:\n", "G 7f0000010000 10 44 1:1:0 2:2:0 3:3:0 4:4:0 5:5:0\n"}) {
    CAPTURE(bad);
    size_t before = map.bad_lines();
    map.feed(bad);
    CHECK(map.bad_lines() == before + 1);
  }
  CHECK(map.live_code()[0].steps == std::vector<Step>{{40, 2, -2}});
}

TEST_CASE("jit map: interpreted frames' methods by Method* (P lines)") {
  using Kind = JitMap::Code::Kind;
  JitMap map;
  map.feed(
      "O interpreter-method-slot -3\n"
      "S 0 7f0000001000 800 Interpreter\n"
      "M 1 Foo.run\n"
      "M 2 Foo.helper\n"
      "P 7f00a0001230 1\n"
      "P 7f00a0004560 2\n");
  auto code = map.live_code();
  REQUIRE(code.size() == 1);
  CHECK(code[0].kind == Kind::Interpreter);
  CHECK(code[0].method_slot == -3);
  CHECK(map.interpreted_method(0x7f00a0001230) == 1);
  CHECK(map.name(map.interpreted_method(0x7f00a0004560)) == "Foo.helper");
  CHECK(map.interpreted_method(0x7f00a0009990) == 0);
  // Its class unloaded, a Method*'s memory goes to another method.
  map.feed("M 3 Bar.other\nP 7f00a0001230 3\n");
  CHECK(map.name(map.interpreted_method(0x7f00a0001230)) == "Bar.other");
  // Malformed: no id, id 0, a slot at or above rbp.
  map.feed("P 7f00a0001230\nP 7f00a0001230 0\nO interpreter-method-slot 2\n");
  CHECK(map.bad_lines() == 3);
  CHECK(map.live_code()[0].method_slot == -3);
  CHECK(map.interpreter_methods_unavailable().empty());

  JitMap new_jdk;
  new_jdk.feed("O interpreter-methods-unavailable its jmethodIDs do not lead to Method*s\n"
               "S 0 7f0000001000 800 Interpreter\n");
  CHECK(new_jdk.interpreter_methods_unavailable() == "its jmethodIDs do not lead to Method*s");
  CHECK(new_jdk.live_code()[0].method_slot == 0);
}

TEST_CASE("jit map: a hostile stream's ids and addresses cost only what it wrote") {
  JitMap map;
  // A method id near the limit: one name, not millions of empty ones.
  map.feed("M 16000000 Foo.far\nS 0 0 800 Interpreter\nL 0 0 10 1\n");
  CHECK(map.methods() == 1);
  CHECK(map.name(16000000) == "Foo.far");
  // Code at address 0 is no code: refused.
  CHECK(map.live_code().empty());
  CHECK(map.bad_lines() == 2);
}
