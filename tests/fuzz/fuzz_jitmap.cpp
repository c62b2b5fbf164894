// Fuzz target: the readers of a JVM agent's stream (symbolizer/jit_map.h's
// format), which a JVM — possibly another user's — writes and ember, as
// root, reads: the code map (JitMap) and the Java events (JavaEvents), fed
// in two pieces so that a line split between reads is exercised; then what
// the collector and the unwinder ask of the code map.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "user/java/java_events.h"
#include "symbolizer/jit_map.h"

namespace {

using ember::symbolizer::JitMap;

// What the unwinder relies on: live code sorted by start, never
// overlapping, frame sizes and complete offsets as published or -1.
void check_live_code(const JitMap& map) {
  auto code = map.live_code();
  for (size_t i = 0; i < code.size(); ++i) {
    const JitMap::Code& c = code[i];
    if (c.size == 0 || c.frame_words < -1 || c.complete < -1 || c.method_slot > 0) std::abort();
    if (i > 0 && code[i - 1].start + code[i - 1].size > c.start) std::abort();
    for (uint64_t a : {c.start, c.start + c.size - 1}) {
      auto at = map.locate(a, UINT64_MAX / 2);
      if (!at) std::abort();  // live code names its own addresses
      for (const auto& f : map.frames(at)) (void)f.name.size();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t cut = size ? data[0] % (size + 1) : 0;
  JitMap map;
  ember::java::JavaEvents events;
  map.feed(text.substr(0, cut));
  events.feed(text.substr(0, cut));
  map.feed(text.substr(cut));
  events.feed(text.substr(cut));
  check_live_code(map);
  for (uint64_t a : {uint64_t{0}, uint64_t{0x7f0000001000}, ~uint64_t{0}}) {
    for (uint64_t t : {uint64_t{0}, uint64_t{1000}, ~uint64_t{0}}) {
      auto at = map.locate(a, t);
      for (const auto& f : map.frames(at)) (void)f.name.size();
    }
    (void)map.name(map.interpreted_method(a)).size();
  }
  map.forget_before(~uint64_t{0});
  check_live_code(map);
  return 0;
}
