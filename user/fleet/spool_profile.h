// Reading the fleet agent's spool back: one service's profiles of one type
// over a time range, merged into one profile (`ember convert SPOOL`).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::fleet {

struct SpoolQuery {
  std::string service;              // service_name
  std::string type = "process_cpu";  // __name__, or ember's event name (cpu, offcpu, ...)
  uint64_t from_ns = 0;             // periods that overlap [from, to), Unix time
  uint64_t to_ns = UINT64_MAX;
};

// The merged profile, its start and duration spanning the periods read.
// Fails with the services (or types) the range holds when none matches.
// Periods its agent removes meanwhile are left out.
std::expected<flamegraph::Profile, std::string> merge_spool(const std::string& dir, const SpoolQuery& query);

// What a spool holds: its periods, and for each service each profile type
// with the periods that have it.
struct SpoolSeries {
  std::string service;  // service_name
  std::string type;     // __name__: process_cpu, off_cpu, ...
  size_t periods = 0;
  uint64_t first_ns = 0, end_ns = 0;  // the first such period's start, the last one's end
};
struct SpoolContents {
  size_t periods = 0, pending = 0, sent = 0, rejected = 0;
  uint64_t bytes = 0;
  uint64_t first_ns = 0, end_ns = 0;
  std::vector<SpoolSeries> series;  // by service, then type
};

// A spool's contents, read again as the agent adds and removes periods:
// each period is decoded once (the series it holds kept, small), removed
// ones forgotten. Not thread-safe.
class SpoolCatalog {
 public:
  explicit SpoolCatalog(std::string dir) : dir_(std::move(dir)) {}
  std::expected<SpoolContents, std::string> contents();

 private:
  using Held = std::vector<std::pair<std::string, std::string>>;  // (service, type) of each series
  std::string dir_;
  std::map<uint64_t, Held> held_;  // by period start
};

// Whether `dir` holds periods of an agent's spool.
bool is_spool(const std::string& dir);

// "1764129600" (Unix seconds) or "2026-11-26T03:00[:00][Z]" (UTC): Unix ns.
std::optional<uint64_t> parse_time(const std::string& text);

}  // namespace ember::fleet
