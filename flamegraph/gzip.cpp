#include "flamegraph/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace ember::flamegraph {

std::string gzip(std::string_view raw) {
  // Deflated in chunks on every core, as pigz does: each chunk is primed
  // with the 32 KiB before it (its matches reach back across the cut) and
  // ends on a byte boundary (a sync flush), so the chunks in order make one
  // deflate stream; their CRCs combine. A million-stack page's tables
  // (hundreds of MB) took 4.4 s on one core. Chunks of 1 MiB: a page of
  // a few MB (a whole host's 30 s) is spread over the cores too.
  constexpr size_t kChunk = 1 << 20, kWindow = 32 << 10;
  const size_t chunks = std::max<size_t>(1, (raw.size() + kChunk - 1) / kChunk);
  std::vector<std::string> deflated(chunks);
  std::vector<uLong> crcs(chunks);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t c; (c = next++) < chunks;) {
      size_t from = c * kChunk, length = std::min(kChunk, raw.size() - from);
      z_stream z{};
      deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);  // -15: raw deflate
      if (from) {
        size_t window = std::min(kWindow, from);
        deflateSetDictionary(&z, reinterpret_cast<const Bytef*>(raw.data() + from - window), static_cast<uInt>(window));
      }
      std::string& out = deflated[c];
      out.resize(deflateBound(&z, length) + 16);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + from));
      z.avail_in = static_cast<uInt>(length);
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      deflate(&z, c + 1 == chunks ? Z_FINISH : Z_SYNC_FLUSH);
      out.resize(z.total_out);
      deflateEnd(&z);
      crcs[c] = crc32(0, reinterpret_cast<const Bytef*>(raw.data() + from), static_cast<uInt>(length));
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min<size_t>(chunks, std::thread::hardware_concurrency()); ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();

  std::string out("\x1f\x8b\x08\0\0\0\0\0\0\xff", 10);  // gzip, deflate, no name, no time, unknown OS
  uLong crc = crc32(0, nullptr, 0);
  for (size_t c = 0; c < chunks; ++c) {
    out += deflated[c];
    crc = crc32_combine(crc, crcs[c], static_cast<z_off_t>(std::min(kChunk, raw.size() - c * kChunk)));
  }
  for (uint64_t v : {uint64_t{crc}, uint64_t{raw.size()}})  // CRC-32 and the size mod 2^32, little-endian
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
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

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b;
}

std::expected<std::string_view, std::string> inflated(std::string_view bytes, std::string& storage) {
  if (!is_gzip(bytes)) return bytes;
  auto raw = gunzip(bytes);
  if (!raw) return std::unexpected(raw.error());
  storage = std::move(*raw);
  return storage;
}

}  // namespace ember::flamegraph
