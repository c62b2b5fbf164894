#include <catch2/catch.hpp>

#include <zlib.h>

#include <random>
#include <string>

#include "flamegraph/gzip.h"
#include "gunzip.h"

using namespace ember::flamegraph;

namespace {

// Text that compresses as a profile's tables do: words repeated far apart.
std::string profile_like(size_t size) {
  std::mt19937_64 random(7);
  std::vector<std::string> words;
  for (int i = 0; i < 5000; ++i) words.push_back("com.acme.Service" + std::to_string(random() % 100000) + ".run;");
  std::string out;
  while (out.size() < size) out += words[random() % words.size()];
  out.resize(size);
  return out;
}

}  // namespace

TEST_CASE("gzip: chunks deflated apart make one gzip stream that zlib reads whole, CRC and size checked") {
  for (size_t size : {size_t{0}, size_t{1}, size_t{4} << 20, (size_t{10} << 20) + 12345}) {
    std::string raw = profile_like(size);
    std::string gz = gzip(raw);
    CHECK(gunzipped(gz, raw.size() + 1) == raw);  // zlib checks the trailer's CRC-32 and size
    auto back = gunzip(gz);
    REQUIRE(back);
    CHECK(*back == raw);
  }
}

TEST_CASE("gzip: priming each chunk with the bytes before it costs almost nothing in size") {
  std::string raw = profile_like(size_t{12} << 20);
  uLongf whole_size = compressBound(raw.size());
  std::string whole(whole_size, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(whole.data()), &whole_size, reinterpret_cast<const Bytef*>(raw.data()),
                    raw.size(), Z_DEFAULT_COMPRESSION) == Z_OK);
  CHECK(gzip(raw).size() < whole_size * 101 / 100);
}
