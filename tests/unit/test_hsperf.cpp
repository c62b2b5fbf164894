#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "user/java/hsperf.h"
#include "user/java/jvm.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// The hsperfdata files of JDK 17.0.15 JVMs (G1 and Parallel, -Xmx128m)
// running tests/java/Allocator.java, copied from /tmp/hsperfdata_root.
std::string fixture(const char* name) {
  fs::path in_tree = fs::path("tests/fixtures") / name;
  if (!fs::exists(in_tree)) in_tree = fs::path(__FILE__).parent_path().parent_path() / "fixtures" / name;
  std::ifstream in(in_tree, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  REQUIRE(out.str().size() > 0);
  return out.str();
}

std::span<const std::byte> bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::expected<hsperf::Snapshot, std::string> parse(const std::string& image) {
  return hsperf::parse(bytes(image), "/tmp/hsperfdata_x/42");
}

// A PerfData image as HotSpot lays it out: 8-byte aligned entries, data
// after the name, in either byte order.
struct Item {
  std::string name;
  char type = 'J';
  int64_t value = 0;
  std::string text;  // 'B': the bytes, NUL-padded to `length`
  int32_t length = 0;
};

class Image {
 public:
  explicit Image(bool little = true) : little_(little) {}
  Image& add(Item item) {
    items_.push_back(std::move(item));
    return *this;
  }
  std::string build() const {
    std::string out(hsperf::kPrologueSize, '\0');
    out[0] = '\xca', out[1] = '\xfe', out[2] = '\xc0', out[3] = '\xc0';
    out[4] = little_ ? 1 : 0;
    out[5] = 2;
    out[7] = 1;
    for (const Item& item : items_) {
      size_t start = out.size();
      size_t name_offset = hsperf::kEntryHeaderSize;
      size_t data_offset = (name_offset + item.name.size() + 1 + 7) & ~size_t(7);
      size_t data_size = item.type == 'J' ? 8 : static_cast<size_t>(item.length);
      size_t length = (data_offset + data_size + 7) & ~size_t(7);
      out.resize(start + length, '\0');
      put4(out, start, static_cast<int32_t>(length));
      put4(out, start + 4, static_cast<int32_t>(name_offset));
      put4(out, start + 8, item.type == 'J' ? 0 : item.length);
      out[start + 12] = item.type;
      out[start + 14] = item.type == 'J' ? 2 : 5;
      out[start + 15] = 3;
      put4(out, start + 16, static_cast<int32_t>(data_offset));
      std::memcpy(&out[start + name_offset], item.name.data(), item.name.size());
      if (item.type == 'J')
        put8(out, start + data_offset, item.value);
      else
        std::memcpy(&out[start + data_offset], item.text.data(), std::min(item.text.size(), data_size));
    }
    put4(out, 8, static_cast<int32_t>(out.size()));              // used
    put4(out, 24, static_cast<int32_t>(hsperf::kPrologueSize));  // entry_offset
    put4(out, 28, static_cast<int32_t>(items_.size()));          // num_entries
    out.resize(out.size() + 64, '\0');                           // unused tail, as in the real files
    return out;
  }
  void put4(std::string& out, size_t at, int32_t v) const { put(out, at, v); }
  void put8(std::string& out, size_t at, int64_t v) const { put(out, at, v); }

 private:
  template <typename T>
  void put(std::string& out, size_t at, T v) const {
    if (little_ != (std::endian::native == std::endian::little)) v = std::byteswap(v);
    std::memcpy(&out[at], &v, sizeof v);
  }
  bool little_;
  std::vector<Item> items_;
};

Image small_image(bool little = true) {
  Image img(little);
  img.add({"sun.os.hrt.frequency", 'J', 1000000000, "", 0})
      .add({"sun.gc.policy.name", 'B', 0, "GarbageFirst", 32})
      .add({"sun.gc.collector.0.invocations", 'J', -7, "", 0});
  return img;
}

}  // namespace

TEST_CASE("hsperf: a G1 JVM's file", "[hsperf]") {
  auto snap = parse(fixture("hsperfdata-g1.bin"));
  REQUIRE(snap);
  CHECK(snap->accessible);
  CHECK(snap->counters.size() == 187);
  CHECK(snap->skipped == 0);
  CHECK(snap->number("sun.os.hrt.frequency") == 1000000000);
  REQUIRE(snap->text("sun.gc.policy.name"));
  CHECK(*snap->text("sun.gc.policy.name") == "GarbageFirst");
  CHECK(*snap->text("sun.gc.collector.0.name") == "G1 young collection pauses");
  CHECK(*snap->text("sun.rt.javaCommand") == "Allocator 40 3");
  CHECK(snap->number("sun.gc.generation.0.space.0.used") == 72351744);
  CHECK(snap->number("sun.gc.tlab.alloc") == 1703936);
  // Absent, or of the other kind.
  CHECK(!snap->number("sun.gc.policy.name"));
  CHECK(!snap->text("sun.os.hrt.frequency"));
  CHECK(!snap->number("no.such.counter"));
  const hsperf::Counter& eden = snap->counters.at("sun.gc.generation.0.space.0.used");
  CHECK(eden.units == static_cast<uint8_t>(hsperf::Units::bytes));
  CHECK(eden.variability == static_cast<uint8_t>(hsperf::Variability::variable));
}

TEST_CASE("hsperf: telemetry of G1 and Parallel JVMs", "[hsperf]") {
  SECTION("G1") {
    auto snap = parse(fixture("hsperfdata-g1.bin"));
    REQUIRE(snap);
    JvmTelemetry t = telemetry_from(*snap, 42, 100.0);
    CHECK(t.gc == "G1");
    CHECK(t.main_class == "Allocator");
    CHECK(!t.sampled_spaces);
    CHECK(t.eden.used == 72351744);
    CHECK(t.eden.committed == 81788936);
    CHECK(t.survivors.used == 2097152);  // G1's survivors are in s1, s0 stays empty
    CHECK(t.old.used == 10267136);
    CHECK(t.old.committed == 50331656);
    CHECK(t.metaspace.used == 532296);
    CHECK(t.heap().used == 72351744 + 2097152 + 10267136);
    REQUIRE(t.collectors.size() == 3);
    CHECK(t.collectors[0].role == GcRole::young);
    CHECK(t.collectors[1].role == GcRole::full);
    CHECK(t.collectors[2].role == GcRole::other);
    CHECK(t.gc_count(GcRole::young) == 3);
    CHECK(t.gc_seconds(GcRole::young) == Approx(0.011940049));
    CHECK(t.gc_count(GcRole::full) == 0);
    CHECK(!t.in_gc());
    CHECK(t.tlab.alloc == 1703936);
    CHECK(t.tlab.fills == 53);
    CHECK(t.time() == 100.0);  // G1's counters are true when read
  }
  SECTION("Parallel") {
    auto snap = parse(fixture("hsperfdata-parallel.bin"));
    REQUIRE(snap);
    JvmTelemetry t = telemetry_from(*snap, 42, 100.0);
    CHECK(t.gc == "Parallel");
    CHECK(t.sampled_spaces);
    CHECK(t.eden.used == 31723408);
    CHECK(t.eden.committed == 34078720);
    CHECK(t.survivors.used == 5046272);
    CHECK(t.survivors.committed == 2 * 5242880);
    CHECK(t.old.used == 24592);
    REQUIRE(t.collectors.size() == 2);
    CHECK(t.gc_count(GcRole::young) == 2);
    CHECK(!t.has_role(GcRole::other));
    CHECK(t.tlab.alloc == 4259710);
    // Its sampled counters are true as of its last sample, on its clock.
    CHECK(t.time() == Approx(2.484685219));
  }
}

TEST_CASE("hsperf: both byte orders, strings, and types it does not read", "[hsperf]") {
  for (bool little : {true, false}) {
    Image img = small_image(little);
    img.add({"sun.some.int", 'I', 5, "", 8});
    std::string data = img.build();
    // 'I' entries carry 8 bytes here too; HotSpot writes none: skipped.
    auto snap = parse(data);
    REQUIRE(snap);
    CHECK(snap->number("sun.os.hrt.frequency") == 1000000000);
    CHECK(snap->number("sun.gc.collector.0.invocations") == -7);
    CHECK(*snap->text("sun.gc.policy.name") == "GarbageFirst");
    CHECK(snap->skipped == 1);
    CHECK(!snap->counters.contains("sun.some.int"));
  }
}

TEST_CASE("hsperf: damaged prologues and entries are errors naming the file", "[hsperf]") {
  std::string good = small_image().build();
  REQUIRE(parse(good));
  Image w;  // for its writers
  auto expect_error = [](const std::string& data, std::string_view why) {
    auto r = parse(data);
    REQUIRE(!r);
    INFO(r.error());
    CHECK(contains(r.error(), "/tmp/hsperfdata_x/42: "));
    CHECK(contains(r.error(), why));
  };
  std::string d;
  d = good, d[0] = 'X', expect_error(d, "not a HotSpot hsperfdata file");
  d = good, d[4] = 7, expect_error(d, "byte order 7");
  d = good, d[5] = 1, expect_error(d, "PerfData version 1.0");
  d = good, w.put4(d, 8, 1 << 30), expect_error(d, "truncated");
  d = good, w.put4(d, 8, 8), expect_error(d, "damaged");
  d = good, w.put4(d, 24, 1 << 20), expect_error(d, "first entry");
  d = good, w.put4(d, 24, -4), expect_error(d, "first entry");
  d = good, w.put4(d, 28, 1 << 28), expect_error(d, "entries cannot fit");
  d = good, w.put4(d, 28, -1), expect_error(d, "entries cannot fit");
  // The first entry, at 32: length, name offset, vector length, data offset.
  d = good, w.put4(d, 32, 0), expect_error(d, "has length 0");
  d = good, w.put4(d, 32, 1 << 24), expect_error(d, "has length");
  d = good, w.put4(d, 36, 4), expect_error(d, "name at 4");
  d = good, w.put4(d, 36, 4000), expect_error(d, "name at 4000");
  d = good, w.put4(d, 48, 4000), expect_error(d, "value outside the entry");
  d = good, w.put4(d, 48, -8), expect_error(d, "value outside the entry");
  d = good, d[32 + 20] = '\x01', expect_error(d, "not a counter name");
  {
    // A name running to the end of its entry without a NUL.
    d = good;
    int32_t length = 0;
    std::memcpy(&length, &d[32], 4);
    for (int32_t i = 20; i < length; ++i) d[32 + static_cast<size_t>(i)] = 'a';
    expect_error(d, "without its terminating NUL");
  }
  {
    // The string entry (the second) claiming more bytes than it has.
    d = good;
    int32_t first = 0;
    std::memcpy(&first, &d[32], 4);
    size_t second = 32 + static_cast<size_t>(first);
    w.put4(d, second + 8, 4096);
    expect_error(d, "bytes outside the entry");
    w.put4(d, second + 8, -1);
    expect_error(d, "negative length");
  }
}

TEST_CASE("hsperf: every truncation of a real file is an error, never a crash", "[hsperf]") {
  std::string data = fixture("hsperfdata-g1.bin");
  int32_t used = 0;
  std::memcpy(&used, &data[8], 4);  // little endian on x86
  REQUIRE(used == 12352);
  for (size_t n = 0; n <= data.size(); n += (n < static_cast<size_t>(used) + 64 ? 1 : 997)) {
    auto r = parse(data.substr(0, n));
    if (n >= static_cast<size_t>(used)) {
      CHECK(r);
    } else {
      REQUIRE(!r);
      CHECK(contains(r.error(), "/tmp/hsperfdata_x/42: "));
    }
  }
}

TEST_CASE("hsperf: garbage and bit flips never crash", "[hsperf]") {
  std::mt19937 rng(1234);
  std::string data = fixture("hsperfdata-g1.bin");
  // Random bytes, then random bytes behind a valid magic.
  for (int round = 0; round < 200; ++round) {
    std::string junk(rng() % 2048, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    CHECK(!parse(junk));
    if (junk.size() >= 6) {
      junk[0] = '\xca', junk[1] = '\xfe', junk[2] = '\xc0', junk[3] = '\xc0', junk[4] = 1, junk[5] = 2;
      auto r = parse(junk);
      if (!r) CHECK(contains(r.error(), "/tmp/hsperfdata_x/42: "));
    }
  }
  // Flipped bytes in the part in use: errors or counters, always bounded.
  for (int round = 0; round < 2000; ++round) {
    std::string d = data;
    for (int flips = 0; flips < 4; ++flips) d[rng() % 12352] ^= static_cast<char>(1 + rng() % 255);
    auto r = parse(d);
    if (!r) CHECK(contains(r.error(), "/tmp/hsperfdata_x/42: "));
  }
}

TEST_CASE("hsperf: finding a JVM's file through its root, as for a container", "[hsperf]") {
  TempDir dir;
  fs::path root = dir.path / "proc" / "4242" / "root";
  fs::create_directories(root / "tmp");
  auto place = [&](const std::string& user, const std::string& leaf, time_t mtime) {
    fs::path d = root / "tmp" / ("hsperfdata_" + user);
    fs::create_directories(d);
    std::ofstream(d / leaf) << "x";
    struct timespec times[2] = {{mtime, 0}, {mtime, 0}};
    utimensat(AT_FDCWD, (d / leaf).c_str(), times, 0);
    return (d / leaf).string();
  };
  // As java::inspect_jvm finds it: host pid 4242, pid 7 in its namespace.
  java::JvmProcess jvm;
  jvm.pid = 4242;
  jvm.ns_pid = 7;
  jvm.uid = geteuid();
  jvm.root = root.string();

  SECTION("named after its namespace pid") {
    place("bob", "4242", 1000);  // the host pid: not the JVM's name for it
    std::string want = place("app", "7", 1000);
    auto found = hsperf::find_file(jvm);
    REQUIRE(found);
    CHECK(*found == want);
  }
  SECTION("without a namespace (or NSpid, Linux before 4.1), the pid itself") {
    jvm.ns_pid = jvm.pid;
    std::string want = place("app", "4242", 1000);
    CHECK(hsperf::find_file(jvm) == want);
  }
  SECTION("several users' files: the newest of the JVM's user") {
    place("old", "7", 1000);
    std::string want = place("new", "7", 2000);
    CHECK(hsperf::find_file(jvm) == want);
  }
  SECTION("none: the error says where it looked") {
    place("app", "8", 1000);
    auto found = hsperf::find_file(jvm);
    REQUIRE(!found);
    CHECK(contains(found.error(), "no hsperfdata file for JVM 4242"));
    CHECK(contains(found.error(), "/root/tmp/hsperfdata_*/7"));
  }
  SECTION("no such root: the error names it") {
    jvm.root = (dir.path / "proc" / "999" / "root").string();
    auto found = hsperf::find_file(jvm);
    REQUIRE(!found);
    CHECK(contains(found.error(), "cannot look into " + jvm.root + "/tmp"));
  }
}

TEST_CASE("hsperf: a file cut short under an open reader is an error, not a SIGBUS", "[hsperf]") {
  TempDir dir;
  fs::path path = dir.path / "4242";
  std::ofstream(path, std::ios::binary) << fixture("hsperfdata-g1.bin");
  auto file = hsperf::File::open(path.string());
  REQUIRE(file);
  auto first = file->read();
  REQUIRE(first);
  CHECK(first->counters.size() == 187);
  fs::resize_file(path, 4000);
  auto second = file->read();
  REQUIRE(!second);
  CHECK(contains(second.error(), path.string() + ": truncated"));
  auto missing = hsperf::File::open((dir.path / "nope").string());
  REQUIRE(!missing);
  CHECK(contains(missing.error(), "cannot open"));
}

namespace {

constexpr int64_t MB = 1 << 20;

// A G1 JVM's telemetry with the figures that allocation depends on.
JvmTelemetry jvm(int64_t eden, int64_t young_gcs, int64_t tlab_words, int64_t fills = 10) {
  JvmTelemetry t;
  t.pid = 42;
  t.gc = "G1";
  t.frequency = 1'000'000'000;
  t.eden = {eden, 80 * MB};
  t.survivors = {2 * MB, 4 * MB};
  t.old = {10 * MB, 50 * MB};
  t.collectors = {{"G1 young collection pauses", GcRole::young, young_gcs, young_gcs * 1'000'000, 0, 0},
                  {"G1 full collection pauses", GcRole::full, 0, 0, 0, 0}};
  t.tlab = {tlab_words, fills, 0, 0, 0, 1};
  return t;
}

}  // namespace

TEST_CASE("jvm: bytes allocated between two readings", "[jvm]") {
  SECTION("no GC: eden and old grew") {
    JvmTelemetry a = jvm(10 * MB, 3, 1000), b = jvm(30 * MB, 3, 1000);
    b.old.used += MB;  // a humongous object
    JvmAllocation r = allocated_between(a, b);
    CHECK(r.known);
    CHECK(r.bytes == 21 * MB);
    CHECK(r.gcs == 0);
    CHECK(r.estimated_gcs == 0);
  }
  SECTION("one GC: eden at the GC from the TLABs it published") {
    JvmTelemetry a = jvm(70 * MB, 3, 1000), b = jvm(5 * MB, 4, 75 * MB / 8);
    JvmAllocation r = allocated_between(a, b);
    CHECK(r.bytes == (75 - 70 + 5) * MB);
    CHECK(r.gcs == 1);
    CHECK(r.estimated_gcs == 0);
  }
  SECTION("one GC, the same TLAB figures as the epoch before (a steady workload)") {
    JvmTelemetry a = jvm(70 * MB, 3, 75 * MB / 8), b = jvm(5 * MB, 4, 75 * MB / 8);
    JvmAllocation r = allocated_between(a, b);
    CHECK(r.bytes == 10 * MB);
    CHECK(r.estimated_gcs == 0);
  }
  SECTION("one GC right after another: HotSpot published no TLABs") {
    JvmTelemetry a = jvm(0, 3, 75 * MB / 8), b = jvm(MB, 4, 75 * MB / 8);
    JvmAllocation r = allocated_between(a, b);
    CHECK(r.bytes == MB);
    CHECK(r.estimated_gcs == 1);
  }
  SECTION("two GCs: the first epoch estimated like the last") {
    JvmTelemetry a = jvm(70 * MB, 3, 1000), b = jvm(5 * MB, 5, 75 * MB / 8);
    JvmAllocation r = allocated_between(a, b);
    CHECK(r.bytes == (75 - 70 + 75 + 5) * MB);
    CHECK(r.gcs == 2);
    CHECK(r.estimated_gcs == 1);
  }
  SECTION("a young GC and a full GC in one pause end one epoch") {
    JvmTelemetry a = jvm(70 * MB, 3, 1000), b = jvm(0, 4, 75 * MB / 8);
    b.collectors[0].last_entry = 5'000'000, b.collectors[0].last_exit = 6'000'000;
    b.collectors[1] = {"G1 full collection pauses", GcRole::full, 1, 0, 6'000'100, 9'000'000};
    JvmAllocation r = allocated_between(a, b);
    CHECK(r.gcs == 2);
    CHECK(r.bytes == 5 * MB);
    CHECK(r.estimated_gcs == 0);
  }
  SECTION("no eden (ZGC, Shenandoah): unknown") {
    JvmTelemetry a = jvm(70 * MB, 3, 1000), b = jvm(5 * MB, 4, 1000);
    a.eden = b.eden = {};
    CHECK(!allocated_between(a, b).known);
  }
  SECTION("fewer GCs than before: not the same JVM") {
    CHECK(!allocated_between(jvm(MB, 5, 1000), jvm(MB, 4, 1000)).known);
  }
}

TEST_CASE("jvm: readings in a GC pause are recognised", "[jvm]") {
  JvmTelemetry a = jvm(70 * MB, 3, 1000);
  a.collectors[0].last_entry = 100, a.collectors[0].last_exit = 200;
  JvmTelemetry b = a;
  CHECK(!mid_gc(a, b));
  b.collectors[0].count = 4;  // counted, entry time not yet stamped
  CHECK(mid_gc(a, b));
  b.collectors[0].last_entry = 300;  // in the pause
  CHECK(mid_gc(a, b));
  b.collectors[0].last_exit = 400;  // done
  CHECK(!mid_gc(a, b));
}

TEST_CASE("jvm: the summary for ember record", "[jvm]") {
  JvmTelemetry a = jvm(10 * MB, 3, 1000), b = jvm(30 * MB, 5, 75 * MB / 8);
  b.main_class = "Allocator";
  a.read_at = 10, b.read_at = 12;
  std::string s = summarize_jvm(a, b);
  INFO(s);
  CHECK(contains(s, "JVM 42 (Allocator, G1): heap 42.0 MB used of 134.0 MB committed"));
  CHECK(contains(s, "In 2.0 s: 2 young GCs (0.002 s), no full GC"));
  CHECK(contains(s, "~170.0 MB allocated, ~85.0 MB/s (estimated for 1 of the 2 GCs"));
  a.eden = b.eden = {};
  CHECK(contains(summarize_jvm(a, b), "allocation rate unknown"));
}

TEST_CASE("jvm: class histograms, saved and diffed", "[jvm]") {
  // What JDK 17 answers to inspectheap (and jmap -histo prints).
  std::string hotspot =
      " num     #instances         #bytes  class name (module)\n"
      "-------------------------------------------------------\n"
      "   1:           756        3754864  [I (java.base@17.0.15)\n"
      "   2:          7243         334288  [B (java.base@17.0.15)\n"
      "   3:        148000        4736000  Leaky$LeakyThing\n"
      "   4:            10            320  Foo$$Lambda$14/0x0000000800c03000\n"
      "   5:             2             64  Leaky$LeakyThing\n"  // another class loader's
      "Total        156011        8825536\n";
  auto h = parse_histogram(hotspot, "JVM 42");
  REQUIRE(h);
  REQUIRE(h->classes.size() == 4);
  CHECK(h->classes[0].name == "Leaky$LeakyThing");
  CHECK(h->classes[0].instances == 148002);
  CHECK(h->classes[0].bytes == 4736064);
  CHECK(h->classes[1].name == "[I");
  CHECK(h->classes[3].name == "Foo$$Lambda$14/0x0000000800c03000");
  CHECK(h->instances() == 156011);
  CHECK(h->bytes() == 8825536);

  std::string saved = histogram_text(*h, "JVM 42, all objects");
  CHECK(saved.starts_with("# ember class histogram: JVM 42, all objects\n"));
  CHECK(contains(saved, "\n148002 4736064 Leaky$LeakyThing\n"));
  auto again = parse_histogram(saved, "before.histo");
  REQUIRE(again);
  CHECK(again->classes.size() == 4);
  CHECK(again->bytes() == h->bytes());

  ClassHistogram later = *h;
  later.classes[0].instances += 1000, later.classes[0].bytes += 32000;  // grew
  later.classes[1].bytes -= 1000;                                       // shrank
  later.classes.push_back({"New", 1, 16});                              // appeared
  later.classes.erase(later.classes.begin() + 3);                       // the lambda went
  auto d = diff_histograms(*h, later);
  REQUIRE(d.size() == 4);
  CHECK(d[0].name == "Leaky$LeakyThing");
  CHECK(d[0].d_bytes == 32000);
  CHECK(d[0].d_instances == 1000);
  CHECK(d[0].bytes == 4768064);
  CHECK(d[1].name == "[I");
  CHECK(d[1].d_bytes == -1000);
  CHECK(d[2].name == "Foo$$Lambda$14/0x0000000800c03000");
  CHECK(d[2].d_bytes == -320);
  CHECK(d[3].name == "New");

  // Ranked by the size of the change, either way: with -n 1, a class that
  // freed 133 MB comes before one that took 1 KB.
  ClassHistogram freed = *h;
  freed.classes[0].bytes = 0, freed.classes[0].instances = 0;  // Leaky$LeakyThing: -4736064
  freed.classes[1].bytes += 1024;                               // [I: +1024
  auto f = diff_histograms(*h, freed);
  REQUIRE(f.size() == 2);
  CHECK(f[0].name == "Leaky$LeakyThing");
  CHECK(f[0].d_bytes == -4736064);
  CHECK(f[1].name == "[I");
  // On a tie of size, the gain first.
  ClassHistogram tie = *h;
  tie.classes[2].bytes -= 320, tie.classes[3].bytes += 320;
  auto t = diff_histograms(*h, tie);
  REQUIRE(t.size() == 2);
  CHECK(t[0].d_bytes == 320);
  CHECK(t[1].d_bytes == -320);

  auto bad = parse_histogram("# ember class histogram\n10 20 A\nten 20 B\n", "x.histo");
  REQUIRE(!bad);
  CHECK(bad.error() == "x.histo:3: not a class histogram row (INSTANCES BYTES CLASS): 'ten 20 B'");
  CHECK(!parse_histogram("10 -20 A\n", "x.histo"));
  CHECK(!parse_histogram("10 20 A B\n", "x.histo"));
  auto empty = parse_histogram("# nothing\n\n", "x.histo");
  REQUIRE(!empty);
  CHECK(empty.error() == "x.histo: no class histogram rows in it");
}

TEST_CASE("a class track: classes first seen later are zero before, CSV and page data") {
  ember::ClassTrack track;
  auto keep = [](const std::string& name) { return name.find("Leak") != std::string::npos; };
  track.add(0, ember::ClassHistogram{{{"LeakA", 10, 320}, {"Other", 5, 80}}}, keep);
  track.add(0.5, ember::ClassHistogram{{{"LeakA", 20, 640}, {"Leak<B>", 1, 16}}}, keep);
  REQUIRE(track.series.size() == 2);
  CHECK(track.series[0].instances == std::vector<int64_t>{10, 20});
  CHECK(track.series[1].name == "Leak<B>");
  CHECK(track.series[1].instances == std::vector<int64_t>{0, 1});
  CHECK(track.series[1].bytes == std::vector<int64_t>{0, 16});
  CHECK(ember::track_csv(track) ==
        "seconds,class,instances,bytes\n0.000,LeakA,10,320\n0.000,Leak<B>,0,0\n0.500,LeakA,20,640\n0.500,Leak<B>,1,16\n");
  std::string page = ember::track_html(track, "t</script>", R"({"jvm":"JVM 1"})");
  size_t data = page.find(R"(<script id="ember-track" type="application/json">)");
  REQUIRE(data != std::string::npos);
  std::string json = page.substr(data, page.find("</script>", data) - data);
  CHECK(json.find("Leak\\u003cB>") != std::string::npos);  // no '<' to close the element early
  CHECK(json.find("t\\u003c/script>") != std::string::npos);
  CHECK(page.find("@EMBER_TRACK@") == std::string::npos);
}
