#include "user/fleet/pyroscope.h"

#include <algorithm>

#include "flamegraph/protobuf.h"

namespace ember::fleet {

std::vector<Label> normalized(std::vector<Label> labels) {
  // Stable: among labels of one name, the last given stays last.
  std::stable_sort(labels.begin(), labels.end(), [](const Label& a, const Label& b) { return a.name < b.name; });
  std::vector<Label> out;
  for (Label& l : labels) {
    if (!out.empty() && out.back().name == l.name)
      out.back() = std::move(l);
    else
      out.push_back(std::move(l));
  }
  std::erase_if(out, [](const Label& l) { return l.name.empty() || l.value.empty(); });
  return out;
}

std::string encode_push_request(std::span<const Series> series) {
  protobuf::Writer request;
  for (const Series& s : series) {
    protobuf::Writer raw_series;
    for (const Label& l : normalized(s.labels)) {
      protobuf::Writer pair;
      pair.bytes(1, l.name);
      pair.bytes(2, l.value);
      raw_series.message(1, pair);
    }
    protobuf::Writer sample;
    sample.bytes(1, s.profile);
    if (!s.id.empty()) sample.bytes(2, s.id);
    raw_series.message(2, sample);
    request.message(1, raw_series);
  }
  return request.str();
}

std::expected<std::vector<Series>, std::string> decode_push_request(std::string_view body) {
  std::vector<Series> out;
  protobuf::Reader request(body);
  int field, wire;
  while (request.next(field, wire)) {
    if (field != 1 || wire != protobuf::kLen) {
      request.skip(wire);
      continue;
    }
    Series s;
    protobuf::Reader series(request.bytes());
    while (series.next(field, wire)) {
      if (wire != protobuf::kLen) {
        series.skip(wire);
        continue;
      }
      protobuf::Reader inner(series.bytes());
      if (field == 1) {
        Label l;
        while (inner.next(field, wire)) {
          if (wire == protobuf::kLen && field == 1) l.name = inner.bytes();
          else if (wire == protobuf::kLen && field == 2) l.value = inner.bytes();
          else inner.skip(wire);
        }
        s.labels.push_back(std::move(l));
      } else if (field == 2) {
        while (inner.next(field, wire)) {
          if (wire == protobuf::kLen && field == 1) s.profile = inner.bytes();
          else if (wire == protobuf::kLen && field == 2) s.id = inner.bytes();
          else inner.skip(wire);
        }
      }
      if (!inner.ok()) return std::unexpected("push request: a corrupt series");
    }
    if (!series.ok()) return std::unexpected("push request: a corrupt series");
    out.push_back(std::move(s));
  }
  if (!request.ok()) return std::unexpected("push request: corrupt");
  return out;
}

}  // namespace ember::fleet
