// Fuzz target: a JVM's hsperfdata file (PerfData), which the JVM's user
// writes and ember reads as root while the JVM changes it: every offset
// checked, never a read out of bounds; then the counters as `ember jvm` and
// the session ask for them.
#include <cstddef>
#include <cstdint>
#include <span>

#include "user/java/hsperf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto snapshot = ember::hsperf::parse(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  if (!snapshot) return 0;
  for (const auto& [name, counter] : snapshot->counters) {
    (void)snapshot->number(name);
    (void)snapshot->text(name);
  }
  (void)snapshot->number("sun.gc.collector.0.invocations");
  (void)snapshot->text("java.property.java.vm.version");
  return 0;
}
