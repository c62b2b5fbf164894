#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "tests/unit/temp_dir.h"
#include "user/session/collector.h"

using namespace ember;

namespace {

// A sample of this process with the given user stack (leaf first).
std::unique_ptr<ember_sample> sample_of(std::initializer_list<uint64_t> user) {
  auto s = std::make_unique<ember_sample>();
  std::memset(s.get(), 0, sizeof *s);
  s->pid = s->tid = static_cast<uint32_t>(getpid());
  std::strcpy(s->comm, "test");
  std::strcpy(s->process_comm, "test");
  for (uint64_t ip : user) s->ips[s->ustack_len++] = ip;
  return s;
}

}  // namespace

TEST_CASE("collector: a user stack that strays into the kernel half is cut there, not misread") {
  symbolizer::Symbolizer symbolizer;
  Collector collector({}, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  // The walk went wrong after two frames: the rest must not be taken for
  // JIT tokens (the top bit) or frames.
  auto s = sample_of({here, here + 16, 0xffff888012345678ULL, 0xdeadbeefULL});
  collector.add(*s);
  auto profile = collector.build();
  REQUIRE(profile.stacks().size() == 1);
  CHECK(profile.stacks()[0].frames.size() == 3);  // process frame + two user frames
  CHECK(collector.stats().samples == 1);
}

TEST_CASE("collector: each window's graph holds only its own records, named afresh") {
  symbolizer::Symbolizer symbolizer;
  Collector collector({}, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  auto first = sample_of({here, here + 16});
  for (int i = 0; i < 3; ++i) collector.add(*first);
  auto one = collector.build();
  REQUIRE(one.stacks().size() == 1);
  CHECK(one.total() == 3);
  CHECK(one.frames()[one.stacks()[0].frames[0]].name == "test");
  CHECK(collector.next_window().empty());

  auto second = sample_of({here});
  std::strcpy(second->process_comm, "renamed");
  collector.add(*second);
  auto two = collector.build();
  REQUIRE(two.stacks().size() == 1);
  CHECK(two.total() == 1);
  CHECK(two.stacks()[0].frames.size() == 2);
  CHECK(two.frames()[two.stacks()[0].frames[0]].name == "renamed");
  CHECK(collector.stats().samples == 1);

  // Nothing carried into a window without records.
  collector.next_window();
  CHECK(collector.build().stacks().empty());
  CHECK(collector.stats().samples == 0);
}

TEST_CASE("collector: the graph's timeline holds each record's time from the window's start, in time order") {
  symbolizer::Symbolizer symbolizer;
  Collector collector({}, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  auto a = sample_of({here}), b = sample_of({here, here + 16});
  const uint64_t start = 5'000'000'000;
  // Out of order, as records of two CPUs' rings come; one read late from before the start.
  for (auto [s, t] : {std::pair{a.get(), start + 30'000'000}, {b.get(), start + 10'000'000}, {a.get(), start + 20'000'000},
                      {b.get(), start - 1'000}})
    s->time_ns = t, collector.add(*s);
  auto profile = collector.build(0, {}, start);
  REQUIRE(profile.stacks().size() == 2);
  REQUIRE(profile.timeline.size() == 4);
  uint64_t sum = 0;
  std::vector<uint64_t> times;
  for (const flamegraph::Timed& t : profile.timeline) {
    times.push_back(t.time_ns);
    sum += t.weight;
    CHECK(profile.stacks()[t.stack].frames.size() == (t.time_ns == 0 || t.time_ns == 10'000'000 ? 3u : 2u));
  }
  CHECK(times == std::vector<uint64_t>{0, 10'000'000, 20'000'000, 30'000'000});
  CHECK(sum == profile.total());
  collector.next_window();
  CHECK(collector.build(0, {}, start).timeline.empty());
}

TEST_CASE("collector: time off CPU covers the span it lasted on the timeline") {
  symbolizer::Symbolizer symbolizer;
  CollectorOptions options;
  options.views = {EventView{"offcpu", "ns", 1u << EMBER_KIND_BLOCKED}};
  Collector collector(options, symbolizer);
  auto s = sample_of({reinterpret_cast<uint64_t>(&getpid)});
  s->kind = EMBER_KIND_BLOCKED;
  s->time_ns = 1'000'000'000;
  s->weight = 50'000'000;  // 50 ms asleep: pieces of 20, 20 and 10 ms
  collector.add(*s);
  s->time_ns = 2'000'000'000;
  s->weight = 10'000'000'000;  // 10 s: a twentieth at a time
  collector.add(*s);
  auto profile = collector.build(0, {}, 0);
  REQUIRE(profile.timeline.size() == 3 + 20);
  CHECK((profile.timeline[0].time_ns == 1'000'000'000 && profile.timeline[0].weight == 20'000'000));
  CHECK((profile.timeline[2].time_ns == 1'040'000'000 && profile.timeline[2].weight == 10'000'000));
  CHECK((profile.timeline[3].time_ns == 2'000'000'000 && profile.timeline.back().time_ns < 12'000'000'000));
  uint64_t sum = 0;
  for (const flamegraph::Timed& t : profile.timeline) sum += t.weight;
  CHECK(sum == profile.total());
}

TEST_CASE("collector: past its cap the timeline grows coarser, never loses weight") {
  symbolizer::Symbolizer symbolizer;
  CollectorOptions options;
  options.max_timeline_records = 1000;
  Collector collector(options, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  auto a = sample_of({here}), b = sample_of({here, here + 16});
  // 10 s of two stacks at 500 Hz: 10,000 records.
  for (int i = 0; i < 5000; ++i)
    for (auto* s : {a.get(), b.get()}) s->time_ns = 1'000'000'000ull + i * 2'000'000ull, collector.add(*s);
  auto profile = collector.build(0, {}, 1'000'000'000);
  CHECK(profile.total() == 10000);
  CHECK(profile.timeline.size() <= 1000);
  CHECK(profile.time_step_ns >= 20'000'000);
  uint64_t sum = 0, last = 0;
  for (const flamegraph::Timed& t : profile.timeline) {
    sum += t.weight;
    CHECK(t.time_ns >= last);
    CHECK(t.time_ns % profile.time_step_ns == 0);
    last = t.time_ns;
  }
  CHECK(sum == 10000);
  CHECK(last >= 9'000'000'000ull);  // the last seconds still at their time
  collector.next_window();
  CHECK(collector.build(0, {}, 0).time_step_ns == 0);
}

TEST_CASE("collector: a process that exited is forgotten one window after its exit, named until then") {
  symbolizer::Symbolizer symbolizer;
  Collector collector({}, symbolizer);
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto here = reinterpret_cast<uint64_t>(&getpid);
  auto s = sample_of({here});
  s->pid = s->tid = static_cast<uint32_t>(child);
  collector.add(*s);  // snapshots the child's mappings: ours, it forked from us
  CHECK(symbolizer.has_process(static_cast<uint32_t>(child)));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  auto one = collector.build();
  REQUIRE(one.stacks().size() == 1);
  CHECK(one.frames()[one.stacks()[0].frames.back()].name.ends_with("getpid"));
  CHECK(collector.next_window().empty());  // its exit is seen: a window of grace
  // A record of it that arrives late is still named.
  collector.add(*s);
  auto two = collector.build();
  REQUIRE(two.stacks().size() == 1);
  CHECK(two.frames()[two.stacks()[0].frames.back()].name.ends_with("getpid"));
  CHECK(collector.next_window() == std::vector<uint32_t>{static_cast<uint32_t>(child)});
  CHECK(collector.next_window().empty());
}

TEST_CASE("collector: one build split by process adds up to the whole, frame for frame") {
  symbolizer::Symbolizer symbolizer;
  Collector collector({}, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  pid_t other = getppid();  // another live process: its own group
  auto mine = sample_of({here, here + 16});
  auto theirs = sample_of({here});
  theirs->pid = theirs->tid = static_cast<uint32_t>(other);
  std::strcpy(theirs->process_comm, "parent");
  for (int i = 0; i < 3; ++i) collector.add(*mine);
  collector.add(*theirs);

  std::map<uint32_t, flamegraph::Profile> by_pid;
  std::map<uint32_t, std::string> names;
  auto whole = collector.build(0, [&](uint32_t pid, const std::string& name, const flamegraph::Profile& from,
                                      std::span<const flamegraph::FrameId> frames, uint64_t weight) {
    by_pid[pid].add_from(from, frames, weight);
    names[pid] = name;
  });
  REQUIRE(by_pid.size() == 2);
  CHECK(names[static_cast<uint32_t>(getpid())] == "test");
  CHECK(names[static_cast<uint32_t>(other)] == "parent");
  const flamegraph::Profile& split = by_pid[static_cast<uint32_t>(getpid())];
  CHECK(split.total() == 3);
  CHECK(by_pid[static_cast<uint32_t>(other)].total() == 1);
  CHECK(split.total() + by_pid[static_cast<uint32_t>(other)].total() == whole.total());
  // The same frames as the whole graph's stack of this process, by value.
  REQUIRE(split.stacks().size() == 1);
  auto names_of = [](const flamegraph::Profile& p, const flamegraph::Stack& s) {
    std::vector<std::string> out;
    for (flamegraph::FrameId f : s.frames) out.push_back(p.frames()[f].name);
    return out;
  };
  bool found = false;
  for (const flamegraph::Stack& s : whole.stacks())
    found |= names_of(whole, s) == names_of(split, split.stacks()[0]);
  CHECK(found);
}

namespace {

// Each stack of `p` as "frame;frame;..." with its weight, in a fixed order.
std::map<std::string, uint64_t> folded(const flamegraph::Profile& p) {
  std::map<std::string, uint64_t> out;
  for (const flamegraph::Stack& s : p.stacks()) {
    std::string line;
    for (flamegraph::FrameId f : s.frames) line += (line.empty() ? "" : ";") + p.frames()[f].name;
    out[line] += s.weight;
  }
  return out;
}

}  // namespace

TEST_CASE("collector: addresses named while recording give the graph that naming them all at the end gives") {
  auto here = reinterpret_cast<uint64_t>(&getpid), there = reinterpret_cast<uint64_t>(&strlen);
  auto early = sample_of({here, here + 16}), late = sample_of({there, here + 16});
  symbolizer::Symbolizer at_end_symbolizer, passes_symbolizer;
  Collector at_end({}, at_end_symbolizer), passes({}, passes_symbolizer);
  for (Collector* c : {&at_end, &passes}) c->add(*early);
  passes.name_addresses(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  for (Collector* c : {&at_end, &passes}) c->add(*late);
  passes.name_addresses(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  for (Collector* c : {&at_end, &passes}) c->add(*early);
  auto expected = folded(at_end.build());
  REQUIRE(expected.size() == 2);
  CHECK(folded(passes.build()) == expected);
  CHECK(passes.stats().unknown_addresses == at_end.stats().unknown_addresses);
  // A pass with no time left names nothing; the build names it all.
  Collector hurried({}, passes_symbolizer);
  hurried.add(*early);
  hurried.name_addresses(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  hurried.add(*late);
  hurried.add(*early);
  CHECK(folded(hurried.build()) == expected);
}

TEST_CASE("collector: JIT code's addresses wait for the build, when its perf map has grown") {
  // Code in an anonymous mapping is named from /tmp/perf-PID.map, which
  // the JIT appends to as it compiles: a pass while recording must not
  // read it before its line is there.
  TempDir dir;
  symbolizer::Options options;
  options.perf_map_dir = dir.path.string();
  symbolizer::Symbolizer symbolizer(options);
  Collector collector({}, symbolizer);
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  auto start = reinterpret_cast<uint64_t>(code);
  collector.add(*sample_of({start + 16}));
  collector.name_addresses(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  {
    std::ofstream map(dir.path / ("perf-" + std::to_string(getpid()) + ".map"));
    map << std::hex << start << " 100 compiled_later\n";
  }
  auto graph = folded(collector.build());
  munmap(code, 4096);
  REQUIRE(graph.size() == 1);
  CHECK(graph.begin()->first.ends_with(";compiled_later"));
  CHECK(collector.stats().unknown_addresses == 0);
}

TEST_CASE("address names: a table through its growth keeps every address's name, and knows the absent ones") {
  AddressNames::Names names;
  CHECK_FALSE(names.contains(0x1000));
  CHECK_THROWS_AS(names.at(0x1000), std::out_of_range);
  // Addresses 1 apart in one range, a page apart in another.
  auto address = [](uint32_t i) { return i % 2 ? 0x7f0000000000 + uint64_t{i} * 4096 : 0x400000 + uint64_t{i}; };
  for (uint32_t i = 0; i < 20000; ++i) names.set(address(i), i);
  names.set(0x400000, 7);  // set again: replaced
  for (uint32_t i = 1; i < 20000; ++i) REQUIRE(names.at(address(i)) == i);
  CHECK(names.at(0x400000) == 7);
  CHECK_FALSE(names.contains(0x3fffff));
  CHECK_THROWS_AS(names.at(0xffffffff00000000), std::out_of_range);
  names.clear();
  CHECK_FALSE(names.contains(0x400000));
}

TEST_CASE("collector: live allocations are held across windows until freed, named in each") {
  symbolizer::Symbolizer symbolizer;
  CollectorOptions options;
  options.views = {EventView{.name = "malloc", .unit = "bytes", .kinds = 1u << EMBER_KIND_MALLOC, .live_only = true}};
  Collector collector(options, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  auto kept = sample_of({here}), freed = sample_of({here, here + 16});
  kept->kind = freed->kind = EMBER_KIND_MALLOC;
  kept->weight = 100, kept->pad = 1, kept->time_ns = 10;
  freed->weight = 50, freed->pad = 2, freed->time_ns = 20;
  collector.add(*kept);
  collector.add(*freed);
  collector.count_live_allocations({1, 2}, 30, {});
  CHECK(collector.build().total() == 150);

  // Window two: nothing new; the second freed by its end.
  collector.next_window();
  collector.count_live_allocations({1}, 40, {});
  auto two = collector.build(0, {}, 0);
  REQUIRE(two.stacks().size() == 1);
  CHECK(two.total() == 100);
  CHECK(two.frames()[two.stacks()[0].frames[0]].name == "test");
  CHECK(two.frames()[two.stacks()[0].frames.back()].name.ends_with("getpid"));
  // Its timeline keeps the allocation's own time, from the given start.
  REQUIRE(two.timeline.size() == 1);
  CHECK(two.timeline[0].time_ns == 10);

  // A freed allocation is gone for good, even if its id were to come back.
  collector.next_window();
  collector.count_live_allocations({1, 2}, 50, {});
  CHECK(collector.build().total() == 100);
}

TEST_CASE("collector: what a process never freed is as old as it was at its end, and in that window alone") {
  symbolizer::Symbolizer symbolizer;
  CollectorOptions options;
  options.views = {EventView{
      .name = "malloc", .unit = "bytes", .kinds = 1u << EMBER_KIND_MALLOC, .live_only = true, .min_age_ns = 10}};
  Collector collector(options, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  auto old = sample_of({here}), young = sample_of({here, here + 16});
  old->kind = young->kind = EMBER_KIND_MALLOC;
  old->weight = 100, old->pad = 1, old->time_ns = 10;
  young->weight = 50, young->pad = 2, young->time_ns = 20;
  collector.add(*old);
  collector.add(*young);
  // Cut at 100, the process ended at 25: the block of 20 was 5 old then.
  collector.count_live_allocations({1, 2}, 100, {{old->pid, 25}});
  CHECK(collector.build().total() == 100);
  // Its memory went with it: nothing of it in the next window.
  collector.next_window();
  collector.count_live_allocations({1, 2}, 200, {});
  CHECK(collector.build().total() == 0);
}
