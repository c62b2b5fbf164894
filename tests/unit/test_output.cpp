#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

#include <filesystem>
#include <fstream>

#include "flamegraph/output.h"

using namespace ember::flamegraph;
namespace fs = std::filesystem;

namespace {


Profile tiny() {
  Profile p;
  p.add(std::vector<FrameId>{p.intern({"main", FrameKind::Native, {}})}, 3);
  return p;
}

}  // namespace

TEST_CASE("output format follows the extension") {
  CHECK(format_for_path("x.html") == Format::Html);
  CHECK(format_for_path("dir/x.folded") == Format::Folded);
  CHECK(format_for_path("x.txt") == Format::Folded);
  auto bad = format_for_path("x.svg");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find(".html") != std::string::npos);
}

TEST_CASE("the output extensions help lists are the ones format_for_path accepts") {
  std::string listed = output_extensions_text();
  for (const OutputExtension& e : kOutputExtensions) {
    INFO(e.extension);
    CHECK(format_for_path("dir/x" + std::string(e.extension)) == e.format);
    CHECK(listed.find(e.extension) != std::string::npos);
  }
  CHECK(listed == ".html (flamegraph), .folded, .txt or .collapsed (folded stacks), .pb.gz or .pprof (pprof)");
  // Near misses are refused rather than guessed.
  for (const char* other : {"x.htm", "x.gz", "x.pb", "x.svg", "x.json", ".html"}) {
    INFO(other);
    CHECK_FALSE(format_for_path(other));
  }
}

TEST_CASE("output is written whole, with nothing left beside it") {
  TempDir dir;
  std::string path = (dir.path / "out.folded").string();
  REQUIRE(write_profile(tiny(), path));
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == "main 3");
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("an unwritable output fails with the reason and leaves nothing") {
  TempDir dir;
  std::string path = (dir.path / "missing-dir" / "out.html").string();
  auto check = check_writable(path);
  REQUIRE_FALSE(check);
  CHECK(check.error().find("No such file or directory") != std::string::npos);
  auto write = write_profile(tiny(), path);
  REQUIRE_FALSE(write);
  CHECK(fs::is_empty(dir.path));
  REQUIRE(check_writable((dir.path / "ok.html").string()));
  CHECK(fs::is_empty(dir.path));
}
