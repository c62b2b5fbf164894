#include <catch2/catch.hpp>

#include <sstream>

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
