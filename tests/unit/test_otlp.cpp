#include <catch2/catch.hpp>

#include <random>

#include "flamegraph/folded.h"
#include "flamegraph/gzip.h"
#include "flamegraph/otlp.h"

using namespace ember::flamegraph;

namespace {

// Two processes, threads, every kind of frame, and a timeline.
Profile recording() {
  Profile p;
  p.period_ns = 10'101'010;
  p.start_unix_ns = 1'700'000'000'000'000'000;
  p.duration_ns = 3'000'000'000;
  p.info = {{"host", "box"}, {"samples", "12"}};
  FrameId java = p.intern({"java (42)", FrameKind::Process, {}});
  FrameId py = p.intern({"python3 (77)", FrameKind::Process, {}});
  FrameId thread = p.intern({"[C2 CompilerThre tid=43]", FrameKind::Thread, {}});
  FrameId main = p.intern({"main", FrameKind::Native, "/usr/bin/app"});
  FrameId cpp = p.intern({"Compile::Optimize", FrameKind::Cpp, "/usr/lib/jvm/libjvm.so"});
  FrameId jit = p.intern({"Foo.run", FrameKind::Jit, {}});
  FrameId inl = p.intern({"Foo.helper", FrameKind::Inlined, {}});
  FrameId interp = p.intern({"Foo.slow", FrameKind::Interpreted, {}});
  FrameId alloc = p.intern({"byte[]", FrameKind::Alloc, {}});
  FrameId sys = p.intern({"vfs_read", FrameKind::Kernel, "[kernel]"});
  FrameId fn = p.intern({"alpha (/app/x.py:3)", FrameKind::Python, {}});
  FrameId js = p.intern({"render (/app/y.js:9)", FrameKind::JavaScript, {}});
  uint32_t a = p.add(std::vector<FrameId>{java, thread, main, cpp, jit, inl}, 5);
  uint32_t b = p.add(std::vector<FrameId>{java, main, interp, alloc}, 3);
  uint32_t c = p.add(std::vector<FrameId>{py, main, fn, sys}, 2);
  uint32_t d = p.add(std::vector<FrameId>{py, js}, 2);
  // A sample a time, as a recording has them; the last two at once.
  uint64_t t = 0;
  for (auto [stack, n] : {std::pair{a, 5}, {b, 3}, {c, 2}, {d, 2}})
    for (int i = 0; i < n; ++i) p.timeline.push_back({t += 1'000'000, 1, stack});
  p.timeline.back().time_ns = p.timeline[p.timeline.size() - 2].time_ns;
  return p;
}

std::string folded(const Profile& p) { return folded_text(p); }

}  // namespace

TEST_CASE("OTLP: a recording reads back whole: frames, kinds, modules, processes, threads, times") {
  Profile p = recording();
  Profile offcpu;
  offcpu.event = "offcpu";
  offcpu.unit = "ns";
  offcpu.start_unix_ns = p.start_unix_ns;
  offcpu.add(std::vector<FrameId>{offcpu.intern({"java (42)", FrameKind::Process, {}}),
                                  offcpu.intern({"futex_wait", FrameKind::Kernel, "[kernel]"})},
             7'000);
  OtlpResource r{{{"host.name", std::string("box")}}, {&p, &offcpu}};
  std::string bytes = encode_otlp(std::span(&r, 1));
  REQUIRE(is_otlp(bytes));

  std::vector<std::string> events;
  auto back = decode_otlp(bytes, {}, &events);
  REQUIRE(back);
  CHECK(events == std::vector<std::string>{"cpu-clock", "offcpu"});
  CHECK(back->event == "cpu-clock");
  CHECK(back->unit == "samples");
  CHECK(back->period_ns == p.period_ns);
  CHECK(back->start_unix_ns == p.start_unix_ns);
  CHECK(back->duration_ns == p.duration_ns);
  CHECK(back->info == p.info);
  CHECK(folded(*back) == folded(p));
  for (const Frame& f : p.frames()) {
    // The allocated class reads back as a frame of code, as from folded
    // stacks and pprof: no format marks it.
    if (f.kind == FrameKind::Process || f.kind == FrameKind::Thread || f.kind == FrameKind::Alloc) continue;
    bool found = false;
    for (const Frame& g : back->frames()) found = found || g == f;
    INFO(f.name);
    CHECK(found);
  }
  // The same samples at the same times.
  REQUIRE(back->timeline.size() == p.timeline.size());
  for (size_t i = 0; i < p.timeline.size(); ++i) {
    CHECK(back->timeline[i].time_ns == p.timeline[i].time_ns);
    CHECK(back->timeline[i].weight == p.timeline[i].weight);
  }

  auto off = decode_otlp(gzip(bytes), "offcpu");
  REQUIRE(off);
  CHECK(off->unit == "ns");
  CHECK(off->total() == 7'000);
  CHECK(folded(*off) == folded(offcpu));

  auto missing = decode_otlp(bytes, "wall");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == "otlp: no profile of event 'wall' in it; it holds cpu-clock, offcpu");
}

TEST_CASE("OTLP: summed samples without process resources, as the agent sends them to Pyroscope") {
  Profile p = recording();
  OtlpResource r{{{"service.name", std::string("app")}}, {&p}};
  std::string bytes = encode_otlp(std::span(&r, 1), {.timed = false, .process_resources = false});
  auto back = decode_otlp(bytes);
  REQUIRE(back);
  CHECK(back->timeline.empty());
  CHECK(back->total() == p.total());
  // Processes come back from the samples' attributes.
  CHECK(folded(*back) == folded(p));
}

TEST_CASE("OTLP: pprof's ProfilesData and a folded profile are told apart") {
  CHECK_FALSE(is_otlp(""));
  CHECK_FALSE(is_otlp("a;b 1\n"));
  Profile p = recording();
  OtlpResource r{{}, {&p}};
  std::string bytes = encode_otlp(std::span(&r, 1));
  CHECK(is_otlp(bytes));
  CHECK_FALSE(is_otlp(bytes.substr(0, bytes.size() - 1)));
}

TEST_CASE("OTLP: damaged input fails with a reason, never a crash") {
  Profile p = recording();
  OtlpResource r{{{"host.name", std::string("box")}}, {&p}};
  const std::string bytes = encode_otlp(std::span(&r, 1));
  std::mt19937 random(7);
  size_t failed = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string damaged = bytes;
    if (i % 2) {
      damaged.resize(random() % bytes.size());
    } else {
      for (int n = 0; n < 4; ++n) damaged[random() % damaged.size()] = static_cast<char>(random());
    }
    auto back = decode_otlp(damaged);
    if (!back) {
      ++failed;
      CHECK(back.error().starts_with("otlp: "));
    }
  }
  CHECK(failed > 0);
}
