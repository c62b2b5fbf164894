// pprof (profile.proto, gzipped): what `go tool pprof`, Pyroscope and Parca
// read. Frames become functions and locations, modules become mappings,
// the root pseudo-frames (process, thread) become labels: comm, pid,
// thread, tid. Frame kinds ride in Function.system_name as the folded
// suffixes (_[k], _[j], ...) so a round trip keeps them.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

// The gzipped pprof bytes of `profile`. Sample types: for "samples" with a
// known period, samples/count and cpu/nanoseconds; otherwise one type from
// the unit (ns -> nanoseconds, bytes -> bytes).
// `raw_bytes`, if given, receives the size before gzip (what servers limit).
std::string encode_pprof(const Profile& profile, size_t* raw_bytes = nullptr);
// Several profiles of one recording (cpu-clock, offcpu, ...) in one file:
// each brings its sample types, in order; the first is the default.
std::string encode_pprof(std::span<const Profile* const> profiles, size_t* raw_bytes = nullptr);

// A pprof's sample types by name, in order, and the one read.
struct SampleTypes {
  std::vector<std::string> names;
  size_t read = 0;
};

// Reads gzipped or plain pprof bytes; the value is the sample type named
// `sample_type` (as `pprof -sample_index=NAME`), or without one the
// default (default_sample_type, else the last, as pprof). `types`, if
// given, receives the file's sample types. Fails on corrupt input or an
// unknown type with the reason, never by crashing.
std::expected<Profile, std::string> decode_pprof(std::string_view bytes, std::string_view sample_type = {},
                                                 SampleTypes* types = nullptr);

}  // namespace ember::flamegraph
