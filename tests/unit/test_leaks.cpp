#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <sstream>

#include "flamegraph/leaks.h"

using namespace ember::flamegraph;

namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// A live profile of 20 s: each site's weights, timed, added as a recording
// would (the timeline in time order, adding up to the stacks).
struct LiveRecording {
  Profile profile;

  explicit LiveRecording(const char* min_age = nullptr) {
    profile.event = "malloc";
    profile.unit = "bytes";
    profile.duration_ns = 20 * kSecond;
    profile.info = {{"samples", "0"}, {"live", "still allocated at the end"}};
    if (min_age) profile.info.emplace_back("min-age", min_age);
  }
  uint32_t site(const char* name) {
    std::vector<FrameId> frames{profile.intern({"app", FrameKind::Process, {}}),
                                profile.intern({"main", FrameKind::Native, "/bin/app"}),
                                profile.intern({name, FrameKind::Native, "/bin/app"})};
    sites.push_back(frames);
    return static_cast<uint32_t>(sites.size() - 1);
  }
  void allocate(uint32_t site, uint64_t time_ns, uint64_t bytes) { pending.push_back({time_ns, bytes, site}); }
  Profile done() {
    std::sort(pending.begin(), pending.end(), [](const Timed& a, const Timed& b) { return a.time_ns < b.time_ns; });
    for (Timed t : pending) {
      t.stack = profile.add(sites[t.stack], t.weight);
      profile.timeline.push_back(t);
    }
    return profile;
  }

 private:
  std::vector<std::vector<FrameId>> sites;
  std::vector<Timed> pending;
};

}  // namespace

TEST_CASE("leak suspects: a steady leak, not what is in flight at the end nor what start-up kept", "[leaks]") {
  LiveRecording r;
  uint32_t leak = r.site("leak_here"), cache = r.site("cache_fill"), startup = r.site("load_config"),
           sparse = r.site("rare_leak");
  std::mt19937_64 random(1);
  // The leak: 64 KiB a second, at random times. The cache: 10 MiB in its
  // last 3 s (emptied before). Start-up: 50 MiB in its first 200 ms. A
  // slow leak: one sample every 2 s.
  for (int i = 0; i < 400; ++i) r.allocate(leak, random() % (20 * kSecond), 3277);
  for (int i = 0; i < 100; ++i) r.allocate(cache, 17 * kSecond + random() % (3 * kSecond), 100 << 10);
  for (int i = 0; i < 50; ++i) r.allocate(startup, random() % (kSecond / 5), 1 << 20);
  for (int i = 0; i < 10; ++i) r.allocate(sparse, i * 2 * kSecond + kSecond / 3, 4096);
  Profile p = r.done();
  REQUIRE(is_live_profile(p));

  LeakSuspects found = find_leak_suspects(p);
  CHECK(found.young_ns == 5 * kSecond);  // a quarter of the recording
  CHECK(found.span_ns == 15 * kSecond);
  REQUIRE(found.suspects.size() == 2);
  const LeakSuspect& first = found.suspects[0];
  CHECK(site_name(p, first.stack) == "leak_here ← main");
  // 400 × 3277 bytes over 20 s: 65.5 KB/s, the line's slope within 10%.
  CHECK(first.rate_per_s == Approx(400.0 * 3277 / 20).epsilon(0.1));
  CHECK(first.fit > 0.98);
  CHECK(first.live == p.stacks()[first.stack].weight);
  CHECK(first.old < first.live);
  REQUIRE(first.curve.size() == kCurvePoints);
  CHECK(first.curve.back() == first.live);
  CHECK(std::is_sorted(first.curve.begin(), first.curve.end()));
  CHECK(site_name(p, found.suspects[1].stack, 1) == "rare_leak");
  CHECK(found.suspects[1].rate_per_s == Approx(2048).epsilon(0.15));

  std::ostringstream out;
  write_leak_suspects(p, 10, out);
  CHECK(out.str().find("from the start to 5.0 s before the end") != std::string::npos);
  CHECK(out.str().find("leak_here ← main") != std::string::npos);
  CHECK(out.str().find("cache_fill") == std::string::npos);
  CHECK(out.str().find("load_config") == std::string::npos);
}

TEST_CASE("leak suspects: --min-age sets what is young; too few samples tell nothing", "[leaks]") {
  LiveRecording r("12 s");
  uint32_t leak = r.site("leak_here"), few = r.site("few");
  for (int i = 0; i < 80; ++i) r.allocate(leak, i * kSecond / 10, 1000);  // the first 8 s, as --min-age 12s keeps
  for (int i = 0; i < 4; ++i) r.allocate(few, i * 2 * kSecond, 1000);
  Profile p = r.done();
  LeakSuspects found = find_leak_suspects(p);
  CHECK(found.young_ns == 12 * kSecond);
  CHECK(found.span_ns == 8 * kSecond);
  REQUIRE(found.suspects.size() == 1);
  CHECK(found.suspects[0].rate_per_s == Approx(10000).epsilon(0.05));

  // A --min-age beyond the recording: nothing is old enough.
  LiveRecording late("30 s");
  late.allocate(late.site("x"), kSecond, 1);
  std::ostringstream out;
  write_leak_suspects(late.done(), 10, out);
  CHECK(out.str().find("nothing allocated before the last 30 s") != std::string::npos);
}

TEST_CASE("leak suspects: with --min-gcs, young is what came after the youngest kept", "[leaks]") {
  LiveRecording r;
  r.profile.info.emplace_back("min-gcs", "20");
  uint32_t leak = r.site("leak_here");
  for (int i = 0; i < 100; ++i) r.allocate(leak, i * kSecond / 10, 1000);  // kept: the first 10 s of 20
  Profile p = r.done();
  LeakSuspects found = find_leak_suspects(p);
  CHECK(found.span_ns == 9'900'000'001);  // up to the last kept, at 9.9 s
  REQUIRE(found.suspects.size() == 1);
  CHECK(found.suspects[0].fit > 0.99);
  CHECK(found.suspects[0].rate_per_s == Approx(10000).epsilon(0.05));
}

TEST_CASE("leak suspects: none in a profile without times or not live", "[leaks]") {
  LiveRecording r;
  r.allocate(r.site("leak_here"), kSecond, 1);
  Profile p = r.done();
  p.timeline.clear();
  CHECK(find_leak_suspects(p).suspects.empty());
  std::ostringstream out;
  write_leak_suspects(p, 10, out);
  CHECK(out.str().find("this profile has no times") != std::string::npos);

  Profile cpu;
  cpu.info = {{"samples", "1"}};
  CHECK_FALSE(is_live_profile(cpu));
}

TEST_CASE("leak suspects: a site named by the program's own functions under an interpreter's", "[leaks]") {
  Profile p;
  FrameId proc = p.intern({"python3", FrameKind::Process, {}});
  FrameId boot = p.intern({"Thread.run (threading.py)", FrameKind::Python, {}});
  FrameId get = p.intern({"do_GET (server.py)", FrameKind::Python, {}});
  FrameId copy = p.intern({"copyfile (serve.py)", FrameKind::Python, {}});
  FrameId eval = p.intern({"_PyEval_EvalFrameDefault", FrameKind::Native, "python3"});
  FrameId resize = p.intern({"_PyBytes_Resize", FrameKind::Native, "python3"});
  uint32_t py = p.add(std::vector<FrameId>{proc, boot, get, copy, eval, resize}, 10);
  CHECK(site_name(p, py) == "_PyBytes_Resize ← … ← copyfile (serve.py) ← do_GET (server.py)");
  CHECK(site_function(p, py) == "copyfile (serve.py)");

  // Java: the class, then the methods, as they come.
  FrameId leak = p.intern({"Cache.leak", FrameKind::Jit, {}}), main = p.intern({"Cache.main", FrameKind::Interpreted, {}});
  FrameId bytes = p.intern({"byte[]", FrameKind::Alloc, {}});
  uint32_t java = p.add(std::vector<FrameId>{proc, main, leak, bytes}, 10);
  CHECK(site_name(p, java) == "byte[] ← Cache.leak ← Cache.main");
  CHECK(site_function(p, java) == "Cache.leak");

  // Native code alone: its innermost frames.
  FrameId m = p.intern({"main", FrameKind::Native, "app"}), here = p.intern({"leak_here", FrameKind::Native, "app"});
  uint32_t c = p.add(std::vector<FrameId>{proc, m, here}, 10);
  CHECK(site_name(p, c) == "leak_here ← main");
  CHECK(site_function(p, c) == "leak_here");
}
