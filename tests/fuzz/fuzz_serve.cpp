// Fuzz target: what a client of `ember serve` sends that ember's code reads
// (cpp-httplib parses the HTTP itself): the first byte picks a part, the
// rest is its input, fields split at NUL bytes.
//   0  POST /api/start's JSON body, over settings from the same bytes
//   1  PUT /api/settings' JSON body
//   2  the token: Authorization header, ember_token cookie
//   3  the cross-site guard: X-Ember-Request, Origin, Sec-Fetch-Site, Host
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "user/serve/serve.h"

namespace {

std::vector<std::string_view> fields(std::string_view text, size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    size_t nul = text.find('\0');
    out.push_back(text.substr(0, nul));
    text = nul == text.npos ? std::string_view() : text.substr(nul + 1);
  }
  out.push_back(text);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace ember::serve;
  switch (data[0] % 4) {
  case 0: {
    auto f = fields(text, 2);
    auto settings = check_settings(nlohmann::json::parse(f[1], nullptr, false));
    (void)parse_start_request(f[0], settings ? *settings : nlohmann::json::object());
    break;
  }
  case 1:
    if (auto s = check_settings(nlohmann::json::parse(text, nullptr, false)); s && !s->is_object()) std::abort();
    break;
  case 2: {
    auto f = fields(text, 2);
    (void)token_matches(request_token(f[0], f[1]), "0123456789abcdef");
    break;
  }
  case 3: {
    auto f = fields(text, 4);
    (void)cross_site_refusal(f[0], f[1], f[2], f[3], data[0] & 4);
    break;
  }
  }
  return 0;
}
