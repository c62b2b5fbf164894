// Fuzz target: the OTLP profiles decoder (gzip and protobuf layers, the
// dictionary's indices), then a re-encode of what it accepted.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flamegraph/otlp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ember::flamegraph::is_otlp(bytes);
  auto p = ember::flamegraph::decode_otlp(bytes);
  if (p) {
    ember::flamegraph::OtlpResource r{{}, {&*p}};
    ember::flamegraph::encode_otlp(std::span(&r, 1));
  }
  return 0;
}
