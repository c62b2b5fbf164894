#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "user/host/host.h"

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

TEST_CASE("one frequency rule for record and serve: 1 to kernel.perf_event_max_sample_rate") {
  HostFacts f;
  f.max_sample_rate = 25000;
  CHECK(check_frequency(1, f));
  CHECK(check_frequency(25000, f));
  for (uint64_t hz : {uint64_t{0}, uint64_t{25001}, uint64_t{1} << 40}) {
    auto r = check_frequency(hz, f);
    REQUIRE(!r);
    CHECK(r.error() == "frequency " + std::to_string(hz) +
                           " Hz is out of range: use a frequency between 1 and 25000 Hz (kernel.perf_event_max_sample_rate)");
  }
  f.max_sample_rate = 0;  // the sysctl could not be read: the kernel decides
  CHECK(check_frequency(1000000, f));
  CHECK(!check_frequency(0, f));
}
