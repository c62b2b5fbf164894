#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "agent/jitmap_writer.h"
#include "flamegraph/folded.h"
#include "user/java/java_events.h"
#include "symbolizer/jit_map.h"
#include "user/java/java_profiles.h"
#include "temp_dir.h"

using ember::JavaProcess;
using ember::JavaProfileKind;
using ember::JavaProfileOptions;
using ember::java::JavaEvents;
using ember::symbolizer::JitMap;

namespace {

// A stream as the agent writes it: code, then Java events.
constexpr const char* kStream =
    "# ember-jitmap 1 pid 42\n"
    "O alloc-interval 1000\n"
    "O live-max 32768\n"
    "O lock-interval 100\n"
    "M 1 App.main\n"
    "M 2 App.make\n"
    "M 3 App.critical\n"
    "L 100 7f0000010000 400 1\n"
    "G 7f0000010000 8 44\n"  // frame geometry, between the L line and its I lines
    "I 20 2,1\n"
    "S 100 7f0000020000 60 throw_exception\n"
    "G 7f0000020000 2 -1\n"
    "P 7f00a0001230 1\n"  // an interpreted frame's Method*
    "K 1 App$Big\n"
    "K 2 byte[]\n"
    "K 3 App$SharedLock\n"
    "T 7 main\n"
    "T 8 worker-1\n"
    "A 200 7 10 1 1 2,1\n"        // followed: sample 1
    "A 210 7 10 1 2 2,1\n"        // sample 2, freed below
    "A 220 8 2000000 2 0 1\n"     // not followed (table full)
    "F 300 2\n"
    "F 310 99\n"                  // a sample of an earlier stream
    "C 400 8 5000 3 3,1\n"        // a long wait: its own weight
    "C 410 8 40 3 3,1\n"          // a short one, sampled: weighs the interval
    "D 500 reentered 2\n"
    "O live-end gc\n";

std::string folded(const JavaEvents& events, JavaProfileKind kind, JavaProfileOptions options = {}) {
  return ember::flamegraph::folded_text(ember::java_profile(events, kind, JavaProcess{42, "java"}, options));
}

// An exact size/p in the folded text: the rounded HT estimate.
std::string bytes(uint64_t size, uint64_t interval, int samples) {
  double p = -std::expm1(-double(size) / double(interval));
  return std::to_string(std::llround(samples * double(size) / p));
}

}  // namespace

TEST_CASE("java events: allocation samples, frees, contention, names") {
  JavaEvents events;
  events.feed(kStream);
  const auto& s = events.stats();
  CHECK(s.bad_lines == 0);
  CHECK(s.alloc_samples == 3);
  CHECK(s.live_followed == 2);
  CHECK(s.live_untracked == 1);
  CHECK(s.freed == 1);
  CHECK(s.unknown_frees == 1);
  CHECK(s.lock_samples == 2);
  CHECK(s.agent_counters.at("reentered") == 2);
  CHECK(events.alloc_interval() == 1000);
  CHECK(events.lock_interval() == 100);
  CHECK(events.live());
  CHECK(events.thread_name(8) == "worker-1");
  CHECK(events.thread_name(9).empty());
  CHECK(events.class_name(2) == "byte[]");
  CHECK(events.class_name(77) == "[unknown class]");
  CHECK(events.method(77) == "[unknown method]");

  // Bytes: frames outermost first, the class on top; two samples of one site merge.
  CHECK(folded(events, JavaProfileKind::AllocBytes) ==
        "java;App.main_[j];byte[] 2000000\n"
        "java;App.main_[j];App.make_[j];App$Big " + bytes(10, 1000, 2) + "\n");
}

TEST_CASE("java events: live objects on a timeline, by allocation time, adding up to each site") {
  // Samples of 10-byte objects at 1000-byte intervals weigh 1000.5 bytes
  // each: rounded per site, the timeline's shares must still add up.
  std::string stream =
      "# ember-jitmap 1 pid 42\n"
      "O alloc-interval 1000\nO live-max 32768\n"
      "M 1 App.leak\nM 2 App.keep\nK 1 byte[]\nT 7 main\n";
  for (int i = 0; i < 25; ++i) {
    int method = i % 3 ? 1 : 2;
    stream += "A " + std::to_string(1000 + 100 * i) + " 7 10 1 " + std::to_string(i + 1) + " " +
              std::to_string(method) + "\n";
  }
  stream += "F 4000 4\nO live-end none\n";  // sample 4 (App.keep's, at 1300) collected
  JavaEvents events;
  events.feed(stream);
  REQUIRE(events.stats().bad_lines == 0);
  JavaProfileOptions live;
  live.live_only = true;
  live.start_ns = 500;
  auto profile = ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, live);
  REQUIRE(profile.stacks().size() == 2);
  REQUIRE(profile.timeline.size() == 24);
  std::vector<uint64_t> sums(profile.stacks().size());
  for (const auto& t : profile.timeline) sums[t.stack] += t.weight;
  for (size_t i = 0; i < sums.size(); ++i) CHECK(sums[i] == profile.stacks()[i].weight);
  CHECK(profile.timeline.front().time_ns == 500);  // 1000, from the start at 500
  CHECK(profile.timeline.back().time_ns == 2900);
  CHECK(std::is_sorted(profile.timeline.begin(), profile.timeline.end(),
                       [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; }));
  // Without a start: no timeline; not live: none either.
  live.start_ns = 0;
  CHECK(ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, live).timeline.empty());
  live.live_only = false;
  live.start_ns = 500;
  CHECK(ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, live).timeline.empty());
}

TEST_CASE("java events: the jvms note, written and read back") {
  std::string note = ember::jvms_note_entry(123, "1764571212.34") + ", " + ember::jvms_note_entry(1234, "") + ", " +
                     ember::jvms_note_entry(45, "1764571300.00");
  CHECK(note == "123 (started 1764571212.34), 1234, 45 (started 1764571300.00)");
  CHECK(ember::jvm_started_in_note(note, 123) == "1764571212.34");
  CHECK(ember::jvm_started_in_note(note, 1234) == "");   // listed, no time
  CHECK(ember::jvm_started_in_note(note, 45) == "1764571300.00");
  CHECK_FALSE(ember::jvm_started_in_note(note, 12));     // a prefix of 123 and 1234 is not them
  CHECK_FALSE(ember::jvm_started_in_note(note, 4));
  CHECK_FALSE(ember::jvm_started_in_note("", 1));
}

TEST_CASE("java events: live objects by the collections they survived") {
  // Three objects followed: before the 2nd collection counted, between the
  // 4th and 5th, after the 5th; "O gcs" lines only grow (an older count
  // written late by another thread is ignored).
  JavaEvents events;
  events.feed(
      "# ember-jitmap 1 pid 42\nO alloc-interval 1000\nO live-max 32768\nO gcs 1\n"
      "M 1 App.keep\nK 1 byte[]\n"
      "A 100 7 10 1 1 1\nO gcs 4\nO gcs 3\nA 200 7 10 1 2 1\nO gcs 5\nA 300 7 10 1 3 1\nO gcs 7\n"
      "O live-end none\n");
  REQUIRE(events.stats().bad_lines == 0);
  REQUIRE(events.gcs() == 7u);
  auto kept = [&](uint64_t min_gcs) { return events.live_allocations(0, UINT64_MAX, min_gcs).size(); };
  CHECK(kept(0) == 3);
  CHECK(kept(2) == 3);  // the last one has seen 7 - 5
  CHECK(kept(3) == 2);
  CHECK(kept(6) == 1);  // the first: 7 - 1
  CHECK(kept(7) == 0);
  // A stream without gcs lines (an older agent): nothing is old enough.
  JavaEvents old;
  old.feed("# ember-jitmap 1 pid 42\nO alloc-interval 1000\nO live-max 32768\nM 1 App.keep\nK 1 byte[]\n"
           "A 100 7 10 1 1 1\n");
  CHECK_FALSE(old.gcs());
  CHECK(old.live_allocations(0, UINT64_MAX, 1).empty());
  CHECK(old.live_allocations().size() == 1);
  JavaProfileOptions live;
  live.live_only = true;
  live.min_gcs = 1;
  bool says = false;
  for (const auto& [k, v] : ember::java_profile_info(old, JavaProfileKind::AllocBytes, live))
    says |= k == "collections" && v.find("--min-gcs keeps nothing") != std::string::npos;
  CHECK(says);
}

TEST_CASE("java events: the objects a pin holds, by element; a pin refused; live samples kept by number") {
  JavaEvents events;
  events.feed(
      "# ember-jitmap 1 pid 42\nO alloc-interval 1000\nO live-max 32768\nM 1 App.keep\nM 2 App.drop\nK 1 byte[]\n"
      "A 100 7 10 1 11 1\nA 200 7 10 1 12 2\nA 300 7 10 1 13 1\nF 350 12\n"
      "O live-end none\nH 1 13\nH 2 11\n");
  CHECK_FALSE(events.pin());  // not before its O pinned line
  events.feed("O pinned 5eed 2\n");
  REQUIRE(events.stats().bad_lines == 0);
  REQUIRE(events.pin());
  CHECK(events.pin()->token == "5eed");
  CHECK(events.pin()->samples == std::vector<uint64_t>{0, 13, 11});
  CHECK(events.pin_unavailable().empty());
  // The live samples by their numbers; a profile of some of them only.
  std::vector<uint64_t> numbers;
  for (const auto& a : events.live_allocations()) numbers.push_back(a.sample);
  CHECK(numbers == std::vector<uint64_t>{11, 13});
  JavaProfileOptions options;
  options.live_only = true;
  options.keep_sample = [](uint64_t sample) { return sample == 13; };
  std::vector<uint32_t> stacks;
  options.on_site = [&](const JavaEvents::Site&, uint32_t stack) { stacks.push_back(stack); };
  auto profile = ember::java_profile(events, JavaProfileKind::AllocBytes, {42, "java"}, options);
  CHECK(profile.stacks().size() == 1);
  CHECK(stacks.size() == 1);
  // Element 0 is the marker's, an index past the count is a bad line.
  JavaEvents refused;
  refused.feed("O pin-unavailable the stream follows no live objects\nH 0 5\n");
  CHECK(refused.pin_unavailable() == "the stream follows no live objects");
  CHECK_FALSE(refused.pin());
  CHECK(refused.stats().bad_lines == 1);
}

TEST_CASE("java events: profiles of bytes, objects, live objects, lock time") {
  JavaEvents events;
  events.feed(kStream);
  JavaProfileOptions threads;
  threads.thread_frames = true;
  // Bytes per site; a huge object (size >> interval) weighs about its size.
  std::string text = folded(events, JavaProfileKind::AllocBytes, threads);
  CHECK(text.find("java;[main tid=7];App.main_[j];App.make_[j];App$Big " + bytes(10, 1000, 2) + "\n") !=
        std::string::npos);
  CHECK(text.find("java;[worker-1 tid=8];App.main_[j];byte[] 2000000\n") != std::string::npos);
  // Objects: 1/p each; the huge one counts once.
  text = folded(events, JavaProfileKind::AllocObjects);
  CHECK(text.find("java;App.main_[j];byte[] 1\n") != std::string::npos);
  CHECK(text.find("java;App.main_[j];App.make_[j];App$Big 201\n") != std::string::npos);  // 2 / (1 - e^-0.01)
  // Live: sample 2 was freed and the untracked one cannot be called live.
  JavaProfileOptions live;
  live.live_only = true;
  auto profile = ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, live);
  CHECK(profile.event == "alloc-live");
  CHECK(ember::flamegraph::folded_text(profile) == "java;App.main_[j];App.make_[j];App$Big " + bytes(10, 1000, 1) + "\n");
  bool says_untracked = false, says_gc = false;
  for (const auto& [k, v] : profile.info) {
    says_untracked |= k.starts_with("samples not followed") && v == "1";
    says_gc |= k == "live" && v.find("after a full GC") != std::string::npos;
  }
  CHECK(says_untracked);
  CHECK(says_gc);
  CHECK(events.live_end() == "gc");
  // --min-age: sample 1, allocated at 200 ns, is 100 ns old at 300.
  live.min_age_ns = 100;
  live.end_ns = 300;
  CHECK(ember::flamegraph::folded_text(ember::java_profile(events, JavaProfileKind::AllocBytes,
                                                           JavaProcess{42, "java"}, live)) ==
        "java;App.main_[j];App.make_[j];App$Big " + bytes(10, 1000, 1) + "\n");
  live.end_ns = 299;
  CHECK(ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, live).stacks().empty());
  live.end_ns = 150;  // allocated after the end: not counted either
  live.min_age_ns = 0;
  CHECK(ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, live).stacks().empty());
  // Lock: the waiter's stack and the monitor's class; the sampled short
  // wait weighs one interval.
  JavaProfileOptions pid;
  pid.pid_frames = true;
  profile = ember::java_profile(events, JavaProfileKind::Lock, JavaProcess{42, "java"}, pid);
  CHECK(profile.unit == "ns");
  CHECK(ember::flamegraph::folded_text(profile) == "java (42);App.main_[j];App.critical_[j];App$SharedLock 5100\n");
  CHECK(profile.frames().back().kind == ember::flamegraph::FrameKind::Alloc);
}

TEST_CASE("java events: garbage lines are counted and skipped, the rest still parses") {
  JavaEvents events;
  events.feed(
      "O alloc-interval 1000\n"
      "M 1 App.main\n"
      "K 1 App$Big\n"
      "A\n"
      "A 1 2 3\n"
      "A 1 2 3 1 0\n"           // no frames
      "A 1 2 3 1 0 1,x\n"       // a bad frame
      "A 1 2 3 1 0 +,1\n"       // the cut marker is last or nowhere
      "A 1 99999999999 3 1 0 1\n"
      "Ax 1 2 3 1 0 1\n"
      "F 1\n"
      "F 1 2 3\n"
      "C 1 2 3 1\n"
      "D 1 counter\n"
      "Z something\n"
      "M x name\n"
      "K 99999999999 name\n"
      "\n"
      "A 1 5 10 1 0 1\n");
  CHECK(events.stats().bad_lines == 14);  // every line above but the empty one
  CHECK(events.stats().alloc_samples == 1);
  CHECK(folded(events, JavaProfileKind::AllocObjects) == "java;App.main_[j];App$Big 101\n");  // 1 / (1 - e^-0.01)
}

TEST_CASE("java events: lines split across feeds; empty and truncated stacks") {
  JavaEvents events;
  std::string text =
      "O alloc-interval 1000\nM 1 A.a\nM 2 A.b\nK 1 C\n"
      "A 1 5 1000 1 0 2,1,+\n"
      "A 1 5 1000 1 0 -\n";
  for (char c : text) events.feed(std::string_view(&c, 1));
  CHECK(events.stats().bad_lines == 0);
  CHECK(events.stats().truncated_stacks == 1);
  std::string out = folded(events, JavaProfileKind::AllocObjects);
  // The agent keeps the innermost frames: the marker goes at the root side.
  CHECK(out == "java;C 2\njava;[truncated];A.a_[j];A.b_[j];C 2\n");
}

TEST_CASE("java events: the code map skips event lines and keeps working") {
  JitMap map;
  map.feed(kStream);
  CHECK(map.bad_lines() == 0);
  auto at = map.locate(0x7f0000010010, 300);
  REQUIRE(at);
  auto frames = map.frames(at);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].name == "App.make");
}

namespace {

// Allocations from native code: a JNI method's C frames (libnat.so) and the
// JNI function in libjvm.so, innermost first, beside a plain Java one.
constexpr const char* kNativeStream =
    "# ember-jitmap 1 pid 42\n"
    "O alloc-interval 1000\n"
    "M 1 App.main\n"
    "M 2 App.nativeAlloc\n"
    "K 1 byte[]\n"
    "O native-library 7f0000000000 7f0000100000 7f0000000000 /jvm/lib/server/libjvm.so\n"
    "O native-library 7f1000000000 7f1000003000 7f1000000000 /app/lib/libnat.so\n"
    "A 200 7 10 1 0 1\n"                                         // from Java: no native frames
    "A 210 7 10 1 0 2,1 7f0000001233,7f1000001100,7f1000001200\n"  // jni_NewByteArray <- make <- Java_App_nativeAlloc
    "A 220 7 10 1 0 2,1 7f0000001233,7f1000001100,7f1000001200 \n" // the same site (a trailing space)
    "A 230 7 10 1 0 2,1 7f0000001233,7fff00000000\n";              // an address no library line covers

// What the symbolizer would say: names by file and address.
std::vector<ember::symbolizer::Symbol> fake_names(uint32_t pid, const std::string& path,
                                                  std::span<const uint64_t> addresses) {
  using ember::symbolizer::Frame;
  using ember::symbolizer::FrameKind;
  std::vector<ember::symbolizer::Symbol> out;
  for (uint64_t a : addresses) {
    ember::symbolizer::Symbol s;
    if (pid != 42)
      s.frames = {Frame{"wrong pid", FrameKind::Native, {}}};
    else if (path.ends_with("libjvm.so") && a == 0x1233)
      s.frames = {Frame{"jni_NewByteArray", FrameKind::Native, path}};
    else if (path.ends_with("libnat.so") && a == 0x1100)  // a call inlined into make
      s.frames = {Frame{"make", FrameKind::Native, path}, Frame{"fill", FrameKind::Inlined, path}};
    else if (path.ends_with("libnat.so") && a == 0x1200)
      s.frames = {Frame{"Java_App_nativeAlloc", FrameKind::Native, path}};
    else
      s.unknown = ember::symbolizer::Unknown::NoSymbol;  // "[unknown]": no module given
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST_CASE("java events: native frames of allocations made by native code") {
  JavaEvents events;
  events.feed(kNativeStream);
  CHECK(events.stats().bad_lines == 0);
  CHECK(events.stats().alloc_samples == 4);
  CHECK(events.stats().native_alloc_samples == 3);
  REQUIRE(events.native_libraries().size() == 2);
  CHECK(events.native_libraries()[1].path == "/app/lib/libnat.so");
  // Sites: the Java one has no native stack; the native ones are resolved
  // to (library, address in the file) when read.
  std::vector<std::vector<JavaEvents::NativeFrame>> natives;
  uint64_t plain = 0;
  for (const auto& [site, w] : events.alloc_sites()) {
    if (site.native == 0)
      plain += w.samples;
    else
      natives.push_back(events.native_stack(site.native));
  }
  CHECK(plain == 1);
  REQUIRE(natives.size() == 2);
  std::sort(natives.begin(), natives.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  using NF = JavaEvents::NativeFrame;
  CHECK(natives[0] == std::vector<NF>{{0, 0x1233}, {1, 0x1100}, {1, 0x1200}});
  CHECK(natives[1] == std::vector<NF>{{0, 0x1233}, {JavaEvents::kNoLibrary, 0x7fff00000000}});

  // The C frames between the native method's Java frame and the class,
  // outermost first; inlined calls after their caller; the samples of one
  // site merged.
  JavaProfileOptions named;
  named.name_native = fake_names;
  std::string text = folded(events, JavaProfileKind::AllocObjects, named);
  CHECK(text.find("java;App.main_[j];byte[] 101\n") != std::string::npos);  // 1 / (1 - e^-0.01)
  CHECK(text.find("java;App.main_[j];App.nativeAlloc_[j];Java_App_nativeAlloc;make;fill_[i];jni_NewByteArray;"
                  "byte[] 201\n") != std::string::npos);
  CHECK(text.find("java;App.main_[j];App.nativeAlloc_[j];[unknown];jni_NewByteArray;byte[] 101\n") !=
        std::string::npos);
  // Without a symbolizer: the file and the address in it.
  text = folded(events, JavaProfileKind::AllocObjects);
  CHECK(text.find("App.nativeAlloc_[j];libnat.so+0x1200;libnat.so+0x1100;libjvm.so+0x1233;byte[] 201\n") !=
        std::string::npos);
  // Said in the graph's facts.
  auto profile = ember::java_profile(events, JavaProfileKind::AllocBytes, JavaProcess{42, "java"}, named);
  bool says_native = false;
  for (const auto& [k, v] : profile.info) says_native |= k == "alloc samples from native code" && v == "3";
  CHECK(says_native);
  // Lock stacks never have native frames (the namer is not needed).
  CHECK(folded(events, JavaProfileKind::Lock, named).empty());
}

TEST_CASE("java events: native libraries replace what they overlap; bad native fields are bad lines") {
  JavaEvents events;
  events.feed(
      "O alloc-interval 1000\nM 1 App.n\nK 1 C\n"
      "O native-library 1000 3000 0 /old.so\n"
      "A 1 5 10 1 0 1 2000\n"
      // Unloaded, and another library loaded over part of it: addresses
      // read after this line are the new one's, those before stay the old's.
      "O native-library 2000 4000 1000 /new.so\n"
      "A 1 5 10 1 0 1 2000\n"
      "A 1 5 10 1 0 1 1800\n"  // the old library's part no line covers now
      "O native-library 5000 4000 0 /backwards.so\n"
      "O native-library 5000 6000 0\n"
      "O native-library 5000 6000\n"
      "A 1 5 10 1 0 1 xyz\n"
      "A 1 5 10 1 0 1 2000,\n"
      "A 1 5 10 1 0 1 ,2000\n"
      "A 1 5 10 1 0 1 2000 3000\n");
  CHECK(events.stats().bad_lines == 7);
  CHECK(events.stats().alloc_samples == 3);
  std::vector<JavaEvents::NativeFrame> seen;
  for (const auto& [site, w] : events.alloc_sites()) {
    REQUIRE(events.native_stack(site.native).size() == 1);
    seen.push_back(events.native_stack(site.native)[0]);
  }
  using NF = JavaEvents::NativeFrame;
  std::sort(seen.begin(), seen.end(), [](const NF& a, const NF& b) { return a.library < b.library; });
  CHECK(seen == std::vector<NF>{{0, 0x2000}, {1, 0x1000}, {JavaEvents::kNoLibrary, 0x1800}});
  CHECK(events.native_libraries()[1].path == "/new.so");
}

TEST_CASE("java events: the code map skips native frames and library lines") {
  JitMap map;
  map.feed(kNativeStream);
  CHECK(map.bad_lines() == 0);
}

// HotSpot's sampler, simulated: geometric gaps of mean `interval` bytes;
// the object that crosses a sample point is sampled. Objects are allocated
// round-robin from `sizes`.
TEST_CASE("java events: allocation estimates are unbiased at every size (simulated sampler)") {
  const uint64_t interval = 512 * 1024;
  struct Case {
    std::vector<uint64_t> sizes;
    uint64_t rounds;
  };
  // 96:32 bytes (AllocRatio), and objects near and above the interval,
  // where async-profiler's max(size, interval) is off by up to 37%.
  for (const Case& c : {Case{{96, 32}, 40'000'000}, Case{{512 * 1024, 128 * 1024}, 40'000}}) {
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> gap(1.0 / double(interval));
    std::string stream = "O alloc-interval " + std::to_string(interval) + "\nM 1 A.a\nK 1 First\nK 2 Second\n";
    double until_sample = gap(rng);
    std::vector<double> truth(c.sizes.size());
    for (uint64_t r = 0; r < c.rounds; ++r) {
      for (size_t k = 0; k < c.sizes.size(); ++k) {
        truth[k] += double(c.sizes[k]);
        until_sample -= double(c.sizes[k]);
        if (until_sample > 0) continue;
        while (until_sample <= 0) until_sample += gap(rng);
        stream += "A 1 1 " + std::to_string(c.sizes[k]) + " " + std::to_string(k + 1) + " 0 1\n";
      }
    }
    JavaEvents events;
    events.feed(stream);
    for (const auto& [site, w] : events.alloc_sites()) {
      double want = truth[site.klass - 1];
      INFO("size " << c.sizes[site.klass - 1] << ": " << w.samples << " samples, estimate " << w.bytes
                   << " bytes, truth " << want);
      CHECK(std::abs(w.bytes - want) < 0.05 * want);
      // async-profiler's weight, max(size, interval) per sample: 1 - 1/e
      // of the truth for objects the size of the interval.
      uint64_t size = c.sizes[site.klass - 1];
      if (size == interval) CHECK(double(w.samples) * double(std::max(size, interval)) < 0.7 * want);
    }
  }
}

TEST_CASE("java events: a window restarts the weights, names and stacks stay") {
  JavaEvents events;
  events.feed(kStream);
  REQUIRE(!events.alloc_sites().empty());
  REQUIRE(!events.lock_sites().empty());
  events.next_window();
  CHECK(events.alloc_sites().empty());
  CHECK(events.lock_sites().empty());
  CHECK(events.stats().alloc_samples == 0);
  CHECK(folded(events, JavaProfileKind::AllocBytes).empty());
  CHECK(events.class_name(2) == "byte[]");
  CHECK(events.thread_name(8) == "worker-1");
}

TEST_CASE("java events: a stream past its file size goes on in PATH.1, PATH.2; read in order, nothing is lost") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string path = (dir.path / "42.jitmap").string();
  // Static, as the agent's: its tables live as long as the process (no
  // destructor). Files of 64 KiB rather than 16 MiB, for speed.
  constexpr uint64_t kFileBytes = 64 << 10;
  static ember::agent::JitMapWriter writer(kFileBytes);
  REQUIRE(writer.open(path.c_str(), 42));
  writer.lock();
  bool is_new = false;
  uint32_t method = writer.method_id(reinterpret_cast<const void*>(0x1000), &is_new);
  writer.define_method(method, "App.main");
  uint32_t klass = writer.class_id(7, &is_new);
  writer.define_class(klass, "byte[]");
  writer.commit();
  writer.unlock();
  // Samples of 100 frames, some 230 bytes each: 150 KiB of them, three files.
  constexpr uint64_t kSamples = 650;
  const std::vector<uint32_t> frames(100, method);
  for (uint64_t i = 0; i < kSamples; ++i) {
    writer.lock();
    writer.alloc(1000 + i, 9, 1024, klass, 0, frames.data(), static_cast<int>(frames.size()), false);
    writer.commit_lazy();
    writer.unlock();
  }
  writer.lock();
  writer.close();
  writer.unlock();

  // As the collector reads: each file to its end, then the one its R line names.
  JitMap map;
  JavaEvents events;
  std::vector<std::string> read;
  std::string name = "42.jitmap";
  while (true) {
    std::ifstream in(dir.path / name, std::ios::binary);
    REQUIRE(in);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    CHECK(text.size() < kFileBytes + (1 << 16));
    map.feed(text);
    events.feed(text);
    read.push_back(name);
    if (map.continued_in().empty() || map.continued_in() == name) break;
    name = map.continued_in();
  }
  CHECK(read == std::vector<std::string>{"42.jitmap", "42.jitmap.1", "42.jitmap.2"});
  CHECK(map.bad_lines() == 0);
  CHECK(events.stats().bad_lines == 0);
  CHECK(events.stats().alloc_samples == kSamples);
  CHECK(events.method(method) == "App.main");  // named in the first file, used in the last
  CHECK(events.class_name(klass) == "byte[]");
}
