// Fuzz target: an HTML flamegraph's tables (flamegraph/html.h), read back
// as `ember convert` reads a page. The input is the unpacked tables; the
// harness wraps them (gzip, base64, a JSON header) so that mutations reach
// the table reader rather than die in gzip's checksum.
#include <cstddef>
#include <cstdint>
#include <string>

#include "flamegraph/gzip.h"
#include "flamegraph/html.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string packed = ember::flamegraph::gzip(std::string_view(reinterpret_cast<const char*>(data), size));
  std::string page = R"(<script id="ember-data" type="application/json">{"version":2,"event":"cpu-clock",)"
                     R"("unit":"samples","kinds":["kernel","native","cpp","jit"],"tables":")";
  for (size_t i = 0; i < packed.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(packed[i]) << 16;
    if (i + 1 < packed.size()) v |= static_cast<uint8_t>(packed[i + 1]) << 8;
    if (i + 2 < packed.size()) v |= static_cast<uint8_t>(packed[i + 2]);
    for (size_t k = 0; k < 4; ++k) page += i + k <= packed.size() ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  page += "\"}</script>";
  auto r = ember::flamegraph::read_html(page);
  if (r) ember::flamegraph::html_data_json(r->profile, {});
  return 0;
}
