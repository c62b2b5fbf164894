// Fuzz target: ember agent's configuration file (TOML), which an operator
// writes and a configuration tool may template: read into keys, each key
// checked alone (parse_agent_config touches no file); an error names the
// file's line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "user/fleet/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto config = ember::fleet::parse_agent_config(&in, "agent.toml", {});
  if (!config && config.error().empty()) std::abort();
  return 0;
}
