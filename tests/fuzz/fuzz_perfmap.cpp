// Fuzz target: the text readers of a process's address space, the JIT
// symbol file /tmp/perf-PID.map (then lookups in what it read) and
// /proc/PID/maps, on the same input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "symbolizer/proc_maps.h"

namespace {

using namespace ember::symbolizer;

// What the symbolizer relies on: entries sorted by start, one per start,
// and find() answering only with an entry that holds the address.
void check(const PerfMap& map, uint64_t address) {
  const PerfMapEntry* e = map.find(address);
  if (e && !(e->start <= address && address - e->start < e->size)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream perf_in(text);
  PerfMap map = parse_perf_map(perf_in);
  for (size_t i = 0; i < map.entries.size(); ++i) {
    const PerfMapEntry& e = map.entries[i];
    if (e.size == 0 || e.name.empty() || (i > 0 && map.entries[i - 1].start >= e.start)) std::abort();
    for (uint64_t a : {e.start - 1, e.start, e.start + e.size / 2, e.start + e.size - 1, e.start + e.size}) check(map, a);
  }
  for (uint64_t a : {uint64_t{0}, uint64_t{0x7f0000000000}, ~uint64_t{0}}) check(map, a);

  for (const Mapping& m : parse_proc_maps(text)) (void)m.path.size();
  return 0;
}
