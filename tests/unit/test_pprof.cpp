#include <catch2/catch.hpp>

#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/pprof.h"
#include "flamegraph/table.h"

using namespace ember::flamegraph;

namespace {

Profile sample_profile() {
  Profile p;
  p.period_ns = 10'101'010;
  FrameId proc = p.intern({"java (42)", FrameKind::Process, {}});
  FrameId thread = p.intern({"[C2 CompilerThre tid=43]", FrameKind::Thread, {}});
  FrameId main = p.intern({"main", FrameKind::Native, "/usr/bin/app"});
  FrameId jit = p.intern({"Foo.run", FrameKind::Jit, {}});
  FrameId inl = p.intern({"Foo.helper", FrameKind::Inlined, {}});
  FrameId sys = p.intern({"vfs_read", FrameKind::Kernel, "[kernel]"});
  p.add(std::vector<FrameId>{proc, thread, main, jit, inl}, 7);
  p.add(std::vector<FrameId>{proc, main, jit, sys}, 3);
  p.add(std::vector<FrameId>{proc, main}, 2);
  return p;
}

}  // namespace

TEST_CASE("pprof round trip keeps stacks, kinds, modules, pid and thread labels") {
  Profile original = sample_profile();
  std::string bytes = encode_pprof(original);
  REQUIRE(bytes.size() > 2);
  CHECK(static_cast<uint8_t>(bytes[0]) == 0x1f);  // gzip
  auto back = decode_pprof(bytes);
  REQUIRE(back);
  CHECK(back->total() == 12);
  CHECK(back->unit == "samples");
  CHECK(back->period_ns == original.period_ns);
  CHECK(folded_text(*back) == folded_text(original));
  for (const Frame& f : back->frames())
    if (f.name == "main") CHECK(f.module == "/usr/bin/app");
}

TEST_CASE("pprof keeps the recording's facts as comments") {
  Profile original = sample_profile();
  original.info = {{"samples", "12"}, {"lost", "0"}, {"host", "web-1: eu"}};
  auto back = decode_pprof(encode_pprof(original));
  REQUIRE(back);
  CHECK(back->info == original.info);  // in order; a value may hold ": "
}

TEST_CASE("pprof decoder refuses corrupt input with a reason") {
  std::string good = encode_pprof(sample_profile());
  auto truncated = decode_pprof(std::string_view(good).substr(0, good.size() / 2));
  REQUIRE_FALSE(truncated);
  CHECK(truncated.error().find("truncated") != std::string::npos);

  std::string flipped = good;
  for (size_t i = 20; i < flipped.size(); i += 7) flipped[i] ^= 0x5a;
  CHECK_FALSE(decode_pprof(flipped));  // corrupt deflate data or checksum

  CHECK_FALSE(decode_pprof(""));
  CHECK_FALSE(decode_pprof("\x0a\xff\xff\xff\xff\x0f"));  // a length past the end
  auto empty_message = decode_pprof(std::string_view("\x12\x00", 2));  // a sample, no sample types
  REQUIRE_FALSE(empty_message);
  CHECK(empty_message.error().find("no sample types") != std::string::npos);
}

TEST_CASE("function table: self at the leaf, total once per stack, pseudo-frames left out") {
  Profile p;
  FrameId proc = p.intern({"app", FrameKind::Process, {}});
  FrameId a = p.intern({"a", FrameKind::Native, {}});
  FrameId b = p.intern({"b", FrameKind::Native, {}});
  FrameId a_jit = p.intern({"a", FrameKind::Jit, {}});
  p.add(std::vector<FrameId>{proc, a, b, a}, 5);  // recursive: a counted once
  p.add(std::vector<FrameId>{proc, b}, 3);
  p.add(std::vector<FrameId>{proc, a_jit}, 1);  // same function, another kind
  auto rows = function_table(p);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].name == "a");
  CHECK(rows[0].self == 6);
  CHECK(rows[0].total == 6);
  CHECK(rows[1].name == "b");
  CHECK(rows[1].self == 3);
  CHECK(rows[1].total == 8);

  std::ostringstream out;
  write_report(p, 1, out);
  CHECK(out.str().find("9 samples in 3 stacks, 2 functions") != std::string::npos);
  CHECK(out.str().find("  b\n") == std::string::npos);  // only the top row
}
