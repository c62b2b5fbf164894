// A period of the spool (Pyroscope's push request: a series per service
// and event) as an OTLP export request, for server.api = "otlp": a
// ResourceProfiles per service whose attributes are the series' labels by
// OpenTelemetry's names (service.name, host.name, container.id,
// k8s.namespace.name, k8s.pod.name, k8s.container.name, process.pid), a
// Profile per event, processes and threads as sample attributes.
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace ember::fleet {

// The ExportProfilesServiceRequest bytes (not gzipped) of a push request
// body; fails on a corrupt body with the reason.
std::expected<std::string, std::string> otlp_export_request(std::string_view push_body);

}  // namespace ember::fleet
