// One period of the fleet agent as Pyroscope's series: the session's
// window split into a profile per service and event, each labelled
// (__name__, service_name, host, container and Kubernetes names, the
// configured labels, relabeled) and encoded as gzipped pprof.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flamegraph/profile.h"
#include "user/fleet/config.h"
#include "user/fleet/pyroscope.h"
#include "user/fleet/service.h"

namespace ember::fleet {

// Applies `rules` in order; nothing when a rule drops the series. Labels
// left with an empty value are removed.
std::optional<std::vector<Label>> relabel(std::vector<Label> labels, std::span<const RelabelRule> rules);

// One of the session's graphs, as its series are named.
struct SeriesEvent {
  std::string name;   // the event (cpu-clock, malloc...)
  bool live = false;  // allocations still live at the period's end (an in-use sample type)
};

class PeriodSeries {
 public:
  // `events`: the session's graphs, in order.
  PeriodSeries(const AgentConfig& config, ServiceNamer& namer, std::vector<SeriesEvent> events);

  // A stack of graph `graph` from process `pid` (the session's stack sink).
  void add(size_t graph, uint32_t pid, const std::string& process_name, const flamegraph::Profile& profile,
           std::span<const flamegraph::FrameId> frames, uint64_t weight);

  // The period's series: one per service and event that has samples, each
  // placed at the period (a live set too: it is the period end's).
  // `graphs`: the window's whole graphs (event, unit, sampling period).
  std::vector<Series> finish(std::span<const flamegraph::Profile* const> graphs, uint64_t start_unix_ns,
                             uint64_t duration_ns);

  size_t dropped() const { return dropped_processes_; }  // processes a rule dropped
  size_t cut() const { return profiles_cut_; }  // profiles cut to the server's limits
  uint64_t stacks() const;
  // The summed weights of event `graph` over the series kept.
  uint64_t total(size_t graph) const;

 private:
  struct Group {
    std::vector<Label> labels;                  // without __name__
    std::vector<flamegraph::Profile> profiles;  // one per event
  };
  // The group of a process's stacks, or -1: a relabel rule dropped it.
  int group_of(uint32_t pid, const std::string& process_name);
  // `p` as gzipped pprof within server.max_samples and max_profile_size.
  std::string fitted_pprof(const flamegraph::Profile& p);

  const AgentConfig& config_;
  ServiceNamer& namer_;
  std::vector<SeriesEvent> events_;
  std::map<uint32_t, int> group_by_pid_;
  std::map<std::vector<Label>, int> group_by_labels_;
  std::vector<Group> groups_;
  size_t dropped_processes_ = 0;
  size_t profiles_cut_ = 0;
};

}  // namespace ember::fleet
