#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <tuple>

#include "flamegraph/pprof.h"
#include "gunzip.h"
#include "temp_dir.h"
#include "user/fleet/series.h"

using namespace ember;
using namespace ember::fleet;
namespace fs = std::filesystem;

namespace {

AgentConfig config_with(const TempDir& dir, KeyValues flags) {
  flags.push_back({"spool.dir", {(dir.path / "spool").string()}});
  auto c = load_agent_config("", flags);
  REQUIRE(c);
  c->host = "web-1";
  return *c;
}

std::string label(const std::vector<Label>& labels, const std::string& name) {
  for (const Label& l : labels)
    if (l.name == name) return l.value;
  return "(none)";
}

void fake_exe(const fs::path& root, int pid, const std::string& cgroup, const std::string& exe) {
  fs::path proc = root / "proc" / std::to_string(pid);
  fs::create_directories(proc);
  std::ofstream(proc / "cgroup") << "0::" << cgroup << "\n";
  std::ofstream(proc / "cmdline") << exe;
  fs::create_symlink(exe, proc / "exe");
}

}  // namespace

TEST_CASE("series: relabel rules keep, drop and replace, in order") {
  TempDir dir;
  AgentConfig c = config_with(dir, {{"relabel",
                                     {"replace service_name (.*)-worker-[0-9]+ service_name $1",
                                      "replace service_name (.*) team ops", "drop service_name sshd",
                                      "keep host web-.*"}}});
  auto out = relabel({{"service_name", "batch-worker-7"}, {"host", "web-1"}}, c.relabel);
  REQUIRE(out);
  CHECK(*out == std::vector<Label>{{"host", "web-1"}, {"service_name", "batch"}, {"team", "ops"}});
  CHECK_FALSE(relabel({{"service_name", "sshd"}, {"host", "web-1"}}, c.relabel));
  CHECK_FALSE(relabel({{"service_name", "nginx"}, {"host", "db-1"}}, c.relabel));
  // An absent label reads as "", and a replacement to "" removes the target.
  AgentConfig blank = config_with(dir, {{"relabel", {"replace pod ^$ container"}}});
  auto none = relabel({{"service_name", "x"}, {"container", "c"}}, blank.relabel);
  REQUIRE(none);
  CHECK(*none == std::vector<Label>{{"service_name", "x"}});
}

TEST_CASE("series: a window's stacks split into a profile per service and event, labelled and encoded") {
  TempDir dir;
  fake_exe(dir.path, 10, "/system.slice/nginx.service", "/usr/sbin/nginx");
  fake_exe(dir.path, 11, "/system.slice/nginx.service", "/usr/sbin/nginx");
  fake_exe(dir.path, 12, "/user.slice/session-1.scope", "/usr/bin/sshd");
  fake_exe(dir.path, 13, "/user.slice/session-1.scope", "/usr/bin/make");
  AgentConfig c = config_with(dir, {{"labels", {"env=prod"}}, {"relabel", {"drop service_name sshd"}}});
  ServiceNamer namer(dir.path.string());
  PeriodSeries series(c, namer, {{"cpu-clock"}, {"offcpu"}});

  // The window's whole graphs, as the session built them.
  flamegraph::Profile cpu, off;
  cpu.period_ns = 1'000'000'000 / 19;
  cpu.start_unix_ns = 1'700'000'000'000'000'000;
  cpu.duration_ns = 15'000'000'000;
  off.event = "offcpu";
  off.unit = "ns";
  using flamegraph::Frame;
  using flamegraph::FrameKind;
  auto stack = [](flamegraph::Profile& p, std::vector<std::string> names) {
    std::vector<flamegraph::FrameId> ids;
    ids.push_back(p.intern(Frame{names[0], FrameKind::Process, {}}));
    for (size_t i = 1; i < names.size(); ++i) ids.push_back(p.intern(Frame{names[i], FrameKind::Native, "m"}));
    return ids;
  };
  auto a = stack(cpu, {"nginx", "main", "serve"});
  auto b = stack(cpu, {"nginx", "main", "accept"});
  auto s = stack(cpu, {"sshd", "main"});
  auto m = stack(cpu, {"make", "main"});
  cpu.add(a, 5);
  series.add(0, 10, "nginx", cpu, a, 5);
  cpu.add(b, 2);
  series.add(0, 11, "nginx", cpu, b, 2);  // another worker: the same service
  cpu.add(s, 9);
  series.add(0, 12, "sshd", cpu, s, 9);
  cpu.add(m, 4);
  series.add(0, 13, "make", cpu, m, 4);
  auto w = stack(off, {"nginx", "main", "epoll_wait"});
  off.add(w, 3'000'000);
  series.add(1, 10, "nginx", off, w, 3'000'000);

  const flamegraph::Profile* graphs[] = {&cpu, &off};
  std::vector<Series> out = series.finish(graphs, cpu.start_unix_ns, cpu.duration_ns);
  CHECK(series.dropped() == 1);
  REQUIRE(out.size() == 3);  // nginx cpu, nginx offcpu, make cpu
  std::map<std::string, const Series*> by;
  for (const Series& x : out) by[label(x.labels, "service_name") + "/" + label(x.labels, "__name__")] = &x;
  REQUIRE(by.count("nginx/process_cpu"));
  REQUIRE(by.count("nginx/off_cpu"));
  REQUIRE(by.count("make/process_cpu"));
  const Series& nginx = *by["nginx/process_cpu"];
  CHECK(label(nginx.labels, "host") == "web-1");
  CHECK(label(nginx.labels, "env") == "prod");
  CHECK(label(nginx.labels, "__delta__") == "false");
  CHECK(label(nginx.labels, "container_id") == "(none)");
  CHECK(nginx.id.size() == 36);
  CHECK(nginx.id != by["make/process_cpu"]->id);

  auto p = flamegraph::decode_pprof(nginx.profile);
  REQUIRE(p);
  CHECK(p->total() == 7);
  CHECK(p->start_unix_ns == cpu.start_unix_ns);
  CHECK(p->duration_ns == cpu.duration_ns);
  auto o = flamegraph::decode_pprof(by["nginx/off_cpu"]->profile);
  REQUIRE(o);
  CHECK(o->total() == 3'000'000);
  CHECK(o->unit == "ns");
  CHECK(series.stacks() == 4);
}

TEST_CASE("series: a live set is its own profile type, placed at its period, not at the agent's start") {
  TempDir dir;
  fake_exe(dir.path, 10, "/system.slice/app.service", "/usr/bin/app");
  AgentConfig c = config_with(dir, {});
  ServiceNamer namer(dir.path.string());
  PeriodSeries series(c, namer, {{"malloc", true}, {"alloc"}});
  // The session's live graph spans the agent's run so far; the other the period.
  flamegraph::Profile live, alloc;
  live.event = "malloc";
  live.unit = alloc.unit = "bytes";
  alloc.event = "alloc";
  live.start_unix_ns = 1'700'000'000'000'000'000;
  live.duration_ns = 600'000'000'000;
  std::vector<flamegraph::FrameId> in_live = {live.intern({"app", flamegraph::FrameKind::Process, {}}),
                                               live.intern({"leak", flamegraph::FrameKind::Native, "app"})};
  std::vector<flamegraph::FrameId> in_alloc = {alloc.intern({"app", flamegraph::FrameKind::Process, {}}),
                                                alloc.intern({"Cache.fill", flamegraph::FrameKind::Jit, {}})};
  live.add(in_live, 4096);
  series.add(0, 10, "app", live, in_live, 4096);
  alloc.add(in_alloc, 512);
  series.add(1, 10, "app", alloc, in_alloc, 512);
  const flamegraph::Profile* graphs[] = {&live, &alloc};
  uint64_t period_start = live.start_unix_ns + 585'000'000'000, period = 15'000'000'000;
  std::vector<Series> out = series.finish(graphs, period_start, period);
  REQUIRE(out.size() == 2);
  std::map<std::string, flamegraph::Profile> by_type;
  for (const Series& s : out) {
    CHECK(label(s.labels, "__name__") == "memory");
    flamegraph::SampleTypes types;
    auto p = flamegraph::decode_pprof(s.profile, "", &types);
    REQUIRE(p);
    REQUIRE(types.names.size() == 1);
    CHECK(p->start_unix_ns == period_start);
    CHECK(p->duration_ns == period);
    by_type[types.names[0]] = std::move(*p);
  }
  REQUIRE(by_type.count("malloc_inuse"));
  REQUIRE(by_type.count("alloc"));
  CHECK(by_type["malloc_inuse"].total() == 4096);
  CHECK(by_type["malloc_inuse"].event == "malloc_inuse");
  CHECK(flamegraph::series_name("malloc_inuse") == "memory");
}

TEST_CASE("series: with pid_label each process of a service is a series of its own; relabeling sees the pid") {
  TempDir dir;
  fake_exe(dir.path, 10, "/system.slice/nginx.service", "/usr/sbin/nginx");
  fake_exe(dir.path, 11, "/system.slice/nginx.service", "/usr/sbin/nginx");
  fake_exe(dir.path, 12, "/system.slice/nginx.service", "/usr/sbin/nginx");
  AgentConfig c = config_with(dir, {{"pid_label", {"true"}}, {"relabel", {"drop pid 12"}}});
  ServiceNamer namer(dir.path.string());
  PeriodSeries series(c, namer, {SeriesEvent{"cpu-clock"}});
  flamegraph::Profile cpu;
  auto main = cpu.intern(flamegraph::Frame{"main", flamegraph::FrameKind::Native, "m"});
  std::vector<flamegraph::FrameId> stack = {cpu.intern(flamegraph::Frame{"nginx", flamegraph::FrameKind::Process, {}}), main};
  for (uint32_t pid : {10u, 11u, 12u, 10u}) {
    cpu.add(stack, pid);
    series.add(0, pid, "nginx", cpu, stack, pid);
  }
  const flamegraph::Profile* graphs[] = {&cpu};
  std::vector<Series> out = series.finish(graphs, 1, 2);
  CHECK(series.dropped() == 1);
  REQUIRE(out.size() == 2);
  std::map<std::string, uint64_t> totals;
  for (const Series& s : out) {
    CHECK(label(s.labels, "service_name") == "nginx");
    auto p = flamegraph::decode_pprof(s.profile);
    REQUIRE(p);
    totals[label(s.labels, "pid")] = p->total();
  }
  CHECK(totals == std::map<std::string, uint64_t>{{"10", 20}, {"11", 11}});
}

TEST_CASE("series: a profile over the server's limits is cut to fit them, its total kept") {
  TempDir dir;
  fake_exe(dir.path, 10, "/system.slice/app.service", "/usr/bin/app");
  // 3,000 stacks of 20 frames of long names: 3,000 samples, about 1 MB.
  flamegraph::Profile cpu;
  std::mt19937_64 random(11);
  auto app = cpu.intern(flamegraph::Frame{"app", flamegraph::FrameKind::Process, {}});
  std::vector<std::vector<flamegraph::FrameId>> stacks;
  for (int i = 0; i < 3000; ++i) {
    std::vector<flamegraph::FrameId> frames{app};
    for (int depth = 0; depth < 20; ++depth)
      frames.push_back(cpu.intern(flamegraph::Frame{
          "com.example.service.handlers.RequestHandler.method" + std::to_string(random() % 400),
          flamegraph::FrameKind::Jit, {}}));
    cpu.add(frames, 1 + random() % 50);
    stacks.push_back(frames);
  }
  REQUIRE(cpu.stacks().size() == 3000);
  const flamegraph::Profile* graphs[] = {&cpu};
  auto one_series = [&](KeyValues flags) {
    AgentConfig c = config_with(dir, std::move(flags));
    ServiceNamer namer(dir.path.string());
    PeriodSeries series(c, namer, {SeriesEvent{"cpu-clock"}});
    for (const auto& s : cpu.stacks()) series.add(0, 10, "app", cpu, s.frames, s.weight);
    std::vector<Series> out = series.finish(graphs, 1, 2);
    REQUIRE(out.size() == 1);
    std::string raw = gunzipped(out[0].profile);
    auto p = flamegraph::decode_pprof(out[0].profile);
    REQUIRE(p);
    CHECK(p->total() == cpu.total());
    return std::tuple(series.cut(), p->stacks().size(), raw.size());
  };
  // Within Pyroscope's defaults: as it was.
  auto [cut, samples, bytes] = one_series({});
  CHECK(cut == 0);
  CHECK(samples == 3000);
  // At most 500 samples.
  std::tie(cut, samples, bytes) = one_series({{"server.max_samples", {"500"}}});
  CHECK(cut == 1);
  CHECK(samples <= 500);
  CHECK(samples > 400);
  // At most 64 KiB: fewer stacks still.
  std::tie(cut, samples, bytes) = one_series({{"server.max_profile_size", {"64KiB"}}});
  CHECK(cut == 1);
  CHECK(bytes <= 64 * 1024);
  CHECK(samples > 50);
}
