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
  // Beside -e malloc, which takes it, --min-age would leave Java's graph
  // silently unfiltered.
  if (!s.settings.min_age.empty())
    return std::unexpected("--min-age applies to -e malloc's allocations; Java objects' ages are not followed: record "
                           "-e alloc --live in a recording of its own");
  return {};
}

std::string agent_options(const Resolved& s) {
  namespace args = agent::protocol::args;
  std::string options = std::string(",") + args::kAlloc + "=" + std::to_string(s.settings.alloc_interval);
  if (s.settings.live) options += std::string(",") + args::kLive;
  return options;
}

EventView view(const Resolved& s) {
  EventView v;
  v.kinds = 0;
  v.live_only = s.settings.live;
  return v;
}

std::string summary(const Resolved& s, const Outcome& o) {
  return summary_line(o, "%.1f MiB allocated by Java code, estimated from samples every %llu bytes%s",
                      o.total / 1048576.0, static_cast<unsigned long long>(s.settings.alloc_interval),
                      s.settings.live ? ", still alive at the end" : "");
}

}  // namespace

extern const Event kAlloc = {
    .name = "alloc",
    .help = "bytes allocated by Java code, from ember's agent",
    .unit = "bytes",
    .settings = kAllocInterval | kLive,
    .agent_options = agent_options,
    .java_profile = JavaProfileKind::AllocBytes,
    .view = view,
    .summary = summary,
    .check = check,
};

}  // namespace ember::events
