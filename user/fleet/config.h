// `ember agent`'s configuration: a TOML file (--config) and a flag for
// every key, named as the key (`server.url` is --server.url), a flag
// winning over the file. The whole of it is checked at start (and at each
// SIGHUP), so a mistake stops the agent with the key and the fix, never at
// the first push.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <regex>
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "user/events/event.h"
#include "user/fleet/service.h"
#include "user/java/java_attach.h"

namespace ember::fleet {

// A Prometheus-style relabeling rule over one process's series labels.
// `regex` must match the whole value (an absent label is "").
struct RelabelRule {
  enum class Action { Keep, Drop, Replace };
  Action action = Action::Replace;
  std::string label;        // the label read
  std::string regex_text;   // as written
  std::regex regex;
  std::string target;       // replace: the label written ("" drops it)
  std::string replacement;  // replace: with $1, $2 ... of the regex's groups
};

// What a flag or a TOML value says, as text: one string per value
// (a list's items, a table's "name=value" pairs).
using KeyValues = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct AgentConfig {
  // Sampling.
  double period_s = 15;                  // a profile per service this often
  uint32_t frequency = 19;               // samples per second per CPU
  std::vector<std::string> events = {"cpu"};
  uint64_t alloc_interval = 512 * 1024;  // malloc, alloc: a sample per this many bytes allocated
  // Allocations (malloc, alloc): each period sends what is still live at
  // its end, allocated since the agent started, rather than what the period
  // allocated; min_age and min_gcs (Java) leave out the young.
  bool live = false;
  std::string min_age;  // a duration; empty: any age
  uint32_t min_gcs = 0;
  std::string unwind = "auto";
  uint32_t unwind_memory_mib = 16;
  uint32_t symbol_memory_mib = 48;  // always on: bounded tighter than record's 512
  std::string root = "/";  // the host's file system (/host in a container)
  // Series labels.
  std::string host;                           // default: the host name
  std::map<std::string, std::string> labels;  // added to every series
  std::vector<std::string> service_sources = ServiceNamer::kAllSources;
  bool pid_label = false;     // a series per process (cardinality!)
  bool thread_label = false;  // a pprof label per thread
  std::vector<RelabelRule> relabel;
  // The backend.
  struct Server {
    std::string url;           // empty: spool only
    std::string api = "push";  // push (push.v1.PusherService/Push), ingest (/ingest) or otlp (/v1development/profiles)
    std::string tenant;        // X-Scope-OrgID
    std::string user;          // basic auth, with password_file
    std::string password_file;
    std::string token_file;  // bearer token
    std::string ca_file;     // TLS: trust this CA (PEM) besides the system's
    double timeout_s = 10;   // per request
    double max_backoff_s = 300;
    // What the server takes (Pyroscope's defaults): larger profiles are cut.
    uint32_t max_samples = 16000;
    uint64_t max_profile_bytes = 4u << 20;  // before gzip
  } server;
  struct Spool {
    std::string dir = "/var/lib/ember/spool";
    uint64_t max_bytes = 1ull << 30;
    double max_age_s = 86400;
  } spool;
  std::string metrics_listen = "127.0.0.1:9464";  // empty: no /metrics
  struct Java {
    bool attach = true;
    double attach_timeout_s = java::kAttachTimeoutS;  // each wait of an attach (socket, agent load)
    std::vector<std::string> allow, deny;              // main classes (regex, whole name)
    std::vector<std::string> allow_users, deny_users;  // user names or uids
  } java;

  // The secrets read from their files at load.
  std::string password, token;
};

// The events' settings the configuration gives (frequency, live...), as
// ember record's options would.
events::Settings event_settings(const AgentConfig& c);

// Every key: its name (also the flag's, after "--"), a short help, and
// whether it takes a list.
struct KeyInfo {
  const char* name;
  const char* help;
  bool list;
};
const std::vector<KeyInfo>& agent_keys();

// The configuration of `file` (none: "") with `flags` over it, checked:
// the error names the key (and the file's line) and the fix.
std::expected<AgentConfig, std::string> load_agent_config(const std::string& file, const KeyValues& flags);
// Its first half, which touches no file: the TOML text of `in` (none:
// null), named `file` in errors, and `flags` over it, each key checked
// alone. load_agent_config then checks the whole (files, the spool).
std::expected<AgentConfig, std::string> parse_agent_config(std::istream* in, const std::string& file,
                                                          const KeyValues& flags);

// Parses "15s", "500ms", "2m", "24h" (seconds without a unit).
std::optional<double> parse_seconds(const std::string& text);
// Parses "512MiB", "1GiB", "100MB", "4096" (bytes).
std::optional<uint64_t> parse_bytes(const std::string& text);

}  // namespace ember::fleet
