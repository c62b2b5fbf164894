#include "user/fleet/series.h"

#include <sys/random.h>

#include <regex>

#include "flamegraph/pprof.h"

namespace ember::fleet {
namespace {

// A random (version 4) UUID: each profile's ID, so a retried push is
// recognisably the same.
std::string uuid() {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != sizeof b)
    for (unsigned char& c : b) c = static_cast<unsigned char>(std::rand());
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  char out[37];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

}  // namespace

std::optional<std::vector<Label>> relabel(std::vector<Label> labels, std::span<const RelabelRule> rules) {
  auto value_of = [&](const std::string& name) -> std::string {
    for (const Label& l : labels)
      if (l.name == name) return l.value;
    return {};
  };
  for (const RelabelRule& r : rules) {
    std::string value = value_of(r.label);
    std::smatch m;
    bool matched = std::regex_match(value, m, r.regex);
    switch (r.action) {
      case RelabelRule::Action::Keep:
        if (!matched) return std::nullopt;
        break;
      case RelabelRule::Action::Drop:
        if (matched) return std::nullopt;
        break;
      case RelabelRule::Action::Replace:
        if (matched) {
          std::string result = m.format(r.replacement);
          std::erase_if(labels, [&](const Label& l) { return l.name == r.target; });
          labels.push_back({r.target, result});
        }
        break;
    }
  }
  return normalized(std::move(labels));
}

PeriodSeries::PeriodSeries(const AgentConfig& config, ServiceNamer& namer, std::vector<SeriesEvent> events)
    : config_(config), namer_(namer), events_(std::move(events)) {}

int PeriodSeries::group_of(uint32_t pid, const std::string& process_name) {
  auto known = group_by_pid_.find(pid);
  if (known != group_by_pid_.end()) return known->second;
  const ServiceLabels& s = namer_.labels(static_cast<pid_t>(pid), process_name);
  std::vector<Label> labels = {{"service_name", s.service_name}, {"host", config_.host},
                               {"container_id", s.container_id}, {"namespace", s.namespace_name},
                               {"pod", s.pod},                   {"container", s.container}};
  if (config_.pid_label) labels.push_back({"pid", std::to_string(pid)});
  for (const auto& [name, value] : config_.labels) labels.push_back({name, value});
  auto kept = relabel(std::move(labels), config_.relabel);
  int group = -1;
  if (!kept) {
    ++dropped_processes_;
  } else {
    auto [it, added] = group_by_labels_.try_emplace(*kept, static_cast<int>(groups_.size()));
    if (added) groups_.push_back({*kept, std::vector<flamegraph::Profile>(events_.size())});
    group = it->second;
  }
  group_by_pid_[pid] = group;
  return group;
}

void PeriodSeries::add(size_t graph, uint32_t pid, const std::string& process_name,
                       const flamegraph::Profile& profile, std::span<const flamegraph::FrameId> frames,
                       uint64_t weight) {
  int group = group_of(pid, process_name);
  if (group >= 0) groups_[static_cast<size_t>(group)].profiles[graph].add_from(profile, frames, weight);
}

uint64_t PeriodSeries::stacks() const {
  uint64_t n = 0;
  for (const Group& g : groups_)
    for (const flamegraph::Profile& p : g.profiles) n += p.stacks().size();
  return n;
}

uint64_t PeriodSeries::total(size_t graph) const {
  uint64_t n = 0;
  for (const Group& g : groups_)
    if (graph < g.profiles.size()) n += g.profiles[graph].total();
  return n;
}

std::string PeriodSeries::fitted_pprof(const flamegraph::Profile& p) {
  // Pyroscope refuses a profile over its limits whole: cut the lightest
  // stacks short, to fewer stacks until the bytes fit too.
  size_t raw = 0, stacks = std::min<size_t>(p.stacks().size(), config_.server.max_samples);
  if (stacks == p.stacks().size()) {
    std::string bytes = flamegraph::encode_pprof(p, &raw);
    if (raw <= config_.server.max_profile_bytes) return bytes;
    stacks /= 2;
  }
  ++profiles_cut_;
  for (;; stacks /= 2) {
    std::string bytes = flamegraph::encode_pprof(flamegraph::cut_stacks(p, std::max<size_t>(stacks, 2)), &raw);
    if (raw <= config_.server.max_profile_bytes || stacks <= 2) return bytes;
  }
}

std::vector<Series> PeriodSeries::finish(std::span<const flamegraph::Profile* const> graphs, uint64_t start_unix_ns,
                                         uint64_t duration_ns) {
  std::vector<Series> out;
  for (Group& g : groups_)
    for (size_t i = 0; i < g.profiles.size() && i < graphs.size(); ++i) {
      flamegraph::Profile& p = g.profiles[i];
      if (p.total() == 0) continue;
      const flamegraph::Profile& whole = *graphs[i];
      // The sample type: a live set's is not the same profile type as the
      // period's allocations, which a change of `live` must not mix.
      p.event = events_[i].live ? flamegraph::inuse_type(whole.event) : whole.event;
      p.unit = whole.unit;
      p.period_ns = whole.period_ns;
      p.start_unix_ns = start_unix_ns;
      p.duration_ns = duration_ns;
      Series s;
      s.labels = g.labels;
      s.labels.push_back({"__name__", flamegraph::series_name(events_[i].name)});
      // Each profile covers its period alone: the server must not take
      // differences between them.
      s.labels.push_back({"__delta__", "false"});
      s.labels = normalized(std::move(s.labels));
      s.profile = fitted_pprof(p);
      s.id = uuid();
      out.push_back(std::move(s));
    }
  return out;
}

}  // namespace ember::fleet
