// Test helper: the bytes of a gzip stream, inflated with zlib itself (not
// ember's reader, which is what the tests check).
#pragma once

#include <zlib.h>

#include <catch2/catch.hpp>
#include <string>

inline std::string gunzipped(const std::string& gz, size_t max_size = size_t{64} << 20) {
  std::string raw(max_size, '\0');
  z_stream z{};
  inflateInit2(&z, 15 + 16);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(raw.data());
  z.avail_out = static_cast<uInt>(raw.size());
  REQUIRE(inflate(&z, Z_FINISH) == Z_STREAM_END);
  raw.resize(z.total_out);
  inflateEnd(&z);
  return raw;
}
