#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "user/host.h"

using namespace ember;
namespace fs = std::filesystem;

TEST_CASE("host facts from a fake /proc and /sys") {
  std::string t = (fs::temp_directory_path() / "ember-host-XXXXXX").string();
  fs::path root = mkdtemp(t.data());
  fs::create_directories(root / "proc/sys/kernel");
  std::ofstream(root / "proc/sys/kernel/perf_event_max_sample_rate") << "25000\n";
  std::ofstream(root / "proc/sys/kernel/perf_event_max_stack") << "255\n";
  HostFacts f = read_host_facts(root.string());
  CHECK_FALSE(f.has_btf);
  CHECK(f.max_sample_rate == 25000);
  CHECK(f.max_stack == 255);
  fs::remove_all(root);
}

TEST_CASE("refusals name the cause and the fix") {
  HostFacts f;
  f.can_bpf = f.can_perfmon = true;
  auto no_btf = check_can_record(f);
  REQUIRE_FALSE(no_btf);
  CHECK(no_btf.error().find("BTF") != std::string::npos);
  CHECK(no_btf.error().find("CONFIG_DEBUG_INFO_BTF") != std::string::npos);

  f.has_btf = true;
  CHECK(check_can_record(f));
  f.can_perfmon = false;
  auto no_cap = check_can_record(f);
  REQUIRE_FALSE(no_cap);
  CHECK(no_cap.error().find("CAP_PERFMON") != std::string::npos);
  CHECK(no_cap.error().find("sudo") != std::string::npos);
}
