#include <catch2/catch.hpp>

#include "user/events/blocks.h"
#include "user/events/event.h"
#include "user/events/timer.h"

using namespace ember;
using namespace ember::events;

namespace {

HostFacts host() {
  HostFacts h;
  h.max_sample_rate = 1000;
  return h;
}

std::expected<Plan, std::string> plan_of(std::vector<std::string> names, Settings settings = {}) {
  std::vector<std::string> warnings;
  Scope scope;
  return plan(names, settings, scope, host(), warnings);
}

}  // namespace

TEST_CASE("events: every event has its parts and one name; aliases find it") {
  for (const Event* e : all()) {
    CHECK(find(e->name) == e);
    if (!e->alias.empty()) CHECK(find(e->alias) == e);
    CHECK(!e->help.empty());
    CHECK((e->unit == "samples" || e->unit == "ns" || e->unit == "bytes"));
    CHECK(e->view != nullptr);
    CHECK(e->summary != nullptr);
  }
  CHECK(find("cpu") == find("cpu-clock"));
  CHECK(find("bogus") == nullptr);
}

TEST_CASE("events: names are checked and each graph is named as given") {
  auto p = plan_of({"cpu", "offcpu"});
  REQUIRE(p);
  REQUIRE(p->views.size() == 2);
  CHECK(p->views[0].name == "cpu");
  CHECK(p->views[0].unit == "samples");
  CHECK(p->views[1].unit == "ns");
  CHECK(find_part<CpuTimer>(p->parts));
  REQUIRE(find_part<SchedSwitch>(p->parts));
  CHECK(find_part<SchedSwitch>(p->parts)->min_block_ns == 1000);
  CHECK(p->parts.size() == 2);

  CHECK(plan_of({"bogus"}).error().find("unknown event 'bogus'") != std::string::npos);
  CHECK(plan_of({"offcpu", "offcpu"}).error() == "-e offcpu is given twice");
  CHECK(plan_of({"cpu-clock", "cycles"}).error().find("one CPU-sampling event") != std::string::npos);
}

TEST_CASE("events: a setting is checked only by the events that take it") {
  Settings bad_rate;
  bad_rate.frequency = 5000;
  CHECK(!plan_of({"cpu"}, bad_rate));
  CHECK(!plan_of({"wall"}, bad_rate));
  CHECK(plan_of({"offcpu"}, bad_rate));  // no timer: -F is not its

  Settings bad_block;
  bad_block.min_block = "fast";
  CHECK(plan_of({"offcpu"}, bad_block).error().starts_with("--min-block 'fast' is not a duration"));
  CHECK(plan_of({"cpu"}, bad_block));
  std::vector<std::string> warnings;
  auto field = plan({"lock"}, bad_block, {}, host(), warnings, Spelling::Field);
  CHECK(field.error().starts_with("min_block 'fast'"));

  Settings zero;
  zero.alloc_interval = 0;
  CHECK(plan_of({"malloc"}, zero).error() == "--alloc-interval must be at least 1 byte");

  Settings live;
  live.live = true;
  CHECK(plan_of({"cpu"}, live).error() == "--live applies to allocations: add -e malloc or -e alloc");
  Settings waker;
  waker.waker = true;
  CHECK(plan_of({"wall"}, waker).error() == "--waker applies to blocked threads: add -e offcpu or -e lock");

  Settings aged;
  aged.min_age = "5m";
  CHECK(plan_of({"cpu"}, aged).error() ==
        "--min-age applies to allocations still live: add -e malloc or -e alloc with --live");
  CHECK(plan_of({"malloc"}, aged).error().ends_with("add --live"));
  aged.live = true;
  auto p = plan_of({"malloc"}, aged);
  REQUIRE(p);
  CHECK(p->views[0].live_only);
  CHECK(p->views[0].min_age_ns == 300'000'000'000);
  // Java's agents are asked not to force a GC at the end: the ages decide.
  p = plan_of({"malloc", "alloc"}, aged);
  REQUIRE(p);
  CHECK(p->views[1].min_age_ns == 300'000'000'000);
  CHECK(p->agent_options == ",alloc=524288,live,nogc");
  aged.min_age.clear();
  CHECK(plan_of({"alloc"}, aged)->agent_options == ",alloc=524288,live");
  aged.min_age = "5m";
  aged.min_age = "old";
  CHECK(plan_of({"malloc"}, aged).error().starts_with("--min-age 'old' is not a duration"));
}

TEST_CASE("events: the kernel gets the union of the events' asks") {
  Settings s;
  s.min_block = "2ms";
  // wall takes every block; offcpu drops short ones itself, in its view.
  for (auto names : {std::vector<std::string>{"wall", "offcpu"}, std::vector<std::string>{"offcpu", "wall"}}) {
    auto p = plan_of(names, s);
    REQUIRE(p);
    auto* blocks = find_part<SchedSwitch>(p->parts);
    REQUIRE(blocks);
    CHECK(blocks->min_block_ns == 0);
    CHECK(blocks->preempted);
    CHECK(p->parts.size() == 2);  // the timer and sched_switch, once each
  }
  auto p = plan_of({"offcpu", "lock", "alloc"}, s);
  REQUIRE(p);
  REQUIRE(find_part<SchedSwitch>(p->parts));
  CHECK(find_part<SchedSwitch>(p->parts)->min_block_ns == 2'000'000);
  CHECK(!find_part<CpuTimer>(p->parts));
  CHECK(p->parts.size() == 1);  // alloc: from the agents only
  CHECK(p->agent_options == ",lock,alloc=524288");
  CHECK(p->views[1].lock_waits_only);
  CHECK(find_part<SchedSwitch>(p->parts)->lock_waits);
  CHECK(p->views[2].kinds == 0);  // from the agents only

  std::vector<std::string> warnings;
  Scope no_java;
  no_java.java = false;
  CHECK(plan({"alloc"}, {}, no_java, host(), warnings).error().find("drop --no-java") != std::string::npos);
}

TEST_CASE("events: summary lines keep record's words") {
  Settings s;
  Resolved r{s, 1000};
  CHECK(find("cpu")->summary(r, {"samples", 42, 42}) == "  samples     42");
  CHECK(find("cpu")->summary(r, {"cpu", 42, 42}) == "  cpu         42 samples");
  CHECK(find("offcpu")->summary(r, {"offcpu", 1.5e9, 7}) == "  offcpu      1.500 s off CPU in 7 blocks of at least 1us");
}
