// Reading the fleet agent's spool back: one service's profiles of one type
// over a time range, merged into one profile (`ember convert SPOOL`).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include "flamegraph/profile.h"

namespace ember::fleet {

struct SpoolQuery {
  std::string service;              // service_name; empty: an error listing the services there
  std::string type = "process_cpu";  // __name__, or ember's event name (cpu, offcpu, ...)
  uint64_t from_ns = 0;             // periods that overlap [from, to), Unix time
  uint64_t to_ns = UINT64_MAX;
};

// The merged profile, its start and duration spanning the periods read.
// Fails with the services (or types) the range holds when none matches.
std::expected<flamegraph::Profile, std::string> merge_spool(const std::string& dir, const SpoolQuery& query);

// "1764129600" (Unix seconds) or "2026-11-26T03:00[:00][Z]" (UTC): Unix ns.
std::optional<uint64_t> parse_time(const std::string& text);

}  // namespace ember::fleet
