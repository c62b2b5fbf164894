#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "temp_dir.h"
#include "flamegraph/leaks.h"
#include "flamegraph/pprof.h"
#include "user/fleet/pyroscope.h"
#include "user/fleet/spool.h"
#include "user/fleet/spool_profile.h"

using namespace ember::fleet;
namespace fs = std::filesystem;

namespace {

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> files(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir.path)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("spool: names sort by time and say the period's state") {
  Spool::Entry e{1'700'000'000'123'456'789, 15000, 3, Spool::State::Pending, 0, {}};
  std::string name = Spool::file_name(e);
  CHECK(name == "01700000000123456789.15000.3.pending");
  auto back = Spool::parse_name(name);
  REQUIRE(back);
  CHECK(back->start_ns == e.start_ns);
  CHECK(back->duration_ms == 15000);
  CHECK(back->profiles == 3);
  CHECK(back->state == Spool::State::Pending);
  CHECK(Spool::parse_name("01700000000123456789.15000.3.sent")->state == Spool::State::Sent);
  for (const char* bad : {"x.1.2.sent", "1.2.3.lost", "1.2.3", "1.2.3.sent.tmp", ".token"})
    CHECK_FALSE(Spool::parse_name(bad));
}

TEST_CASE("spool: the oldest pending period first; sent ones stay; a restart resumes") {
  TempDir dir;
  uint64_t t = now_ns();
  {
    auto spool = Spool::open(dir.path.string(), 1 << 20, 3600);
    REQUIRE(spool);
    REQUIRE((*spool)->add(t + 2'000'000'000, 1000, 2, "second"));
    REQUIRE((*spool)->add(t + 1'000'000'000, 1000, 1, "first"));
    REQUIRE((*spool)->add(t + 1'000'000'000, 1000, 4, "same start"));  // kept, one ns later
    auto oldest = (*spool)->oldest_pending();
    REQUIRE(oldest);
    CHECK(Spool::read(dir.path.string(), *oldest).value().value() == "first");
    (*spool)->mark(*oldest, Spool::State::Sent);
    CHECK(Spool::read(dir.path.string(), *(*spool)->oldest_pending()).value().value() == "same start");
    auto c = (*spool)->counts();
    CHECK(c.pending_files == 2);
    CHECK(c.pending_profiles == 6);
    CHECK(c.bytes == std::string("secondfirstsame start").size());
    std::ofstream(dir.path / "00000000000000000001.1.1.pending.tmp.x1y2z3w4") << "cut short";
  }
  auto again = Spool::open(dir.path.string(), 1 << 20, 3600);
  REQUIRE(again);
  CHECK(Spool::read(dir.path.string(), *(*again)->oldest_pending()).value().value() == "same start");
  CHECK((*again)->counts().pending_files == 2);
  CHECK(files(dir).size() == 3);  // the .tmp is gone
}

TEST_CASE("spool: the size cap removes the oldest first, counting unsent profiles as dropped") {
  TempDir dir;
  uint64_t t = now_ns();
  auto spool = Spool::open(dir.path.string(), 1 << 20, 3600);
  REQUIRE(spool);
  std::string mib(1 << 19, 'x');  // half the cap each
  REQUIRE((*spool)->add(t, 1000, 5, mib));
  (*spool)->mark(*(*spool)->oldest_pending(), Spool::State::Sent);
  REQUIRE((*spool)->add(t + 1, 1000, 7, mib));
  REQUIRE((*spool)->add(t + 2, 1000, 11, mib));  // over the cap: the sent one goes
  auto c = (*spool)->counts();
  CHECK(c.expired_profiles == 5);
  CHECK(c.dropped_profiles == 0);
  REQUIRE((*spool)->add(t + 3, 1000, 13, mib));  // now an unsent one goes: lost
  c = (*spool)->counts();
  CHECK(c.dropped_profiles == 7);
  CHECK(c.pending_profiles == 24);
  CHECK((*spool)->oldest_pending()->start_ns == t + 2);
}

TEST_CASE("spool: a period a cap removes while it is sent is not counted as dropped") {
  TempDir dir;
  uint64_t t = now_ns();
  auto spool = Spool::open(dir.path.string(), 1 << 20, 3600);
  REQUIRE(spool);
  std::string mib(1 << 19, 'x');
  REQUIRE((*spool)->add(t, 1000, 3, mib));
  auto sending = (*spool)->oldest_pending();
  REQUIRE(sending);
  REQUIRE((*spool)->add(t + 1, 1000, 5, mib));
  REQUIRE((*spool)->add(t + 2, 1000, 7, mib));  // over the cap: the one being sent goes
  CHECK((*spool)->counts().dropped_profiles == 3);
  (*spool)->mark(*sending, Spool::State::Sent);  // yet the server took it
  auto c = (*spool)->counts();
  CHECK(c.dropped_profiles == 0);
  CHECK(c.pending_profiles == 12);
}

TEST_CASE("spool: the age cap removes periods older than it, at open and as periods are added") {
  TempDir dir;
  uint64_t t = now_ns();
  {
    auto spool = Spool::open(dir.path.string(), 1 << 20, 60);
    REQUIRE(spool);
    REQUIRE((*spool)->add(t - 120'000'000'000ull, 1000, 3, "old"));  // removed as soon as added
    REQUIRE((*spool)->add(t, 1000, 2, "new"));
    CHECK((*spool)->counts().dropped_profiles == 3);
    CHECK(files(dir).size() == 1);
  }
  std::ofstream(dir.path / Spool::file_name({t - 90'000'000'000ull, 1000, 1, Spool::State::Sent, 0, {}})) << "older";
  auto spool = Spool::open(dir.path.string(), 1 << 20, 60);
  REQUIRE(spool);
  CHECK((*spool)->counts().expired_profiles == 1);
  CHECK(files(dir).size() == 1);
}

TEST_CASE("spool: a period that cannot be written is counted as dropped") {
  TempDir dir;
  auto spool = Spool::open((dir.path / "s").string(), 1 << 20, 3600);
  REQUIRE(spool);
  fs::remove_all(dir.path / "s");  // the directory is gone
  auto added = (*spool)->add(now_ns(), 1000, 4, "body");
  REQUIRE_FALSE(added);
  CHECK_THAT(added.error(), Catch::Contains("cannot write"));
  CHECK((*spool)->counts().write_failures == 1);
  CHECK((*spool)->counts().dropped_profiles == 4);
}

TEST_CASE("spool: one service's periods of a time range merge into one profile; the spool's contents listed") {
  using namespace ember;
  TempDir dir;
  auto spool = Spool::open(dir.path.string(), 1 << 20, 3600);
  REQUIRE(spool);
  uint64_t t0 = now_ns() - 60'000'000'000ull;
  // Three periods of 15 s: nginx's CPU in each, sshd's in the second.
  auto period = [&](uint64_t start, std::vector<std::pair<std::string, uint64_t>> services) {
    std::vector<Series> series;
    for (auto& [service, samples] : services) {
      flamegraph::Profile p;
      p.period_ns = 1'000'000'000 / 19;
      std::vector<flamegraph::FrameId> stack = {p.intern({service, flamegraph::FrameKind::Process, {}}),
                                                p.intern({"main", flamegraph::FrameKind::Native, "m"})};
      p.add(stack, samples);
      series.push_back({{{"service_name", service}, {"__name__", "process_cpu"}}, flamegraph::encode_pprof(p), "x"});
    }
    std::string body = encode_push_request(series);
    REQUIRE((*spool)->add(start, 15000, static_cast<uint32_t>(series.size()), body));
  };
  period(t0, {{"nginx", 3}});
  period(t0 + 15'000'000'000ull, {{"nginx", 5}, {"sshd", 2}});
  period(t0 + 30'000'000'000ull, {{"nginx", 7}});

  auto all = merge_spool(dir.path.string(), {"nginx"});
  REQUIRE(all);
  CHECK(all->total() == 15);
  CHECK(all->stacks().size() == 1);
  CHECK(all->start_unix_ns == t0);
  CHECK(all->duration_ns == 45'000'000'000ull);
  CHECK(all->period_ns == 1'000'000'000ull / 19);
  // Each period's weight at its start, as precise as a period: the heatmap across periods.
  REQUIRE(all->timeline.size() == 3);
  CHECK((all->timeline[0].time_ns == 0 && all->timeline[0].weight == 3));
  CHECK((all->timeline[1].time_ns == 15'000'000'000ull && all->timeline[1].weight == 5));
  CHECK((all->timeline[2].time_ns == 30'000'000'000ull && all->timeline[2].weight == 7));
  CHECK(all->time_step_ns == 15'000'000'000ull);
  // Periods that overlap [from, to).
  auto middle = merge_spool(dir.path.string(), {"nginx", "cpu", t0 + 16'000'000'000ull, t0 + 29'000'000'000ull});
  REQUIRE(middle);
  CHECK(middle->total() == 5);
  CHECK_THAT(merge_spool(dir.path.string(), {"", "process_cpu"}).error(), Catch::Contains("hold nginx, sshd"));
  CHECK_THAT(merge_spool(dir.path.string(), {"nginx", "offcpu"}).error(),
             Catch::Contains("service nginx has no off_cpu profile in that range; it has process_cpu"));
  CHECK_THAT(merge_spool(dir.path.string(), {"nginx", "cpu", 0, 1}).error(), Catch::Contains("no period"));

  // What `ember serve --dir` lists, read again as the agent sends and removes periods.
  SpoolCatalog catalog(dir.path.string());
  auto contents = catalog.contents();
  REQUIRE(contents);
  CHECK(contents->periods == 3);
  CHECK(contents->pending == 3);
  CHECK(contents->first_ns == t0);
  CHECK(contents->end_ns == t0 + 45'000'000'000ull);
  REQUIRE(contents->series.size() == 2);
  CHECK(contents->series[0].service == "nginx");
  CHECK(contents->series[0].type == "process_cpu");
  CHECK(contents->series[0].periods == 3);
  CHECK(contents->series[1].service == "sshd");
  CHECK(contents->series[1].periods == 1);
  CHECK(contents->series[1].first_ns == t0 + 15'000'000'000ull);
  CHECK(contents->series[1].end_ns == t0 + 30'000'000'000ull);
  // A period listed as pending, sent before it is read, is read at its new name.
  auto listed = Spool::list(dir.path.string());
  REQUIRE(listed);
  REQUIRE(listed->size() == 3);
  (*spool)->mark((*listed)[1], Spool::State::Sent);
  auto moved = Spool::read(dir.path.string(), (*listed)[1]);
  REQUIRE(moved);
  CHECK(moved->has_value());
  fs::remove(dir.path / (*listed)[0].name);
  auto gone = Spool::read(dir.path.string(), (*listed)[0]);
  REQUIRE(gone);
  CHECK(!gone->has_value());
  contents = catalog.contents();
  REQUIRE(contents);
  CHECK(contents->periods == 2);
  CHECK(contents->sent == 1);
  CHECK(contents->pending == 1);
  CHECK(contents->first_ns == t0 + 15'000'000'000ull);
  CHECK(contents->series[0].periods == 2);
  CHECK(is_spool(dir.path.string()));
  CHECK(!is_spool((dir.path / "none").string()));
}

TEST_CASE("spool: live sets merge into the last period's, timed where they grew: a leak is a suspect, a cache not") {
  using namespace ember;
  TempDir dir;
  auto spool = Spool::open(dir.path.string(), 1 << 20, 3600);
  REQUIRE(spool);
  uint64_t t0 = now_ns() - 120'000'000'000ull, step = 15'000'000'000ull;
  // Eight periods of an agent with live: a leak growing 100 bytes a period, a cache emptied now and then.
  const uint64_t leak[] = {100, 200, 300, 400, 500, 600, 700, 800}, cache[] = {50, 0, 60, 0, 80, 0, 70, 90};
  for (int k = 0; k < 8; ++k) {
    flamegraph::Profile p;
    p.event = "malloc_inuse";
    p.unit = "bytes";
    auto app = p.intern({"app", flamegraph::FrameKind::Process, {}});
    p.add(std::vector{app, p.intern({"leak_here", flamegraph::FrameKind::Native, "app"})}, leak[k]);
    if (cache[k]) p.add(std::vector{app, p.intern({"cache_fill", flamegraph::FrameKind::Native, "app"})}, cache[k]);
    std::vector<Series> series = {{{{"service_name", "app"}, {"__name__", "memory"}}, flamegraph::encode_pprof(p), "x"}};
    REQUIRE((*spool)->add(t0 + k * step, 15000, 1, encode_push_request(series)));
  }
  auto merged = merge_spool(dir.path.string(), {"app", "memory"});
  REQUIRE(merged);
  CHECK(merged->event == "malloc_inuse");
  CHECK(merged->total() == 890);  // the last period's, not the sum
  REQUIRE(merged->info_value("live"));
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> timed;  // site -> (time, bytes)
  for (const flamegraph::Timed& t : merged->timeline)
    timed[merged->frames()[merged->stacks()[t.stack].frames.back()].name].emplace_back(t.time_ns, t.weight);
  REQUIRE(timed["leak_here"].size() == 8);
  for (uint64_t k = 0; k < 8; ++k) CHECK(timed["leak_here"][k] == std::pair(k * step, uint64_t{100}));
  // What the cache holds at the end came in its last two periods, the latest growth first.
  CHECK(timed["cache_fill"] == std::vector<std::pair<uint64_t, uint64_t>>{{6 * step, 70}, {7 * step, 20}});
  flamegraph::LeakSuspects found = flamegraph::find_leak_suspects(*merged);
  REQUIRE(found.suspects.size() == 1);
  CHECK(flamegraph::site_function(*merged, found.suspects[0].stack) == "leak_here");
}

TEST_CASE("spool: times as Unix seconds or UTC") {
  CHECK(parse_time("1764129600") == 1764129600'000'000'000ull);
  CHECK(parse_time("2025-11-26T04:00") == 1764129600'000'000'000ull);
  CHECK(parse_time("2025-11-26T04:00:30Z") == 1764129630'000'000'000ull);
  CHECK_FALSE(parse_time("yesterday"));
  CHECK_FALSE(parse_time("2025-11-26 04:00"));
}
