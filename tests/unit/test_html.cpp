#include <catch2/catch.hpp>

#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/html.h"

using namespace ember::flamegraph;

namespace {

// The integers of the JSON array that follows `"key":[`.
std::vector<uint64_t> json_array(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\":[");
  REQUIRE(at != std::string::npos);
  std::vector<uint64_t> out;
  std::istringstream in(json.substr(at + key.size() + 4, json.find(']', at) - at - key.size() - 4));
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoull(item));
  return out;
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

  // Sorted by ids: [a], [a,b,c], [a,b,d] -> prefix, n, ids..., weight
  CHECK(json_array(json, "stacks") == std::vector<uint64_t>{0, 1, a, 1, 1, 2, b, c, 5, 2, 1, d, 2});
  // Frame c is kind kernel (index 0) with module "[kernel]".
  auto frames = json_array(json, "frames");
  REQUIRE(frames.size() == 12);
  CHECK(frames[3 * c + 1] == 0);
  CHECK(json.find("\"total\":8") != std::string::npos);
  CHECK(json.find("\"kinds\":[\"kernel\",\"native\",\"cpp\",\"jit\",\"inlined\",\"interpreted\"") !=
        std::string::npos);
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
  CHECK(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)") != std::string::npos);
  CHECK(html.find("say \\\"hi\\\"\\\\ \\u0026 \\u003cb\\u003e\\n") != std::string::npos);
  CHECK(html.find("\\u003ctitle\\u003e") != std::string::npos);
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
  CHECK(html.find("<script id=\"ember-data\" type=\"application/json\">{\"version\":1,") != std::string::npos);
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
  auto cut = read_html(page.substr(0, page.find("\"stacks\"")));
  REQUIRE_FALSE(cut);
  CHECK(cut.error().find("cut short") != std::string::npos);

  std::string bad_frame = page;
  size_t frames = bad_frame.find("\"frames\":[") + 10;
  bad_frame.replace(frames, 1, "9999");  // the first frame's name index
  auto missing = read_html(bad_frame);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("missing name") != std::string::npos);

  std::string bad_total = page;
  size_t total = bad_total.find("\"total\":12");
  bad_total.replace(total, 10, "\"total\":13");
  CHECK_FALSE(read_html(bad_total));

  std::string bad_version = page;
  bad_version.replace(bad_version.find("\"version\":1"), 11, "\"version\":2");
  auto v2 = read_html(bad_version);
  REQUIRE_FALSE(v2);
  CHECK(v2.error().find("version 2") != std::string::npos);

  std::string not_json = page;
  not_json.replace(not_json.find("{\"version\""), 1, "[");
  CHECK_FALSE(read_html(not_json));

  std::string template_only = page_of(recorded());
  size_t open = template_only.find("{\"version\"");
  template_only.replace(open, template_only.find("</script>", open) - open, "@EMBER_DATA@");
  auto empty = read_html(template_only);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().find("template") != std::string::npos);
}
