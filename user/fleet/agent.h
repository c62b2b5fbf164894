// `ember agent`: profiles the whole host for as long as it runs, cuts a
// profile per service and event every period, keeps each period in the
// spool and pushes it to Grafana Pyroscope; /metrics tells its health.
// SIGHUP reloads the configuration at the end of the current period;
// SIGTERM (or SIGINT) cuts the period short and delivers it, to the server
// or the spool, before exiting.
#pragma once

#include <string>

#include "user/fleet/config.h"

namespace ember::fleet {

struct AgentOptions {
  std::string config_file;  // TOML, or "" for flags only
  KeyValues flags;          // the keys given as flags, over the file
};

// The process's exit code: 0 after SIGTERM, 1 when it cannot run, 2 for a
// configuration error.
int run_agent(const AgentOptions& options);

}  // namespace ember::fleet
