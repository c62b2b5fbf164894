// OpenTelemetry's profiles signal (OTLP, opentelemetry-proto v1.10.0,
// package opentelemetry.proto.profiles.v1development): a ProfilesData
// message, whose bytes are also those of an ExportProfilesServiceRequest,
// the body of an OTLP/HTTP push (POST /v1development/profiles).
//
// One ResourceProfiles per process (process.pid, process.executable.name,
// from the stacks' process frames) within each resource given (host,
// service, container and Kubernetes attributes), or one per resource
// given, one Profile per event, all sharing one dictionary. Threads ride as sample attributes
// (thread.name, thread.id), a frame's runtime as the location attribute
// profile.frame.type (kernel, native, jvm, cpython, v8js) and its exact
// kind in Function.system_name as the folded suffix, as in pprof.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

struct Attribute {
  std::string key;
  std::variant<std::string, int64_t> value;
  bool operator==(const Attribute&) const = default;
};

// Profiles of one origin: a recording, or one service's period of the
// fleet agent.
struct OtlpResource {
  std::vector<Attribute> attributes;
  std::vector<const Profile*> profiles;  // one per event
};

struct OtlpOptions {
  // Samples with times, where a profile has a timeline: CPU samples as
  // timestamps alone (a sample each), other events as a value per
  // timestamp (files). Else one summed value per stack, and every event
  // named by its period type (series_name; period 1 where none is known):
  // what Pyroscope's receiver takes, which refuses values per timestamp
  // once a period is set and names a series after the period type.
  bool timed = true;
  // Each process its own ResourceProfiles, as OpenTelemetry's eBPF
  // profiler sends them. Else its attributes go on its samples, and a
  // resource is what the caller gave (Pyroscope makes series labels of
  // resource attributes: a series per process otherwise).
  bool process_resources = true;
};

// The ProfilesData bytes (not gzipped) of `resources`.
std::string encode_otlp(std::span<const OtlpResource> resources, const OtlpOptions& options = {});

// Whether protobuf bytes (not gzipped) are OTLP's ProfilesData rather than
// pprof: only its fields 1 and 2 at the top, where a pprof always has its
// string table (field 6).
bool is_otlp(std::string_view bytes);

// Reads ProfilesData (or an export request), gzipped or not: the profiles
// of `event` (ember's event name; "cpu-clock" for samples/count) over all
// resources, as one profile whose root frames are the processes (from
// their resource's or their samples' attributes); without
// an event, the first profile's. `events`, if given, receives the events
// found, in order. Fails on corrupt input or an unknown event with the
// reason, never by crashing.
std::expected<Profile, std::string> decode_otlp(std::string_view bytes, std::string_view event = {},
                                                std::vector<std::string>* events = nullptr);

}  // namespace ember::flamegraph
