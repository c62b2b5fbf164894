// CPython layouts: one per known version, and the _Py_DebugOffsets of real
// 3.13 and 3.14 processes (tests/fixtures/python, the first bytes of their
// _PyRuntime as each interpreter read them itself) agree with the static
// facts of their version.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "user/runtimes/python_layout.h"

using namespace ember::runtimes;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> fixture(const char* name) {
  fs::path path = fs::path("tests/fixtures/python") / name;
  if (!fs::exists(path)) path = fs::path(__FILE__).parent_path().parent_path() / "fixtures/python" / name;
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

bool same(const ember_python_layout& a, const ember_python_layout& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST_CASE("python layout: one per version from 3.8 to 3.14, none outside") {
  for (uint16_t v = kPythonOldest; v <= kPythonNewest; ++v) {
    auto l = python_layout(v);
    REQUIRE(l);
    CHECK(l->version == v);
    // Every version reaches a thread's frames and names their code.
    CHECK(l->runtime_interpreters >= 0);
    CHECK(l->interp_threads >= 0);
    CHECK(l->tstate_frame >= 0);
    CHECK(l->frame_code >= 0);
    CHECK(l->code_name >= 0);
    CHECK(l->code_filename >= 0);
    CHECK((l->tstate_native_thread_id >= 0) == (v >= 0x030b));
    CHECK((l->code_qualname >= 0) == (v >= 0x030b));
  }
  CHECK_THAT(python_layout(0x0307).error(), Catch::Matchers::Equals("CPython 3.7 is not one ember knows (3.8 to 3.14)"));
  CHECK_FALSE(python_layout(0x030f));
}

TEST_CASE("python layout: the debug offsets of CPython 3.13.0 and 3.14.10 match the headers' facts") {
  for (const char* name : {"debug_offsets-3.13.0.bin", "debug_offsets-3.14.10.bin"}) {
    INFO(name);
    std::vector<uint8_t> head = fixture(name);
    REQUIRE(head.size() == kDebugOffsetsBytes);
    auto read = python_layout_from_debug_offsets(head);
    REQUIRE(read);
    auto known = python_layout(read->version);
    REQUIRE(known);
    CHECK(same(*read, *known));
  }
}

TEST_CASE("python layout: debug offsets that move a field are followed; bad ones are refused") {
  std::vector<uint8_t> head = fixture("debug_offsets-3.13.0.bin");
  REQUIRE(head.size() == kDebugOffsetsBytes);
  head[248] = 64;  // interpreter_frame.instr_ptr, as a patch release might move it
  auto moved = python_layout_from_debug_offsets(head);
  REQUIRE(moved);
  CHECK(moved->frame_instr == 64);

  std::vector<uint8_t> bad = head;
  bad[0] = 'y';
  CHECK_THAT(python_layout_from_debug_offsets(bad).error(), Catch::Matchers::Contains("does not start with"));
  bad = head;
  bad[16] = 1;  // free_threaded
  CHECK_THAT(python_layout_from_debug_offsets(bad).error(), Catch::Matchers::Contains("free-threaded"));
  bad = head;
  bad[251] = 1;  // an offset past what a field can hold
  CHECK_THAT(python_layout_from_debug_offsets(bad).error(), Catch::Matchers::Contains("past 32 KiB"));
  CHECK_FALSE(python_layout_from_debug_offsets(std::span(head).first(100)));
}
