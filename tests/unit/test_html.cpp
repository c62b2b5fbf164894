#include <catch2/catch.hpp>

#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/gzip.h"
#include "flamegraph/html.h"
#include "gunzip.h"

using namespace ember::flamegraph;

namespace {

// The page's tables (flamegraph/html.h), unpacked by the test's own means:
// its base64 and varint readers, zlib's inflate.
std::string unbase64(std::string_view in) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    v = v << 6 | static_cast<uint32_t>(kAlphabet.find(c));
    if ((bits += 6) >= 8) out += static_cast<char>((v >> (bits -= 8)) & 0xff);
  }
  return out;
}

std::string tables_of(const std::string& json) {
  size_t at = json.find("\"tables\":\"");
  REQUIRE(at != std::string::npos);
  at += 10;
  return gunzipped(unbase64(json.substr(at, json.find('"', at) - at)));
}

struct Tables {
  std::vector<std::string> names, modules;
  std::vector<uint64_t> frames, stacks, base;  // frames: triples; stacks: count, then as written
  std::vector<uint64_t> timeline;                // count, then (ms since the last, stack, weight) each
};

Tables unpack(const std::string& bytes) {
  size_t at = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      REQUIRE(at < bytes.size());
      auto b = static_cast<uint8_t>(bytes[at++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  };
  auto strings = [&] {
    uint64_t count = varint(), length = varint();
    std::vector<std::string> out;
    std::string_view block = std::string_view(bytes).substr(at, length);
    at += length;
    for (size_t from = 0; from < block.size();) {
      size_t nul = block.find('\0', from);
      out.emplace_back(block.substr(from, nul - from));
      from = nul + 1;
    }
    CHECK(out.size() == count);
    return out;
  };
  auto stacks = [&] {
    std::vector<uint64_t> out{varint()};
    for (uint64_t s = 0; s < out[0]; ++s) {
      out.push_back(varint());
      uint64_t n = varint();
      out.push_back(n);
      for (uint64_t k = 0; k <= n; ++k) out.push_back(varint());
    }
    return out;
  };
  Tables t;
  t.names = strings();
  t.modules = strings();
  for (uint64_t k = varint() * 3; k > 0; --k) t.frames.push_back(varint());
  t.stacks = stacks();
  t.base = stacks();
  t.timeline = {varint()};
  for (uint64_t k = t.timeline[0] * 3; k > 0; --k) t.timeline.push_back(varint());
  CHECK(at == bytes.size());
  return t;
}

std::string page_of_json(const std::string& json) {
  return R"(<script id="ember-data" type="application/json">)" + json + "</script>";
}

}  // namespace

TEST_CASE("html data: stacks are delta-coded and decode to the profile") {
  Profile p;
  FrameId a = p.intern({"a", FrameKind::Process, {}});
  FrameId b = p.intern({"b", FrameKind::Native, "/bin/x"});
  FrameId c = p.intern({"c", FrameKind::Kernel, "[kernel]"});
  FrameId d = p.intern({"d", FrameKind::Native, "/bin/x"});
  p.add(std::vector<FrameId>{a, b, c}, 5);
  p.add(std::vector<FrameId>{a, b, d}, 2);
  p.add(std::vector<FrameId>{a}, 1);
  std::string json = html_data_json(p, {});
  Tables t = unpack(tables_of(json));

  // Sorted by ids: [a], [a,b,c], [a,b,d] -> count, then prefix, n, ids..., weight
  CHECK(t.stacks == std::vector<uint64_t>{3, 0, 1, a, 1, 1, 2, b, c, 5, 2, 1, d, 2});
  CHECK(t.base == std::vector<uint64_t>{0});
  CHECK(t.timeline == std::vector<uint64_t>{0});
  CHECK(json.find("time_step_ms") == std::string::npos);
  CHECK(t.names == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(t.modules == std::vector<std::string>{"", "/bin/x", "[kernel]"});
  // Frame c is kind kernel (index 0) with module "[kernel]".
  REQUIRE(t.frames.size() == 12);
  CHECK(t.frames[3 * c + 1] == 0);
  CHECK(t.modules[t.frames[3 * c + 2]] == "[kernel]");
  CHECK(json.find("\"version\":2,") != std::string::npos);
  CHECK(json.find("\"total\":8") != std::string::npos);
  CHECK(json.find("\"kinds\":[\"kernel\",\"native\",\"cpp\",\"jit\",\"inlined\",\"interpreted\"") !=
        std::string::npos);
}

TEST_CASE("html data: the timeline, in milliseconds, each stack's weight in one millisecond summed") {
  Profile p;
  FrameId a = p.intern({"a", FrameKind::Native, {}}), b = p.intern({"b", FrameKind::Native, {}});
  uint32_t sa = p.add(std::vector<FrameId>{a}, 3), sb = p.add(std::vector<FrameId>{a, b}, 4);
  // Written in the page's order: [a] is stack 0, [a, b] stack 1.
  p.timeline = {{400'000, 1, sa}, {900'000, 1, sa}, {900'000, 2, sb}, {2'500'700'000, 1, sa}, {2'501'000'000, 2, sb}};
  std::string json = html_data_json(p, {});
  CHECK(unpack(tables_of(json)).timeline == std::vector<uint64_t>{4, 0, 0, 2, 0, 1, 2, 2500, 0, 1, 1, 1, 2});
  CHECK(json.find("\"time_step_ms\":1,") != std::string::npos);

  auto back = read_html(page_of_json(json));
  REQUIRE(back);
  const Profile& r = back->profile;
  REQUIRE(r.timeline.size() == 4);
  auto stack_of = [&](const Timed& t) { return r.stacks()[t.stack].frames.size(); };
  CHECK((r.timeline[0].time_ns == 0 && r.timeline[0].weight == 2 && stack_of(r.timeline[0]) == 1));
  CHECK((r.timeline[1].time_ns == 0 && r.timeline[1].weight == 2 && stack_of(r.timeline[1]) == 2));
  CHECK((r.timeline[2].time_ns == 2'500'000'000 && stack_of(r.timeline[2]) == 1));
  CHECK((r.timeline[3].time_ns == 2'501'000'000 && stack_of(r.timeline[3]) == 2));
  CHECK(r.time_step_ns == 0);

  // A merged spool's: as precise as its periods.
  p.time_step_ns = 15'000'000'000;
  auto coarse = read_html(page_of_json(html_data_json(p, {})));
  REQUIRE(coarse);
  CHECK(coarse->profile.time_step_ns == 15'000'000'000);

  // A differential page has none: NEW and BASE each had their own times.
  Profile base = p;
  HtmlOptions diff;
  diff.base = &base;
  CHECK(html_data_json(p, diff).find("time_step_ms") == std::string::npos);

  // Times that do not add up to the stacks: damaged.
  p.timeline.pop_back();
  auto short_timeline = read_html(page_of_json(html_data_json(p, {})));
  REQUIRE_FALSE(short_timeline);
  CHECK(short_timeline.error().find("timeline does not add up") != std::string::npos);
}

TEST_CASE("html data: names cannot break out of the script element") {
  Profile p;
  FrameId evil = p.intern({"</script><script>alert(1)</script>", FrameKind::Native, {}});
  FrameId quote = p.intern({"say \"hi\"\\ & <b>\n", FrameKind::Native, {}});
  p.add(std::vector<FrameId>{evil, quote}, 1);
  std::ostringstream out;
  HtmlOptions options;
  options.title = "<title>";
  write_html(p, options, out);
  std::string html = out.str();
  CHECK(html.find("</script><script>alert") == std::string::npos);
  CHECK(html.find("\\u003ctitle\\u003e") != std::string::npos);
  // The names ride in the tables, whole.
  auto back = read_html(html);
  REQUIRE(back);
  CHECK(folded_text(back->profile) == folded_text(p));
}

TEST_CASE("html data: a starting view rides as escaped JSON text") {
  Profile p;
  p.add(std::vector<FrameId>{p.intern({"main", FrameKind::Native, {}})}, 1);
  HtmlOptions options;
  options.view = R"({"transforms":[{"kind":"remove","re":"</script>"}]})";
  std::string json = html_data_json(p, options);
  CHECK(json.find(R"("view":"{\"transforms\":[{\"kind\":\"remove\",\"re\":\"\u003c/script\u003e\"}]}")") !=
        std::string::npos);
  CHECK(html_data_json(p, {}).find("\"view\"") == std::string::npos);
}

TEST_CASE("html page: template embedded and the placeholder filled exactly once") {
  Profile p;
  p.add(std::vector<FrameId>{p.intern({"main", FrameKind::Native, {}})}, 3);
  std::ostringstream out;
  write_html(p, {}, out);
  std::string html = out.str();
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("@EMBER_DATA@") == std::string::npos);
  CHECK(html.find("<script id=\"ember-data\" type=\"application/json\">{\"version\":2,") != std::string::npos);
  CHECK(html.find("</html>") != std::string::npos);
}

namespace {

std::string page_of(const Profile& p, const HtmlOptions& options = {}) {
  std::ostringstream out;
  write_html(p, options, out);
  return out.str();
}

Profile recorded() {
  Profile p;
  p.period_ns = 10'101'010;
  p.start_unix_ns = 1'700'000'000'000'000'000;
  p.duration_ns = 2'500'000'000;
  p.info = {{"samples", "12"}, {"lost", "0"}, {"host", "h<1>"}};
  FrameId proc = p.intern({"app (42)", FrameKind::Process, {}});
  FrameId main = p.intern({"main", FrameKind::Native, "/usr/bin/app"});
  FrameId jit = p.intern({"Foo.run", FrameKind::Jit, {}});
  FrameId inl = p.intern({"Foo.<init>", FrameKind::Inlined, {}});
  FrameId sys = p.intern({"vfs_read", FrameKind::Kernel, "[kernel]"});
  p.add(std::vector<FrameId>{proc, main, jit, inl}, 7);
  p.add(std::vector<FrameId>{proc, main, jit, sys}, 3);
  p.add(std::vector<FrameId>{proc, main}, 2);
  return p;
}

}  // namespace

TEST_CASE("html page: read back, it is the profile that was written") {
  Profile p = recorded();
  auto back = read_html(page_of(p));
  REQUIRE(back);
  CHECK_FALSE(back->differential);
  CHECK(folded_text(back->profile) == folded_text(p));
  CHECK(back->profile.total() == 12);
  CHECK(back->profile.event == "cpu-clock");
  CHECK(back->profile.unit == "samples");
  CHECK(back->profile.period_ns == p.period_ns);
  CHECK(back->profile.start_unix_ns == p.start_unix_ns);
  CHECK(back->profile.duration_ns == p.duration_ns);
  CHECK(back->profile.info == p.info);  // in order
  for (const Frame& f : back->profile.frames())
    if (f.name == "main") CHECK(f.module == "/usr/bin/app");
}

TEST_CASE("html page: a differential page reads as its NEW profile, without BASE's frames") {
  Profile now = recorded(), base;
  base.add(std::vector<FrameId>{base.intern({"only_in_base", FrameKind::Native, {}})}, 5);
  HtmlOptions options;
  options.base = &base;
  options.base_label = "before.folded";
  auto back = read_html(page_of(now, options));
  REQUIRE(back);
  CHECK(back->differential);
  CHECK(back->base_label == "before.folded");
  CHECK(folded_text(back->profile) == folded_text(now));
  for (const Frame& f : back->profile.frames()) CHECK(f.name != "only_in_base");
}

TEST_CASE("html page: other pages and damaged data are refused with the reason") {
  auto foreign = read_html("<!DOCTYPE html><html><body><script>var x = 1;</script></body></html>");
  REQUIRE_FALSE(foreign);
  CHECK(foreign.error().find("not an ember flamegraph") != std::string::npos);

  std::string page = page_of(recorded());
  // The data's fields, past the preview's copies of them.
  size_t data = page.find("id=\"ember-data\"");
  auto cut = read_html(page.substr(0, page.find("\"tables\"", data)));
  REQUIRE_FALSE(cut);
  CHECK(cut.error().find("cut short") != std::string::npos);

  // Tables made by hand: a frame whose name is not in the names table; a
  // stack cut short; tables that go on past their end.
  auto page_with = [](const std::string& tables) {
    std::string packed = gzip(tables), b64;
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < packed.size(); i += 3) {
      uint32_t v = static_cast<uint8_t>(packed[i]) << 16;
      if (i + 1 < packed.size()) v |= static_cast<uint8_t>(packed[i + 1]) << 8;
      if (i + 2 < packed.size()) v |= static_cast<uint8_t>(packed[i + 2]);
      for (int k = 0; k < 4; ++k) b64 += i + k <= packed.size() ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
    }
    return R"(<script id="ember-data" type="application/json">{"version":2,"event":"cpu-clock","unit":"samples",)"
           R"("kinds":["kernel","native"],"tables":")" + b64 + "\"}</script>";
  };
  // names: 1 "a"; modules: 1 ""; frames: 1 (name, kind, module); stacks...
  const std::string head("\x01\x02" "a\0" "\x01\x01\0" "\x01", 8);
  REQUIRE(read_html(page_with(head + std::string("\x00\x01\x00" "\x01\x00\x01\x00\x07" "\x00", 9))));
  auto missing = read_html(page_with(head + std::string("\x05\x01\x00" "\x01\x00\x01\x00\x07" "\x00", 9)));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("missing name") != std::string::npos);
  auto short_stack = read_html(page_with(head + std::string("\x00\x01\x00" "\x01\x00\x03\x00", 7)));
  REQUIRE_FALSE(short_stack);
  CHECK(short_stack.error().find("cut short") != std::string::npos);
  auto long_tables = read_html(page_with(head + std::string("\x00\x01\x00" "\x01\x00\x01\x00\x07" "\x00\x00\x09", 11)));
  REQUIRE_FALSE(long_tables);
  CHECK(long_tables.error().find("past their end") != std::string::npos);

  std::string not_base64 = page;
  not_base64.replace(not_base64.find("\"tables\":\"", data) + 10, 1, "!");
  CHECK_FALSE(read_html(not_base64));

  std::string bad_total = page;
  size_t total = bad_total.find("\"total\":12", data);
  bad_total.replace(total, 10, "\"total\":13");
  CHECK_FALSE(read_html(bad_total));

  std::string bad_version = page;
  bad_version.replace(bad_version.find("\"version\":2", data), 11, "\"version\":3");
  auto v3 = read_html(bad_version);
  REQUIRE_FALSE(v3);
  CHECK(v3.error().find("version 3") != std::string::npos);

  std::string not_json = page;
  not_json.replace(not_json.find("{\"version\"", data), 1, "[");
  CHECK_FALSE(read_html(not_json));

  std::string template_only = page_of(recorded());
  size_t open = template_only.find("{\"version\"", data);
  template_only.replace(open, template_only.find("</script>", open) - open, "@EMBER_DATA@");
  auto empty = read_html(template_only);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().find("template") != std::string::npos);
}
