// Fuzz target: an HTML flamegraph's tables (flamegraph/html.h), as
// `ember convert` reads a page, past its base64 and gzip (which mutations
// would rarely get through), then written again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flamegraph/html.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = ember::flamegraph::read_page_tables(std::string_view(reinterpret_cast<const char*>(data), size));
  if (p) ember::flamegraph::html_data_json(*p, {});
  return 0;
}
