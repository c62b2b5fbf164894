// Bytes allocated by Java code: the JVMs' agents sample allocations
// (JVMTI SampledObjectAlloc) and stream them; no kernel records feed it.
#include "agent/protocol.h"
#include "user/events/event.h"

namespace ember::events {
namespace {

std::expected<void, std::string> check(const Resolved& s, const Scope& scope) {
  if (!scope.java)
    return std::unexpected(s.spelling == Spelling::Option ? "-e alloc needs ember's Java agent: drop --no-java"
                                                          : "'alloc' needs ember's Java agent: set java.attach = true");
  return {};
}

std::string agent_options(const Resolved& s) {
  namespace args = agent::protocol::args;
  std::string options = std::string(",") + args::kAlloc + "=" + std::to_string(s.settings.alloc_interval);
  if (s.settings.live) options += std::string(",") + args::kLive;
  // The ages tell what stays: no full GC forced on the JVM at the end.
  if (s.settings.live && (s.min_age_ns || s.settings.min_gcs)) options += std::string(",") + args::kNoGc;
  return options;
}

EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 0;
  v.live_only = s.settings.live;
  v.min_age_ns = s.min_age_ns;
  v.min_gcs = s.settings.min_gcs;
  return v;
}

std::string live_text(const Resolved& s) {
  if (!s.settings.live) return "";
  if (s.settings.min_age.empty() && !s.settings.min_gcs) return ", still alive at the end";
  std::string text = ", not collected by the end";
  if (!s.settings.min_age.empty()) text += " and allocated at least " + s.settings.min_age + " before it";
  if (s.settings.min_gcs) text += " and through at least " + std::to_string(s.settings.min_gcs) + " collections";
  return text;
}

std::string summary(const Resolved& s, const Outcome& o) {
  return summary_line(o, "%.1f MiB allocated by Java code, estimated from samples every %llu bytes%s",
                      o.total / 1048576.0, static_cast<unsigned long long>(s.settings.alloc_interval),
                      live_text(s).c_str());
}

}  // namespace

extern const Event kAlloc = {
    .name = "alloc",
    .help = "bytes allocated by Java code, from ember's agent",
    .unit = "bytes",
    .settings = kAllocInterval | kLive | kMinAge | kMinGcs,
    .agent_options = agent_options,
    .java_profile = JavaProfileKind::AllocBytes,
    .view = view,
    .info = live_info,
    .summary = summary,
    .check = check,
};

}  // namespace ember::events
