#include "user/fleet/metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace ember::fleet {
namespace {

class Text {
 public:
  void header(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name_and_labels, double value) {
    char v[64];
    std::snprintf(v, sizeof v, "%.17g", value);
    out_ << name_and_labels << ' ' << v << '\n';
  }
  void metric(const char* name, const char* type, const char* help, double value) {
    header(name, type, help);
    sample(name, value);
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// utime + stime of /proc/self/stat, in seconds.
double cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t open_fds() {
  uint64_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n > 0 ? n - 1 : 0;  // not the directory's own
}

}  // namespace

void AgentMetrics::add_made(const std::string& event, const std::string& unit, uint64_t value) {
  std::lock_guard lock(made_mutex_);
  made_[{event, unit}] += value;
}

std::map<std::pair<std::string, std::string>, uint64_t> AgentMetrics::made() const {
  std::lock_guard lock(made_mutex_);
  return made_;
}

void AgentMetrics::set_live(const std::string& event, uint64_t bytes) {
  std::lock_guard lock(made_mutex_);
  live_[event] = bytes;
}

std::map<std::string, uint64_t> AgentMetrics::live() const {
  std::lock_guard lock(made_mutex_);
  return live_;
}

uint64_t bpf_map_bytes() {
  uint64_t total = 0;
  DIR* d = opendir("/proc/self/fdinfo");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/fdinfo/") + e->d_name);
    bool map = false;
    uint64_t memlock = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("map_type:")) map = true;
      if (line.starts_with("memlock:")) memlock = std::strtoull(line.c_str() + 8, nullptr, 10);
    }
    if (map) total += memlock;
  }
  closedir(d);
  return total;
}

std::string metrics_text(const AgentMetrics& m, const Spool::Counts& spool) {
  Text t;
  auto n = [](const std::atomic<uint64_t>& a) { return static_cast<double>(a.load()); };
  t.metric("ember_agent_samples_total", "counter", "CPU samples the timer took (passing the kernel's filters).",
           n(m.samples));
  t.metric("ember_agent_lost_samples_total", "counter", "Records the kernel dropped (of any event): the ring buffer was full.",
           n(m.lost_samples));
  t.metric("ember_agent_stacks_total", "counter", "Distinct stacks in the profiles made.", n(m.stacks));
  t.metric("ember_agent_periods_total", "counter", "Periods cut.", n(m.periods));
  t.metric("ember_agent_profiles_total", "counter", "Profiles made: one per service, event and period.",
           n(m.profiles));
  t.header("ember_agent_profile_values_total", "counter",
           "The summed values of the profiles made, by event and unit (samples, ns, bytes).");
  for (const auto& [key, value] : m.made())
    t.sample("ember_agent_profile_values_total{event=\"" + key.first + "\",unit=\"" + key.second + "\"}",
             static_cast<double>(value));
  if (auto live = m.live(); !live.empty()) {
    t.header("ember_agent_live_bytes", "gauge",
             "Bytes allocated since the agent started and still live at the last period's end, by event (live).");
    for (const auto& [event, bytes] : live)
      t.sample("ember_agent_live_bytes{event=\"" + event + "\"}", static_cast<double>(bytes));
  }
  t.metric("ember_agent_profiles_relabel_dropped_total", "counter", "Profiles a relabel rule dropped.",
           n(m.profiles_relabel_dropped));
  t.metric("ember_agent_profiles_cut_total", "counter",
           "Profiles over the server's limits (server.max_samples, server.max_profile_size) whose lightest stacks "
           "were cut short.",
           n(m.profiles_cut));
  t.metric("ember_agent_profiles_pushed_total", "counter", "Profiles the server took.", n(m.profiles_pushed));
  t.metric("ember_agent_profiles_rejected_total", "counter",
           "Profiles the server refused (4xx other than 408 and 429): kept in the spool, not retried.",
           n(m.profiles_rejected));
  t.metric("ember_agent_push_failures_total", "counter", "Push attempts that failed and are retried.",
           n(m.push_failures));
  t.metric("ember_agent_profiles_spooled", "gauge", "Profiles in the spool not sent yet.",
           static_cast<double>(spool.pending_profiles));
  t.metric("ember_agent_profiles_dropped_total", "counter",
           "Profiles lost: removed by the spool's size or age cap before they were sent, or never written.",
           static_cast<double>(spool.dropped_profiles));
  t.metric("ember_agent_spool_bytes", "gauge", "Bytes in the spool directory.", static_cast<double>(spool.bytes));
  t.metric("ember_agent_spool_write_failures_total", "counter", "Periods the spool could not write.",
           static_cast<double>(spool.write_failures));
  t.metric("ember_agent_spool_full_disk_removals_total", "counter",
           "Periods removed from the spool, oldest first, to make room on a full disk.",
           static_cast<double>(spool.full_disk_removals));
  t.metric("ember_agent_bytes_sent_total", "counter", "Bytes of profiles sent (compressed).", n(m.bytes_sent));
  t.metric("ember_agent_push_seconds_sum", "counter", "Time spent in push attempts.",
           static_cast<double>(m.push_seconds_micros.load()) / 1e6);
  t.metric("ember_agent_push_seconds_count", "counter", "Push attempts.", n(m.push_attempts));
  t.metric("ember_agent_last_push_timestamp_seconds", "gauge", "When the server last took a period.",
           static_cast<double>(m.last_push_unix.load()));
  t.metric("ember_agent_symbolizer_bytes", "gauge", "Memory the symbolizer holds (symbols, DWARF, caches).",
           n(m.symbolizer_bytes));
  t.metric("ember_agent_symbolizer_files", "gauge", "Binaries the symbolizer holds open.", n(m.symbolizer_files));
  t.metric("ember_agent_jvms", "gauge", "JVMs whose code ember names.", n(m.jvms));
  t.metric("ember_agent_reloads_total", "counter", "Configurations reloaded (SIGHUP).", n(m.reloads));
  t.metric("ember_agent_reload_failures_total", "counter", "Reloads refused: the new configuration had an error.",
           n(m.reload_failures));
  t.metric("ember_agent_bpf_map_bytes", "gauge", "Kernel memory of the agent's BPF maps.",
           static_cast<double>(bpf_map_bytes()));
  t.metric("process_cpu_seconds_total", "counter", "User and system CPU time of the agent.", cpu_seconds());
  t.metric("process_resident_memory_bytes", "gauge", "Resident memory of the agent.",
           static_cast<double>(resident_bytes()));
  t.metric("process_open_fds", "gauge", "Open file descriptors of the agent.", static_cast<double>(open_fds()));
  return t.str();
}

}  // namespace ember::fleet
