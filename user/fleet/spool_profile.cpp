#include "user/fleet/spool_profile.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
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

uint64_t end_ns(const Spool::Entry& e) { return e.start_ns + e.duration_ms * 1'000'000; }

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// Adds to `merged` the last of `periods` (a live set each, in time order):
// each stack's bytes placed on the timeline at the periods in which they
// grew, the latest growth first (what a cache holds is its newest, what a
// leak holds is all it added), so that the leak suspects read a steady
// grower as one and the spool's page draws its curve.
void add_live_sets(const std::vector<std::pair<uint64_t, flamegraph::Profile>>& periods, uint64_t first,
                   flamegraph::Profile& merged) {
  flamegraph::Profile shapes;               // every period's stacks, interned once
  std::vector<std::vector<uint64_t>> bytes;  // by stack of `shapes`, by period
  for (size_t k = 0; k < periods.size(); ++k)
    for (const flamegraph::Stack& s : periods[k].second.stacks()) {
      uint32_t i = shapes.add_from(periods[k].second, s.frames, 1);
      if (i >= bytes.size()) bytes.resize(i + 1, std::vector<uint64_t>(periods.size()));
      bytes[i][k] += s.weight;
    }
  size_t last = periods.size() - 1;
  for (uint32_t i = 0; i < bytes.size(); ++i)
    for (size_t k = last + 1, left = bytes[i][last]; k-- > 0 && left;) {
      uint64_t before = k ? bytes[i][k - 1] : 0;
      if (bytes[i][k] <= before) continue;
      uint64_t grown = std::min<uint64_t>(left, bytes[i][k] - before);
      uint32_t index = merged.add_from(shapes, shapes.stacks()[i].frames, grown);
      if (index != flamegraph::Profile::kNoStack) merged.timeline.push_back({periods[k].first - first, grown, index});
      left -= grown;
    }
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
  auto periods = Spool::list(dir);
  if (!periods) return std::unexpected("the spool: " + periods.error());
  std::erase_if(*periods, [&](const Spool::Entry& e) { return end_ns(e) <= query.from_ns || e.start_ns >= query.to_ns; });
  if (periods->empty()) return std::unexpected(dir + ": no period of ember agent's spool in that time range");

  // ember's event names (cpu, offcpu) stand for their series' names.
  std::string type = query.type == "cpu" ? "process_cpu" : flamegraph::series_name(query.type);
  flamegraph::Profile merged;
  std::set<std::string> services, types;
  uint64_t first = 0, last = 0;
  size_t read = 0;
  // A live set (an in-use sample type) is the bytes live at its period's
  // end: the range's last one stands for it, not their sum.
  std::map<std::string, std::vector<std::pair<uint64_t, flamegraph::Profile>>> live_sets;  // by type
  auto add = [&](const flamegraph::Profile& p, uint64_t at) {
    for (const flamegraph::Stack& stack : p.stacks()) {
      uint32_t index = merged.add_from(p, stack.frames, stack.weight);
      if (index != flamegraph::Profile::kNoStack) merged.timeline.push_back({at - first, stack.weight, index});
    }
  };
  for (const Spool::Entry& period : *periods) {
    auto body = Spool::read(dir, period);
    if (!body) return std::unexpected(body.error());
    if (!*body) continue;  // its agent's caps removed it since
    auto series = decode_push_request(**body);
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
      // The agent pushes no times: a period's weight is placed at its start,
      // and the timeline is as precise as the longest period.
      if (flamegraph::is_inuse_type(p->event))
        live_sets[p->event].emplace_back(period.start_ns, std::move(*p));
      else
        add(*p, period.start_ns);
      merged.time_step_ns = std::max(merged.time_step_ns, end_ns(period) - period.start_ns);
      last = std::max(last, end_ns(period));
      ++read;
    }
  }
  for (const auto& [type, sets] : live_sets) add_live_sets(sets, first, merged);
  if (!services.count(query.service))
    return std::unexpected("no service '" + query.service + "' in that range: the periods there hold " + joined(services));
  if (read == 0)
    return std::unexpected("service " + query.service + " has no " + type + " profile in that range; it has " +
                           joined(types));
  std::stable_sort(merged.timeline.begin(), merged.timeline.end(),
                   [](const flamegraph::Timed& a, const flamegraph::Timed& b) { return a.time_ns < b.time_ns; });
  merged.start_unix_ns = first;
  merged.duration_ns = last - first;
  merged.info = {{"service", query.service}, {"periods", std::to_string(read)}};
  if (!live_sets.empty()) merged.info.emplace_back("live", "still allocated at the last period's end");
  return merged;
}

bool is_spool(const std::string& dir) {
  auto periods = Spool::list(dir);
  return periods && !periods->empty();
}

std::expected<SpoolContents, std::string> SpoolCatalog::contents() {
  auto periods = Spool::list(dir_);
  if (!periods) return std::unexpected(periods.error());
  SpoolContents out;
  std::map<std::pair<std::string, std::string>, SpoolSeries> series;
  std::map<uint64_t, Held> still;
  for (const Spool::Entry& period : *periods) {
    auto held = held_.find(period.start_ns);
    if (held == held_.end()) {
      auto body = Spool::read(dir_, period);
      if (!body) return std::unexpected(body.error());
      if (!*body) continue;
      auto decoded = decode_push_request(**body);
      if (!decoded) return std::unexpected(dir_ + "/" + period.name + ": " + decoded.error());
      Held h;
      for (const Series& s : *decoded) h.push_back({label(s, "service_name"), label(s, "__name__")});
      held = held_.emplace(period.start_ns, std::move(h)).first;
    }
    still.insert(*held);
    ++out.periods;
    ++(period.state == Spool::State::Pending ? out.pending
       : period.state == Spool::State::Sent  ? out.sent
                                             : out.rejected);
    out.bytes += period.bytes;
    if (out.periods == 1) out.first_ns = period.start_ns;
    out.end_ns = std::max(out.end_ns, end_ns(period));
    for (const auto& key : held->second) {
      SpoolSeries& s = series[key];
      if (s.periods++ == 0) {
        s.service = key.first;
        s.type = key.second;
        s.first_ns = period.start_ns;
      }
      s.end_ns = std::max(s.end_ns, end_ns(period));
    }
  }
  held_ = std::move(still);  // removed periods are forgotten
  for (auto& [key, s] : series) out.series.push_back(std::move(s));
  return out;
}

}  // namespace ember::fleet
