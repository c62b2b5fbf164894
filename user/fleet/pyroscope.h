// Grafana Pyroscope's push API, as Grafana Alloy uses it: POST
// /push.v1.PusherService/Push (Connect protocol, Content-Type
// application/proto), a body of
//   PushRequest      { repeated RawProfileSeries series = 1; }
//   RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
//   LabelPair        { string name = 1; string value = 2; }
//   RawSample        { bytes raw_profile = 1; string ID = 2; }
// where raw_profile is a gzipped pprof. A series is one profile type of one
// service: __name__ (process_cpu, off_cpu, memory, ...), service_name and
// the other labels.
#pragma once

#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ember::fleet {

struct Label {
  std::string name, value;
  auto operator<=>(const Label&) const = default;
};

struct Series {
  std::vector<Label> labels;
  std::string profile;  // gzipped pprof
  std::string id;       // the sample's ID: a random UUID, so a retried push is recognisably the same
};

// The labels as Pyroscope keeps them: sorted by name, one value per name
// (the last given), none with an empty value.
std::vector<Label> normalized(std::vector<Label> labels);

// The PushRequest body of `series` (their labels normalized).
std::string encode_push_request(std::span<const Series> series);
// The series of a PushRequest body (ember's spool, for `/ingest` and for
// reading profiles back); fails on corrupt input with the reason.
std::expected<std::vector<Series>, std::string> decode_push_request(std::string_view body);

}  // namespace ember::fleet
