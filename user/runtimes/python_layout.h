// CPython's layout per version: where a thread's frames, their code
// objects and the code's names lie (bpf/python.h's ember_python_layout),
// from facts checked against each version's headers and live processes
// (user/runtimes/cpython.md). From 3.13 on CPython publishes most of it
// itself, in the _Py_DebugOffsets at the start of _PyRuntime: read there,
// it follows a patch release that moved a field.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>

#include <linux/types.h>  // __u16 and friends for python.h

#include "bpf/python.h"

namespace ember::runtimes {

// The versions ember knows, oldest first: 3.8 to 3.14.
inline constexpr uint16_t kPythonOldest = 0x0308, kPythonNewest = 0x030e;

// The layout of CPython MAJOR.MINOR (`version` = major << 8 | minor), or
// why there is none.
std::expected<ember_python_layout, std::string> python_layout(uint16_t version);

// The bytes at the start of a 3.13+ _PyRuntime (at least
// kDebugOffsetsBytes): the layout they describe, completed from the static
// facts of their version for what they leave out.
inline constexpr size_t kDebugOffsetsBytes = 424;
std::expected<ember_python_layout, std::string> python_layout_from_debug_offsets(std::span<const uint8_t> runtime_head);

}  // namespace ember::runtimes
