#include "user/fleet/otlp_export.h"

#include <charconv>
#include <map>
#include <vector>

#include "flamegraph/otlp.h"
#include "flamegraph/pprof.h"
#include "user/fleet/pyroscope.h"

namespace ember::fleet {
namespace {

// A label's OpenTelemetry attribute: the semantic conventions' name where
// one says the same thing, else the label's own (server.labels, relabeled).
flamegraph::Attribute attribute_of(const Label& l) {
  static const std::map<std::string_view, std::string_view> kNames = {
      {"service_name", "service.name"},     {"host", "host.name"},    {"container_id", "container.id"},
      {"namespace", "k8s.namespace.name"}, {"pod", "k8s.pod.name"}, {"container", "k8s.container.name"},
  };
  int64_t pid = 0;
  if (l.name == "pid" && std::from_chars(l.value.data(), l.value.data() + l.value.size(), pid).ec == std::errc())
    return {"process.pid", pid};
  auto known = kNames.find(l.name);
  return {std::string(known == kNames.end() ? std::string_view(l.name) : known->second), l.value};
}

}  // namespace

std::expected<std::string, std::string> otlp_export_request(std::string_view push_body) {
  auto series = decode_push_request(push_body);
  if (!series) return std::unexpected(series.error());
  // A resource per label set less __name__ (a service), its series' events
  // its profiles.
  std::map<std::vector<Label>, size_t> resource_of;
  std::vector<flamegraph::OtlpResource> resources;
  std::vector<flamegraph::Profile> profiles;
  profiles.reserve(series->size());
  std::vector<size_t> owner;
  for (const Series& s : *series) {
    auto profile = flamegraph::decode_pprof(s.profile);
    if (!profile) return std::unexpected("a series' profile: " + profile.error());
    std::vector<Label> labels;
    for (const Label& l : s.labels)
      if (l.name != "__name__") labels.push_back(l);
    auto [it, added] = resource_of.try_emplace(labels, resources.size());
    if (added) {
      flamegraph::OtlpResource r;
      for (const Label& l : labels) r.attributes.push_back(attribute_of(l));
      resources.push_back(std::move(r));
    }
    profiles.push_back(std::move(*profile));
    owner.push_back(it->second);
  }
  for (size_t i = 0; i < profiles.size(); ++i) resources[owner[i]].profiles.push_back(&profiles[i]);
  return flamegraph::encode_otlp(resources, {.timed = false, .process_resources = false});
}

}  // namespace ember::fleet
