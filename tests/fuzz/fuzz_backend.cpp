// Fuzz target: what the agent's backend sends back (the body of an error
// answer, a Retry-After header), and a spool file read back to be sent
// (a push request, which /ingest splits into its series).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "user/fleet/http.h"
#include "user/fleet/pyroscope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (ember::fleet::error_message(text).empty()) std::abort();
  if (auto wait = ember::fleet::parse_retry_after(text, 1'800'000'000); wait && !(*wait >= 0)) std::abort();
  if (auto series = ember::fleet::decode_push_request(text))
    for (const ember::fleet::Series& s : *series) (void)s.profile.size();
  return 0;
}
