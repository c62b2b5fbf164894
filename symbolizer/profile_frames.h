// Symbolizer answers as profile frames: the one place that turns
// symbolizer::Frame into flamegraph::Frame, and an unknown address into
// its placeholder ("libc.so.6+0x27249", "[anon]", "[unknown]").
#pragma once

#include <vector>

#include "flamegraph/profile.h"
#include "symbolizer/symbol.h"

namespace ember {

// "name (file.c:42)" when the frame has a line.
flamegraph::Frame profile_frame(const symbolizer::Frame& frame);
// The frames of `symbol`, caller first; one placeholder when it is unknown.
std::vector<flamegraph::Frame> profile_frames(const symbolizer::Symbol& symbol);

}  // namespace ember
