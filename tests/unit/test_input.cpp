#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "flamegraph/folded.h"
#include "flamegraph/html.h"
#include "flamegraph/input.h"
#include "flamegraph/pprof.h"
#include "gunzip.h"
#include "temp_dir.h"

using namespace ember::flamegraph;

namespace {

Profile two_stacks() {
  Profile p;
  p.period_ns = 1'000'000;
  FrameId proc = p.intern({"app", FrameKind::Process, {}});
  FrameId main = p.intern({"main", FrameKind::Native, "/usr/bin/app"});
  FrameId work = p.intern({"work", FrameKind::Native, "/usr/bin/app"});
  p.add(std::vector<FrameId>{proc, main, work}, 5);
  p.add(std::vector<FrameId>{proc, main}, 2);
  return p;
}

struct Files {
  TempDir dir;
  std::string put(const std::string& name, std::string_view bytes) {
    std::string path = (dir.path / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
};

std::string html_of(const Profile& p) {
  std::ostringstream out;
  write_html(p, {}, out);
  return out.str();
}


}  // namespace

TEST_CASE("read_profile: ember's HTML, folded and pprof of one profile read the same") {
  Files f;
  Profile p = two_stacks();
  for (const std::string& path : {f.put("a.html", html_of(p)), f.put("a.folded", folded_text(p)),
                                  f.put("a.pb.gz", encode_pprof(p)), f.put("a-html-named.txt", html_of(p))}) {
    INFO(path);
    auto r = read_profile(path);
    REQUIRE(r);
    CHECK(folded_text(r->profile) == folded_text(p));
    CHECK(r->profile.total() == 7);
    CHECK(r->warnings.empty());
  }
  // Uncompressed pprof is told by its bytes, whatever its name.
  auto raw = read_profile(f.put("raw.bin", gunzipped(encode_pprof(p))));
  REQUIRE(raw);
  CHECK(folded_text(raw->profile) == folded_text(p));
}

TEST_CASE("read_profile: what is not a profile is refused with the reason") {
  Files f;
  std::string random;
  for (int i = 0; i < 4096; ++i) random += static_cast<char>((i * 2654435761u) >> 13);
  std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) + std::string(64, '\x7f');
  std::string gz = encode_pprof(two_stacks());
  struct Case {
    std::string name, bytes, why;
  } cases[] = {
      {"random", random, "binary data"},
      {"x.png", png, "binary data"},
      {"empty.folded", "", "is empty"},
      {"foreign.html", "<!DOCTYPE html>\n<html><body>hello</body></html>\n", "not an ember flamegraph"},
      {"upper.HTML", "  <HTML><body></body></HTML>", "not an ember flamegraph"},
      {"graph.svg", "<?xml version=\"1.0\"?>\n<svg></svg>\n", "XML or SVG"},
      {"cut.pb.gz", gz.substr(0, gz.size() / 2), "truncated"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto r = read_profile(f.put(c.name, c.bytes));
    REQUIRE_FALSE(r);
    CHECK(r.error().find(c.why) != std::string::npos);
    CHECK(r.error().find(c.name) != std::string::npos);
  }
}

TEST_CASE("read_profile: --event chooses a pprof's sample type and is refused on one-graph files") {
  Files f;
  Profile cpu = two_stacks(), offcpu;
  offcpu.event = "offcpu", offcpu.unit = "ns";
  offcpu.add(std::vector<FrameId>{offcpu.intern({"wait", FrameKind::Native, {}})}, 9000);
  const Profile* both[] = {&cpu, &offcpu};
  std::string pb = f.put("m.pb.gz", encode_pprof(both));
  auto r = read_profile(pb, {"offcpu"});
  REQUIRE(r);
  CHECK(r->profile.event == "offcpu");
  CHECK(r->profile.total() == 9000);
  CHECK(r->sample_types.names == std::vector<std::string>{"cpu-clock", "cpu", "offcpu"});
  auto wrong = read_profile(pb, {"wall"});
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().find("it holds cpu-clock, cpu, offcpu") != std::string::npos);
  for (const std::string& one : {f.put("a.html", html_of(cpu)), f.put("a.folded", folded_text(cpu))}) {
    auto refused = read_profile(one, {"cpu-clock"});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().find("one graph") != std::string::npos);
  }
}

TEST_CASE("read_profile: folded text past its first 64 KiB, from a file (streamed) and a FIFO (read whole)") {
  Files f;
  Profile p;
  FrameId root = p.intern({"service", FrameKind::Process, {}});
  for (int i = 0; i < 3000; ++i) {
    FrameId leaf = p.intern({"com.example.some.rather.long.package.Name.method" + std::to_string(i), FrameKind::Jit, {}});
    p.add(std::vector<FrameId>{root, leaf}, 1 + i % 7);
  }
  std::string text = folded_text(p);
  REQUIRE(text.size() > (128u << 10));
  auto file = read_profile(f.put("big.folded", text));
  REQUIRE(file);
  CHECK(folded_text(file->profile) == text);

  std::string fifo = (f.dir.path / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << text; });
  auto piped = read_profile(fifo);
  writer.join();
  REQUIRE(piped);
  CHECK(folded_text(piped->profile) == text);
}
