// Fuzz target: the heap graph a JVM's agent streams for `ember jvm --heap`
// (agent/heap_stream.h), read, analysed and reported as ember does.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "user/java/heap_graph.h"
#include "user/java/heap_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view stream(reinterpret_cast<const char*>(data), size);
  auto g = ember::heap::read_heap_graph(stream);
  if (g)
    if (auto a = ember::heap::analyze_heap(*g, stream, 5)) ember::heap::heap_report(*a, 5);
  return 0;
}
