#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "flamegraph/folded.h"
#include "temp_dir.h"

using namespace ember::flamegraph;

namespace {

Profile sample_profile() {
  Profile p;
  FrameId proc = p.intern({"app", FrameKind::Process, {}});
  FrameId main = p.intern({"main", FrameKind::Native, "/usr/bin/app"});
  FrameId cpp = p.intern({"ns::Foo::bar(int)", FrameKind::Cpp, "/usr/bin/app"});
  FrameId sys = p.intern({"__x64_sys_read", FrameKind::Kernel, "[kernel]"});
  FrameId jit = p.intern({"com.example.Foo.run", FrameKind::Jit, {}});
  FrameId inl = p.intern({"com.example.Foo.helper", FrameKind::Inlined, {}});
  FrameId semi = p.intern({"a;b", FrameKind::Native, {}});
  p.add(std::vector<FrameId>{proc, main, cpp, sys}, 5);
  p.add(std::vector<FrameId>{proc, main, jit, inl}, 3);
  p.add(std::vector<FrameId>{proc, main, cpp, sys}, 2);  // merged with the first
  p.add(std::vector<FrameId>{proc, semi}, 1);
  return p;
}

}  // namespace

TEST_CASE("folded writer: suffixes, merged stacks, ';' replaced") {
  std::string text = folded_text(sample_profile());
  CHECK(text.find("app;main;ns::Foo::bar(int);__x64_sys_read_[k] 7\n") != std::string::npos);
  CHECK(text.find("app;main;com.example.Foo.run_[j];com.example.Foo.helper_[i] 3\n") != std::string::npos);
  CHECK(text.find("app;a:b 1\n") != std::string::npos);
}

TEST_CASE("folded round trip keeps kinds and weights") {
  Profile original = sample_profile();
  std::istringstream in(folded_text(original));
  auto result = read_folded(in);
  REQUIRE(result);
  CHECK(result->warnings.empty());
  const Profile& back = result->profile;
  CHECK(back.total() == original.total());
  CHECK(back.stacks().size() == original.stacks().size());
  CHECK(folded_text(back) == folded_text(original));
  auto kind_of = [&](const std::string& name) {
    for (const Frame& f : back.frames())
      if (f.name == name) return f.kind;
    FAIL("no frame " << name);
    return FrameKind::Unknown;
  };
  CHECK(kind_of("__x64_sys_read") == FrameKind::Kernel);
  CHECK(kind_of("com.example.Foo.run") == FrameKind::Jit);
  CHECK(kind_of("com.example.Foo.helper") == FrameKind::Inlined);
  CHECK(kind_of("ns::Foo::bar(int)") == FrameKind::Cpp);
  CHECK(kind_of("main") == FrameKind::Native);
  CHECK(kind_of("app") == FrameKind::Process);
}

TEST_CASE("folded reader tells Python and JavaScript frames by their script") {
  std::istringstream in(
      "app;main;outer (svc.py:12);emit (node:events);inner (js_chains.js);load (entry.mjs);"
      "node::Start(int, char**);handler (node::Environment*);leaf 3\n");
  auto result = read_folded(in);
  REQUIRE(result);
  std::map<std::string, FrameKind> kinds;
  for (const Frame& f : result->profile.frames()) kinds[f.name] = f.kind;
  CHECK(kinds["outer (svc.py:12)"] == FrameKind::Python);
  CHECK(kinds["emit (node:events)"] == FrameKind::JavaScript);
  CHECK(kinds["inner (js_chains.js)"] == FrameKind::JavaScript);
  CHECK(kinds["load (entry.mjs)"] == FrameKind::JavaScript);
  CHECK(kinds["node::Start(int, char**)"] == FrameKind::Cpp);
  // C++'s node:: namespace in parentheses is no Node module.
  CHECK(kinds["handler (node::Environment*)"] != FrameKind::JavaScript);
}

TEST_CASE("folded reader recognises thread and process pseudo-frames") {
  std::istringstream in("java (4242);[C2 CompilerThre tid=4250];start_thread 9\n");
  auto result = read_folded(in);
  REQUIRE(result);
  const auto& frames = result->profile.frames();
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].kind == FrameKind::Process);
  CHECK(frames[1].kind == FrameKind::Thread);
  CHECK(frames[2].kind == FrameKind::Native);

  // A bare root with frames after it is the process, as ember and perf's
  // stackcollapse write it; a line of one frame, a long name or C++ is not.
  std::istringstream more("cpu_split;main;work 3\nwork 2\nthread_native_entry;run 1\nns::f;g 1\n");
  result = read_folded(more);
  REQUIRE(result);
  std::map<std::string, FrameKind> kinds;
  for (const Frame& f : result->profile.frames()) kinds[f.name] = f.kind;
  CHECK(kinds["cpu_split"] == FrameKind::Process);
  CHECK(kinds["main"] == FrameKind::Native);
  CHECK(kinds["work"] == FrameKind::Native);
  CHECK(kinds["thread_native_entry"] == FrameKind::Native);
  CHECK(kinds["ns::f"] == FrameKind::Cpp);
}

TEST_CASE("folded reader skips malformed lines with their line numbers") {
  std::istringstream in(
      "a;b 3\n"
      "no_count\n"
      "a;b -4\n"
      "a;b x12\n"
      "a;;b 2\n"
      "\n"
      "# comment\n"
      "a;c 1\r\n");
  auto result = read_folded(in);
  REQUIRE(result);
  const auto& w = result->warnings;
  REQUIRE(w.size() == 4);
  CHECK(w[0].rfind("line 2:", 0) == 0);
  CHECK(w[1].rfind("line 3:", 0) == 0);
  CHECK(w[2].rfind("line 4:", 0) == 0);
  CHECK(w[3].rfind("line 5:", 0) == 0);
  CHECK(result->profile.total() == 4);
  CHECK(result->profile.stacks().size() == 2);
}

TEST_CASE("folded reader survives a huge line") {
  std::string huge(2 << 20, 'x');
  std::istringstream in(huge + " 1\na 2\n");
  auto result = read_folded(in);
  REQUIRE(result);
  CHECK(result->warnings.size() == 1);
  CHECK(result->profile.total() == 2);
}

TEST_CASE("folded file read in parts on every core: the profile and warnings of one reader") {
  TempDir dir;
  std::string path = (dir.path / "big.folded").string();
  std::ostringstream text;
  // Stacks met again far apart, new frames late in the file, bad lines in every part.
  for (int i = 0; i < 3000; ++i) {
    text << "app;main;f" << i % 97 << ";g" << i % 13 << (i > 2000 ? ";late" + std::to_string(i % 7) : "") << ' ' << 1 + i % 5
         << '\n';
    if (i % 700 == 3) text << "no count here\n";
    if (i % 900 == 5) text << "\r\n# a comment\n";
  }
  text << "last;line 4";  // no newline at the end
  std::ofstream(path) << text.str();

  std::istringstream in(text.str());
  auto one = read_folded(in);
  REQUIRE(one);
  for (size_t part_bytes : {size_t{1}, size_t{4096}, size_t{1} << 30}) {
    auto parts = read_folded_file(path, text.str().size(), part_bytes);
    REQUIRE(parts);
    CHECK(parts->warnings == one->warnings);
    REQUIRE(parts->profile.frames() == one->profile.frames());  // in the order one reader met them
    REQUIRE(parts->profile.stacks().size() == one->profile.stacks().size());
    for (size_t s = 0; s < one->profile.stacks().size(); ++s) {
      CHECK(parts->profile.stacks()[s].frames == one->profile.stacks()[s].frames);
      CHECK(parts->profile.stacks()[s].weight == one->profile.stacks()[s].weight);
    }
  }
  CHECK(one->warnings.size() == 5);
  CHECK(one->warnings.front().starts_with("line 5: "));
}
