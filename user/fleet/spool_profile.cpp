#include "user/fleet/spool_profile.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>
#include <vector>

#include "flamegraph/pprof.h"
#include "user/fleet/pyroscope.h"
#include "user/fleet/series.h"
#include "user/fleet/spool.h"

namespace ember::fleet {
namespace {

std::string label(const Series& s, const std::string& name) {
  for (const Label& l : s.labels)
    if (l.name == name) return l.value;
  return {};
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

std::optional<uint64_t> parse_time(const std::string& text) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit)) return std::stoull(text) * 1'000'000'000ull;
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M", &tm);
  if (!end) return std::nullopt;
  if (*end == ':') end = strptime(end, ":%S", &tm);
  if (!end) return std::nullopt;
  if (*end == 'Z') ++end;
  if (*end) return std::nullopt;
  time_t t = timegm(&tm);
  if (t < 0) return std::nullopt;
  return static_cast<uint64_t>(t) * 1'000'000'000ull;
}

std::expected<flamegraph::Profile, std::string> merge_spool(const std::string& dir, const SpoolQuery& query) {
  DIR* d = opendir(dir.c_str());
  if (!d) return std::unexpected("cannot read the spool " + dir + ": " + std::strerror(errno));
  std::vector<Spool::Entry> periods;
  while (dirent* de = readdir(d))
    if (auto e = Spool::parse_name(de->d_name)) {
      e->name = de->d_name;
      uint64_t end = e->start_ns + e->duration_ms * 1'000'000;
      if (end > query.from_ns && e->start_ns < query.to_ns) periods.push_back(*e);
    }
  closedir(d);
  if (periods.empty()) return std::unexpected(dir + ": no period of ember agent's spool in that time range");
  std::sort(periods.begin(), periods.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });

  // ember's event names (cpu, offcpu) stand for their series' names.
  std::string type = query.type == "cpu" ? "process_cpu" : series_name(query.type);
  flamegraph::Profile merged;
  std::set<std::string> services, types;
  uint64_t first = 0, last = 0;
  size_t read = 0;
  for (const Spool::Entry& period : periods) {
    auto body = Spool::read(dir, period);
    if (!body) return std::unexpected(body.error());
    auto series = decode_push_request(*body);
    if (!series) return std::unexpected(dir + "/" + period.name + ": " + series.error());
    for (const Series& s : *series) {
      std::string service = label(s, "service_name");
      services.insert(service);
      if (service != query.service) continue;
      types.insert(label(s, "__name__"));
      if (label(s, "__name__") != type) continue;
      auto p = flamegraph::decode_pprof(s.profile);
      if (!p) return std::unexpected(dir + "/" + period.name + ": " + p.error());
      if (read == 0) {
        merged.event = p->event;
        merged.unit = p->unit;
        merged.period_ns = p->period_ns;
        first = period.start_ns;
      }
      for (const flamegraph::Stack& stack : p->stacks()) merged.add_from(*p, stack.frames, stack.weight);
      last = std::max(last, period.start_ns + period.duration_ms * 1'000'000);
      ++read;
    }
  }
  if (query.service.empty() || !services.count(query.service))
    return std::unexpected("give --service: the periods in that range hold " + joined(services));
  if (read == 0)
    return std::unexpected("service " + query.service + " has no " + type + " profile in that range; it has " +
                           joined(types));
  merged.start_unix_ns = first;
  merged.duration_ns = last - first;
  merged.info = {{"service", query.service}, {"periods", std::to_string(read)}};
  return merged;
}

}  // namespace ember::fleet
