// Fuzz target: a node process's memory as ember reads it to name
// JavaScript frames (user/runtimes/v8_frames.h), with node 20's layout:
// the input is the memory at 0x10000, whose first object is the
// SharedFunctionInfo asked for; its name (strings of every kind, a
// ScopeInfo) and script are read wherever the bytes point; then the same
// object as a frame's function or optimized code with a position, and as
// a script. Never a read past what the "process" holds, never a hang on a
// cycle of strings or of inlined functions.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../unit/v8_node20.h"
#include "user/runtimes/v8_frames.h"

using namespace ember::runtimes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kBase = 0x10000;
  static const V8Layout layout = [] {
    V8Layout l = v8_layout(kNode20, {11, 3, 244})->layout;
    l.bytecode_sizes.assign(3 * 198, 3);  // node 20 has 198 bytecodes
    for (size_t scale = 0; scale < 3; ++scale) std::fill_n(l.bytecode_sizes.begin() + scale * 198, 4, 1);  // the prefixes
    return l;
  }();
  ReadMemory read = [&](uint64_t address, void* out, size_t n) {
    if (address < kBase || address - kBase > size || n > size - (address - kBase)) return false;
    std::memcpy(out, data + (address - kBase), n);
    return true;
  };
  (void)read_v8_function(layout, kBase + 1, read);
  // --lines: the same bytes as a function run by the interpreter or by
  // baseline code, as optimized code (its position tables, what was
  // inlined), as a script whose lines are counted.
  uint64_t offset = size >= 2 ? data[0] | data[1] << 8 : 0;
  (void)read_v8_places(layout, EMBER_FRAME_V8 | (kBase + 1), EMBER_FRAME_V8_BYTECODE | offset, read);
  (void)read_v8_places(layout, EMBER_FRAME_V8 | (kBase + 1), EMBER_FRAME_V8_PC | offset, read);  // baseline code
  (void)read_v8_places(layout, EMBER_FRAME_V8 | (kBase + 1) | EMBER_V8_CODE, EMBER_FRAME_V8_PC | offset, read);
  (void)read_v8_line_ends(layout, kBase + 1, read);
  return 0;
}
