// Reading a profile file: folded stacks or pprof, told apart by content
// (gzip or protobuf bytes) rather than by name.
#pragma once

#include <expected>
#include <string>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

struct ReadResult {
  Profile profile;
  std::vector<std::string> warnings;  // skipped folded lines, with their numbers
};

std::expected<ReadResult, std::string> read_profile(const std::string& path);

}  // namespace ember::flamegraph
