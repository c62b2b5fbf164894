// Reading a profile file: folded stacks, pprof, OpenTelemetry profiles
// (OTLP) or ember's own HTML flamegraph, told apart by content (gzip,
// protobuf or HTML bytes) rather than by name.
#pragma once

#include <expected>
#include <string>
#include <vector>

#include "flamegraph/pprof.h"
#include "flamegraph/profile.h"

namespace ember::flamegraph {

struct ReadOptions {
  // pprof: the sample type to read (pprof's -sample_index); OTLP: the
  // event; empty: the file's default (OTLP: its first profile's). Folded
  // stacks and HTML hold one graph: a name fails.
  std::string event;
};

struct ReadResult {
  Profile profile;
  std::vector<std::string> warnings;  // skipped folded lines, with their numbers
  SampleTypes sample_types;           // pprof: every sample type in the file, and the one read; OTLP: every event
};

std::expected<ReadResult, std::string> read_profile(const std::string& path, const ReadOptions& options = {});

}  // namespace ember::flamegraph
