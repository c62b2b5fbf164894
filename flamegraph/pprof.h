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

#include "flamegraph/profile.h"

namespace ember::flamegraph {

// The gzipped pprof bytes of `profile`. Sample types: for "samples" with a
// known period, samples/count and cpu/nanoseconds; otherwise one type from
// the unit (ns -> nanoseconds, bytes -> bytes).
std::string encode_pprof(const Profile& profile);
// Several profiles of one recording (cpu-clock, offcpu, ...) in one file:
// each brings its sample types, in order; the first is the default.
std::string encode_pprof(std::span<const Profile* const> profiles);

// Reads gzipped or plain pprof bytes; the value is the default sample type
// (default_sample_type, else the first). Fails on corrupt input with the
// reason, never by crashing.
std::expected<Profile, std::string> decode_pprof(std::string_view bytes);

}  // namespace ember::flamegraph
