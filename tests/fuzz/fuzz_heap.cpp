// Fuzz target: a JVM's heap dump (HPROF, user/heap/hprof.h), read for
// `ember jvm --heap`, analysed and reported as ember does.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "user/heap/heap_graph.h"
#include "user/heap/heap_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view dump(reinterpret_cast<const char*>(data), size);
  auto g = ember::heap::read_heap_graph(dump, {});
  if (g)
    if (auto a = ember::heap::analyze_heap(*g, dump, 5)) ember::heap::heap_report(*a, 5);
  return 0;
}
