#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/pprof.h"
#include "flamegraph/table.h"
#include "gunzip.h"

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

// The file names of a pprof's mappings, in the file's order: a minimal
// protobuf walk (top-level field 3 = Mapping, its field 5 = filename;
// field 6 = the string table), independent of decode_pprof.
std::vector<std::string> mapping_files(const std::string& gz) {
  std::string raw = gunzipped(gz);
  size_t pos = 0;
  auto varint = [](const std::string& b, size_t& at) {
    uint64_t v = 0;
    for (int shift = 0; at < b.size(); shift += 7) {
      uint8_t c = static_cast<uint8_t>(b[at++]);
      v |= uint64_t{c & 0x7fu} << shift;
      if (!(c & 0x80)) break;
    }
    return v;
  };
  std::vector<std::string> strings;
  std::vector<uint64_t> filenames;
  while (pos < raw.size()) {
    uint64_t key = varint(raw, pos);
    if ((key & 7) == 0) {
      varint(raw, pos);
      continue;
    }
    REQUIRE((key & 7) == 2);
    size_t n = varint(raw, pos);
    std::string body = raw.substr(pos, n);
    pos += n;
    if (key >> 3 == 6) strings.push_back(body);
    if (key >> 3 != 3) continue;
    uint64_t filename = 0;
    for (size_t at = 0; at < body.size();) {
      uint64_t k = varint(body, at);
      uint64_t v = varint(body, at);  // Mapping's fields are all varints
      if (k >> 3 == 5) filename = v;
    }
    filenames.push_back(filename);
  }
  std::vector<std::string> out;
  for (uint64_t f : filenames) out.push_back(f < strings.size() ? strings[f] : "?");
  return out;
}

}  // namespace

TEST_CASE("pprof's first mapping is the main binary: the program whose stacks weigh most") {
  // Two processes on a host: the shell runs more stacks, the server more
  // weight; libraries and the kernel are never the main binary, however
  // heavy.
  Profile p;
  FrameId server = p.intern({"server", FrameKind::Process, {}});
  FrameId sh = p.intern({"sh", FrameKind::Process, {}});
  FrameId start = p.intern({"__libc_start_call_main", FrameKind::Native, "/usr/lib/x86_64-linux-gnu/libc.so.6"});
  FrameId serve = p.intern({"serve", FrameKind::Native, "/opt/srv/bin/server"});
  FrameId ssl = p.intern({"SSL_read", FrameKind::Native, "/usr/lib/libssl.so.3"});
  FrameId ext = p.intern({"PyInit_x", FrameKind::Native, "/usr/lib/python3/x.cpython-311-x86_64-linux-gnu.so"});
  FrameId shell = p.intern({"main", FrameKind::Native, "/bin/bash"});
  FrameId read = p.intern({"vfs_read", FrameKind::Kernel, "[kernel]"});
  p.add(std::vector<FrameId>{server, start, serve, ssl, read}, 50);
  p.add(std::vector<FrameId>{server, start, serve, serve}, 10);  // recursion counts the stack once
  p.add(std::vector<FrameId>{sh, start, shell, ext}, 20);
  p.add(std::vector<FrameId>{sh, start, shell, read}, 20);
  p.add(std::vector<FrameId>{sh, start, shell}, 15);
  auto files = mapping_files(encode_pprof(p));
  REQUIRE(files.size() == 6);
  CHECK(files[0] == "/opt/srv/bin/server");  // 60 against /bin/bash's 55
  // The rest by name.
  CHECK(files[1] == "/bin/bash");
  CHECK(files[2] == "/usr/lib/libssl.so.3");
  CHECK(files[5] == "[kernel]");

  // Only libraries and the kernel: no program to put first, plain order.
  Profile libs;
  FrameId a = libs.intern({"f", FrameKind::Native, "/usr/lib/libz.so.1"});
  FrameId k = libs.intern({"g", FrameKind::Kernel, "[kernel]"});
  libs.add(std::vector<FrameId>{a, k}, 1);
  CHECK(mapping_files(encode_pprof(libs)) == std::vector<std::string>{"/usr/lib/libz.so.1", "[kernel]"});

  // With several event types, the default one (the first) decides.
  Profile cpu, offcpu;
  offcpu.event = "offcpu", offcpu.unit = "ns";
  cpu.add(std::vector<FrameId>{cpu.intern({"work", FrameKind::Native, "/usr/bin/worker"})}, 5);
  offcpu.add(std::vector<FrameId>{offcpu.intern({"wait", FrameKind::Native, "/usr/bin/waiter"})}, 5000);
  const Profile* both[] = {&cpu, &offcpu};
  CHECK(mapping_files(encode_pprof(both)).front() == "/usr/bin/worker");
}

TEST_CASE("the process and thread pseudo-frames' names are made and split back") {
  CHECK(process_frame_name("nginx", 123) == "nginx (123)");
  CHECK(process_frame_name("nginx", 0) == "nginx");
  CHECK(split_process_frame("nginx (123)") == std::pair<std::string, uint64_t>{"nginx", 123});
  CHECK(split_process_frame("a (b) (7)") == std::pair<std::string, uint64_t>{"a (b)", 7});
  CHECK(split_process_frame("nginx") == std::pair<std::string, uint64_t>{"nginx", 0});
  CHECK(split_process_frame("nginx (x1)") == std::pair<std::string, uint64_t>{"nginx (x1)", 0});
  CHECK(thread_frame_name("main", 9) == "[main tid=9]");
  CHECK(split_thread_frame("[main tid=9]") == std::pair<std::string, uint64_t>{"main", 9});
  CHECK(split_thread_frame("[a tid=b tid=12]") == std::pair<std::string, uint64_t>{"a tid=b", 12});
  // Not made by thread_frame_name: kept whole.
  CHECK(split_thread_frame("main tid=9") == std::pair<std::string, uint64_t>{"main tid=9", 0});
  CHECK(split_thread_frame("[main tid=9x]") == std::pair<std::string, uint64_t>{"[main tid=9x]", 0});
  CHECK(split_thread_frame("[ tid=") == std::pair<std::string, uint64_t>{"[ tid=", 0});
}

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

TEST_CASE("pprof carries a timeline as a sample per time, labelled with nanoseconds since time_nanos") {
  Profile p = sample_profile();
  const auto& stacks = p.stacks();
  // Each stack's weight at two times (weights 7, 3, 2 in sample_profile's order).
  uint64_t t = 0;
  for (uint32_t s = 0; s < stacks.size(); ++s) {
    uint64_t first = stacks[s].weight / 2;
    p.timeline.push_back({t += 10'000'000, first, s});
    p.timeline.push_back({t += 1'000'000'000, stacks[s].weight - first, s});
  }
  std::sort(p.timeline.begin(), p.timeline.end(), [](const Timed& a, const Timed& b) { return a.time_ns < b.time_ns; });
  auto back = decode_pprof(encode_pprof(p));
  REQUIRE(back);
  CHECK(folded_text(*back) == folded_text(p));
  REQUIRE(back->timeline.size() == p.timeline.size());
  for (size_t i = 0; i < p.timeline.size(); ++i) {
    CHECK(back->timeline[i].time_ns == p.timeline[i].time_ns);
    CHECK(back->timeline[i].weight == p.timeline[i].weight);
    CHECK(back->stacks()[back->timeline[i].stack].weight == stacks[p.timeline[i].stack].weight);
  }
  // Without times, none.
  Profile plain = sample_profile();
  auto untimed = decode_pprof(encode_pprof(plain));
  REQUIRE(untimed);
  CHECK(untimed->timeline.empty());
}

TEST_CASE("pprof: a sample type is chosen by name, and a wrong name lists those there are") {
  Profile cpu = sample_profile(), offcpu;
  offcpu.event = "offcpu", offcpu.unit = "ns";
  offcpu.add(std::vector<FrameId>{offcpu.intern({"wait", FrameKind::Native, {}})}, 5000);
  const Profile* both[] = {&cpu, &offcpu};
  std::string bytes = encode_pprof(both);
  SampleTypes types;
  auto first = decode_pprof(bytes, {}, &types);
  REQUIRE(first);
  CHECK(types.names == std::vector<std::string>{"cpu-clock", "cpu", "offcpu"});
  CHECK(types.read == 0);
  CHECK(first->total() == 12);
  auto off = decode_pprof(bytes, "offcpu", &types);
  REQUIRE(off);
  CHECK(types.read == 2);
  CHECK(off->event == "offcpu");
  CHECK(off->unit == "ns");
  CHECK(folded_text(*off) == "wait 5000\n");
  auto ns = decode_pprof(bytes, "cpu");
  REQUIRE(ns);
  CHECK(ns->total() == 12 * cpu.period_ns);
  auto wrong = decode_pprof(bytes, "wall");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error() == "pprof: no sample type 'wall' in it; it holds cpu-clock, cpu, offcpu");
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

namespace {

// A profile of many stacks: 3 processes, stacks of 1 to 40 frames drawn
// from 60 functions, weights from 1 to 1,000 (a few heavy, many light).
Profile many_stacks(size_t n) {
  Profile p;
  std::mt19937_64 random(7);
  for (size_t i = 0; i < n; ++i) {
    std::vector<FrameId> frames{p.intern({"proc" + std::to_string(random() % 3), FrameKind::Process, {}})};
    for (size_t depth = 1 + random() % 40; frames.size() < depth + 1;)
      frames.push_back(p.intern({"f" + std::to_string(random() % 60), FrameKind::Native, "/bin/app"}));
    p.add(frames, 1 + (random() % 1000) * (random() % 1000) / 1000);
  }
  return p;
}

// The summed weight under each frame at `depth` (0: the root), by name.
std::map<std::string, uint64_t> weights_at(const Profile& p, size_t depth) {
  std::map<std::string, uint64_t> out;
  for (const Stack& s : p.stacks())
    if (s.frames.size() > depth) out[p.frames()[s.frames[depth]].name] += s.weight;
  return out;
}

}  // namespace

TEST_CASE("cut_stacks: fewer stacks, the same total and roots, the heaviest whole, the rest cut after a frame") {
  Profile p = many_stacks(5000);
  REQUIRE(p.stacks().size() > 4000);
  std::vector<const Stack*> heaviest;
  for (const Stack& s : p.stacks()) heaviest.push_back(&s);
  std::stable_sort(heaviest.begin(), heaviest.end(), [](const Stack* a, const Stack* b) { return a->weight > b->weight; });
  for (size_t max : {4000u, 1000u, 100u, 16u}) {
    CAPTURE(max);
    Profile cut = cut_stacks(p, max);
    CHECK(cut.stacks().size() <= max);
    CHECK(cut.total() == p.total());
    CHECK(weights_at(cut, 0) == weights_at(p, 0));
    // The heaviest half at least whole, with their weights.
    std::map<std::vector<std::string>, uint64_t> in_cut;
    for (const Stack& s : cut.stacks()) {
      std::vector<std::string> names;
      for (FrameId f : s.frames) names.push_back(cut.frames()[f].name);
      in_cut[names] += s.weight;
    }
    for (size_t i = 0; i < max / 2; ++i) {
      std::vector<std::string> names;
      for (FrameId f : heaviest[i]->frames) names.push_back(p.frames()[f].name);
      CHECK(in_cut[names] == heaviest[i]->weight);
    }
    size_t cut_here = 0;
    for (const auto& [names, weight] : in_cut) cut_here += names.back() == "[lighter stacks cut]";
    CHECK(cut_here > 0);
    CHECK(cut_stacks(p, max).stacks().size() == cut.stacks().size());  // the same answer each time
  }
  // Less room than roots: the total still, in the stacks allowed.
  Profile two = cut_stacks(p, 2);
  CHECK(two.stacks().size() <= 2);
  CHECK(two.total() == p.total());
  // With room for all: the same stacks.
  Profile same = cut_stacks(p, p.stacks().size());
  CHECK(same.stacks().size() == p.stacks().size());
  CHECK(weights_at(same, 5) == weights_at(p, 5));
}

TEST_CASE("cut_stacks: the light stacks keep as many outer frames as the room allows") {
  Profile p;
  FrameId app = p.intern({"app", FrameKind::Process, {}}), a = p.intern({"a", FrameKind::Native, {}}),
          b = p.intern({"b", FrameKind::Native, {}}), c = p.intern({"c", FrameKind::Native, {}});
  p.add(std::vector<FrameId>{app, b, c}, 100);
  p.add(std::vector<FrameId>{app, c}, 50);
  p.add(std::vector<FrameId>{app, a}, 3);
  p.add(std::vector<FrameId>{app, a, b}, 2);
  p.add(std::vector<FrameId>{app, a, c}, 1);
  // Room for 4: the two heaviest whole, and two for the three light ones,
  // which app;a fits (a stack cut there is not the whole app;a).
  Profile cut = cut_stacks(p, 4);
  std::map<std::string, uint64_t> folded;
  for (const Stack& s : cut.stacks()) {
    std::string line;
    for (FrameId f : s.frames) line += (line.empty() ? "" : ";") + cut.frames()[f].name;
    folded[line] = s.weight;
  }
  CHECK(folded == std::map<std::string, uint64_t>{
                      {"app;b;c", 100}, {"app;c", 50}, {"app;a", 3}, {"app;a;[lighter stacks cut]", 3}});
}
