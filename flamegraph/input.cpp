#include "flamegraph/input.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/pprof.h"

namespace ember::flamegraph {

std::expected<ReadResult, std::string> read_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = std::move(buffer).str();
  if (in.bad()) return std::unexpected("cannot read " + path + ": read error");

  bool gzip = bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b;
  // Uncompressed pprof starts with field 1 (sample_type, length-delimited).
  bool protobuf = !bytes.empty() && bytes[0] == 0x0a && (path.ends_with(".pb") || path.ends_with(".pprof"));
  if (gzip || protobuf) {
    auto profile = decode_pprof(bytes);
    if (!profile) return std::unexpected(path + ": " + profile.error());
    return ReadResult{std::move(*profile), {}};
  }
  std::istringstream text(std::move(bytes));
  auto folded = read_folded(text);
  if (!folded) return std::unexpected(path + ": " + folded.error());
  return ReadResult{std::move(folded->profile), std::move(folded->warnings)};
}

}  // namespace ember::flamegraph
