// Fuzz target: the folded-stacks reader, then the writers on what it read.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/html.h"
#include "flamegraph/pprof.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto r = ember::flamegraph::read_folded(in);
  if (!r) return 0;
  ember::flamegraph::folded_text(r->profile);
  ember::flamegraph::html_data_json(r->profile, {});
  ember::flamegraph::encode_pprof(r->profile);
  return 0;
}
