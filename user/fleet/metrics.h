// The fleet agent's health, in Prometheus' text format (GET /metrics):
// counters it keeps as it runs, and gauges read when scraped (its own CPU
// and memory, the kernel memory of its BPF maps, the spool).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "user/fleet/spool.h"

namespace ember::fleet {

struct AgentMetrics {
  // Sampling, summed over periods.
  std::atomic<uint64_t> samples{0};       // CPU samples the timer took
  std::atomic<uint64_t> lost_samples{0};  // the ring buffer was full
  std::atomic<uint64_t> stacks{0};        // distinct stacks in the periods' profiles
  std::atomic<uint64_t> periods{0};
  std::atomic<uint64_t> profiles{0};  // series profiles made (a service's event of a period)
  std::atomic<uint64_t> profiles_relabel_dropped{0};
  std::atomic<uint64_t> profiles_cut{0};  // over the server's limits: light stacks cut
  // Sending.
  std::atomic<uint64_t> profiles_pushed{0};
  std::atomic<uint64_t> profiles_rejected{0};  // refused by the server (4xx): kept in the spool
  std::atomic<uint64_t> push_failures{0};      // attempts that failed (retried)
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> push_seconds_micros{0};  // summed over attempts
  std::atomic<uint64_t> push_attempts{0};
  std::atomic<int64_t> last_push_unix{0};
  // Gauges the main loop sets.
  std::atomic<uint64_t> symbolizer_bytes{0};
  std::atomic<uint64_t> symbolizer_files{0};
  std::atomic<uint64_t> jvms{0};
  std::atomic<uint64_t> reloads{0};
  std::atomic<uint64_t> reload_failures{0};

  // The summed values of the profiles made, per event and unit (samples,
  // ns, bytes): what the server should hold, summed over its profiles.
  void add_made(const std::string& event, const std::string& unit, uint64_t value);
  std::map<std::pair<std::string, std::string>, uint64_t> made() const;
  // With `live`: the bytes still live at the last period's end, per
  // allocation event (a gauge: a leak's keeps rising).
  void set_live(const std::string& event, uint64_t bytes);
  std::map<std::string, uint64_t> live() const;

 private:
  mutable std::mutex made_mutex_;
  std::map<std::pair<std::string, std::string>, uint64_t> made_;
  std::map<std::string, uint64_t> live_;
};

// The exposition text: the counters, the spool's counts, and what is read
// now from /proc/self (CPU seconds, resident bytes, open files, BPF maps).
std::string metrics_text(const AgentMetrics& m, const Spool::Counts& spool);

// The kernel memory of the BPF maps this process holds (memlock, from
// /proc/self/fdinfo).
uint64_t bpf_map_bytes();

}  // namespace ember::fleet
