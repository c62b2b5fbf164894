#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "tests/unit/temp_dir.h"
#include "user/session/cgroup.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

const Cgroup2Mount kPure{"/sys/fs/cgroup", "/"};
const Cgroup2Mount kHybrid{"/sys/fs/cgroup/unified", "/"};

}  // namespace

TEST_CASE("the cgroup2 mount is read from mountinfo, v1 mounts passed over") {
  const char* hybrid =
      "35 25 0:30 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
      "36 35 0:31 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "41 35 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n";
  auto m = find_cgroup2_mount(hybrid);
  REQUIRE(m);
  CHECK(m->point == "/sys/fs/cgroup/unified");
  CHECK(m->root == "/");
  // In a container, the mount may show a cgroup below the hierarchy's root.
  auto ct = find_cgroup2_mount("1130 1120 0:29 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup rw\n");
  REQUIRE(ct);
  CHECK(ct->point == "/sys/fs/cgroup");
  CHECK(ct->root == "/kubepods/pod1");
  CHECK_FALSE(find_cgroup2_mount("36 35 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"));
  CHECK_FALSE(find_cgroup2_mount(""));
}

TEST_CASE("--cgroup PATH: a directory under the mount, or a path relative to it") {
  struct Case {
    std::string path;
    Cgroup2Mount mount;
    std::string dir, name;
  } cases[] = {
      {"system.slice/foo.service", kPure, "/sys/fs/cgroup/system.slice/foo.service", "/system.slice/foo.service"},
      {"/sys/fs/cgroup/system.slice/foo.service", kPure, "/sys/fs/cgroup/system.slice/foo.service",
       "/system.slice/foo.service"},
      {"system.slice//foo.service/", kPure, "/sys/fs/cgroup/system.slice/foo.service", "/system.slice/foo.service"},
      {"./a/../b", kPure, "/sys/fs/cgroup/b", "/b"},
      {"/sys/fs/cgroup/", kPure, "/sys/fs/cgroup", "/"},
      {".", kPure, "/sys/fs/cgroup", "/"},
      {"/sys/fs/cgroup/unified/x/y", kHybrid, "/sys/fs/cgroup/unified/x/y", "/x/y"},
      {"x/y", kHybrid, "/sys/fs/cgroup/unified/x/y", "/x/y"},
      // Names as /proc/PID/cgroup gives them start at the mount's own cgroup.
      {"app", {"/sys/fs/cgroup", "/kubepods/pod1"}, "/sys/fs/cgroup/app", "/kubepods/pod1/app"},
      {"/sys/fs/cgroup", {"/sys/fs/cgroup", "/kubepods/pod1"}, "/sys/fs/cgroup", "/kubepods/pod1"},
  };
  for (const Case& c : cases) {
    INFO(c.path << " under " << c.mount.point);
    auto t = cgroup_target_of(c.path, c.mount);
    REQUIRE(t);
    CHECK(t->dir == c.dir);
    CHECK(t->name == c.name);
  }
}

TEST_CASE("--cgroup PATH outside the cgroup v2 hierarchy is refused, saying where it is") {
  for (const std::string path : {"/sys/fs/cgroup/cpu/foo", "/sys/fs/cgroupx/a", "/tmp", "../etc", "a/../../b",
                                 "/sys/fs/cgroup/unified/../cpu"}) {
    INFO(path);
    auto t = cgroup_target_of(path, kHybrid);
    REQUIRE_FALSE(t);
    CHECK(t.error() == "--cgroup '" + path +
                           "' is not in the cgroup v2 hierarchy (mounted at /sys/fs/cgroup/unified): give a "
                           "directory under it, or a path relative to it (system.slice/foo.service)");
  }
  auto empty = cgroup_target_of("", kPure);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().find("/sys/fs/cgroup/system.slice/foo.service") != std::string::npos);
}

TEST_CASE("--cgroup: a path that is no cgroup, or too many of them") {
  auto missing = resolve_cgroups({"ember-no-such-cgroup-xyz"});
  REQUIRE_FALSE(missing);
  // Without a cgroup2 mount (a test container may have none) the error says so instead.
  CHECK((missing.error().starts_with("no cgroup 'ember-no-such-cgroup-xyz' (--cgroup): ") ||
         missing.error().starts_with("--cgroup needs cgroup v2")));
  auto many = resolve_cgroups(std::vector<std::string>(17, "a"));
  REQUIRE_FALSE(many);
  CHECK(many.error() == "at most 16 cgroups (--cgroup): give their common parent instead");
  auto none = resolve_cgroups({});
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE("a process's cgroup v2, and whether it lies in a target") {
  CHECK(cgroup2_of("12:memory:/x\n1:name=systemd:/y\n0::/system.slice/foo.service\n") ==
        "/system.slice/foo.service");
  CHECK(cgroup2_of("0::/\n") == "/");
  CHECK_FALSE(cgroup2_of("4:memory:/docker/abc\n"));
  CHECK(cgroup_within("/a/b", "/a"));
  CHECK(cgroup_within("/a", "/a"));
  CHECK(cgroup_within("/a/b/c", "/a/b"));
  CHECK_FALSE(cgroup_within("/ab", "/a"));
  CHECK_FALSE(cgroup_within("/", "/a"));
  CHECK(cgroup_within("/a", "/"));
  CHECK(cgroup_within("/", "/"));
}

TEST_CASE("a cgroup id names its directory by inode number") {
  TempDir root;
  fs::create_directories(root.path / "a/b");
  fs::create_directories(root.path / "c");
  auto ino = [](const fs::path& p) {
    struct stat st{};
    REQUIRE(stat(p.c_str(), &st) == 0);
    return static_cast<uint64_t>(st.st_ino);
  };
  CHECK(cgroup_path_of_id(ino(root.path / "a/b"), root.path) == "/a/b");
  CHECK(cgroup_path_of_id(ino(root.path / "c"), root.path) == "/c");
  CHECK(cgroup_path_of_id(ino(root.path), root.path) == "/");
  uint64_t gone = ino(root.path / "c");
  fs::remove(root.path / "c");
  CHECK_FALSE(cgroup_path_of_id(gone, root.path));
}

TEST_CASE("the tally by cgroup: most records first, gone cgroups by id, then how many more") {
  TempDir root;
  fs::create_directories(root.path / "svc/child");
  struct stat st{};
  REQUIRE(stat((root.path / "svc/child").c_str(), &st) == 0);
  CgroupTally tally;
  for (int i = 0; i < 3; ++i) tally.add(st.st_ino);
  tally.add(~0ull);
  auto lines = tally.summary({root.path, "/ns"}, 1);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "3 records in /ns/svc/child");
  CHECK(lines[1] == "and 1 cgroups more");
  lines = tally.summary({root.path, "/"}, 10);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "1 records in cgroup 18446744073709551615 (removed since)");
}
