#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "flamegraph/output.h"

using namespace ember::flamegraph;
namespace fs = std::filesystem;

namespace {

Profile tiny() {
  Profile p;
  p.add(std::vector<FrameId>{p.intern({"main", FrameKind::Native, {}})}, 3);
  return p;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct stat stat_of(const fs::path& path) {
  struct stat st{};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st;
}

// Sets a variable for one test; puts back what was there.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* v = getenv(name.c_str())) old = v;
    if (value)
      setenv(name.c_str(), value, 1);
    else
      unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

struct ScopedUmask {
  mode_t old;
  explicit ScopedUmask(mode_t mask) : old(umask(mask)) {}
  ~ScopedUmask() { umask(old); }
};

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
  CHECK(listed ==
        ".html (flamegraph), .folded, .txt or .collapsed (folded stacks), .pb.gz or .pprof (pprof), .otlp (OpenTelemetry "
        "profiles)");
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

TEST_CASE("output is 0644 less the umask: never writable by others") {
  TempDir dir;
  fs::path path = dir.path / "out.folded";
  {
    ScopedUmask open(0);
    REQUIRE(write_profile(tiny(), path.string()));
    CHECK((stat_of(path).st_mode & 07777) == 0644);
  }
  {
    ScopedUmask group_only(027);
    REQUIRE(write_profile(tiny(), path.string()));
    CHECK((stat_of(path).st_mode & 07777) == 0640);
  }
}

TEST_CASE("a link at the output name is replaced, not written through") {
  TempDir dir;
  fs::path victim = dir.path / "victim";
  std::ofstream(victim) << "keep\n";
  fs::path path = dir.path / "out.folded";
  fs::create_symlink(victim, path);
  REQUIRE(write_profile(tiny(), path.string()));
  CHECK(S_ISREG(stat_of(path).st_mode));
  CHECK(read_all(path) == "main 3\n");
  CHECK(read_all(victim) == "keep\n");
  fs::path dangling = dir.path / "dangling.folded";
  fs::create_symlink(dir.path / "nowhere", dangling);
  REQUIRE(write_profile(tiny(), dangling.string()));
  CHECK(S_ISREG(stat_of(dangling).st_mode));
  CHECK_FALSE(fs::exists(dir.path / "nowhere"));
}

TEST_CASE("a write that fails at the rename leaves no temporary file") {
  TempDir dir;
  fs::path busy = dir.path / "busy.folded";  // a directory with something in it: rename() refuses
  fs::create_directory(busy);
  std::ofstream(busy / "inside") << "x";
  auto written = write_profile(tiny(), busy.string());
  REQUIRE_FALSE(written);
  CHECK(written.error().starts_with("cannot write " + busy.string()));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("under sudo, outputs belong to the user who ran it") {
  if (geteuid() != 0) {
    WARN("not root: the owner cannot be given away; not tested");
    return;
  }
  TempDir dir;
  fs::path path = dir.path / "out.html";
  {
    ScopedEnv uid("SUDO_UID", "65534"), gid("SUDO_GID", "65533");
    REQUIRE(write_profile(tiny(), path.string()));
    CHECK(stat_of(path).st_uid == 65534);
    CHECK(stat_of(path).st_gid == 65533);
  }
  ScopedEnv gid("SUDO_GID", nullptr);
  for (const char* bad : {"", "65534x", "-1", "4294967295", "99999999999", " 65534"}) {
    ScopedEnv uid("SUDO_UID", bad);
    CAPTURE(bad);
    CHECK_FALSE(invoking_user());
    REQUIRE(write_profile(tiny(), path.string()));
    CHECK(stat_of(path).st_uid == 0);
  }
  ScopedEnv uid("SUDO_UID", "1000");
  auto owner = invoking_user();
  REQUIRE(owner);
  CHECK(owner->uid == 1000);
  CHECK(owner->gid == static_cast<gid_t>(-1));
}
