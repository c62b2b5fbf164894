// Fuzz target: the pprof decoder (gzip and protobuf layers), then a
// re-encode of what it accepted.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flamegraph/pprof.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = ember::flamegraph::decode_pprof(std::string_view(reinterpret_cast<const char*>(data), size));
  if (p) ember::flamegraph::encode_pprof(*p);
  return 0;
}
