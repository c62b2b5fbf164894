#include "flamegraph/gzip.h"

#include <zlib.h>

namespace ember::flamegraph {

std::string gzip(std::string_view raw) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // +16: gzip wrapper
  std::string out(deflateBound(&z, raw.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::expected<std::string, std::string> gunzip(std::string_view in) {
  constexpr size_t kMaxInflated = size_t{2} << 30;
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return std::unexpected("zlib: cannot start inflating");  // +32: auto-detect gzip
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    size_t have = out.size();
    out.resize(have + (1 << 20));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    z.avail_out = 1 << 20;
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(have + (1 << 20) - z.avail_out);
    if (out.size() > kMaxInflated) rc = Z_MEM_ERROR;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // truncated input
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    return std::unexpected(rc == Z_MEM_ERROR ? "inflates to more than 2 GiB" : "corrupt or truncated gzip data");
  return out;
}

}  // namespace ember::flamegraph
