// Leak suspects in a --live profile: among the allocation sites whose
// objects were still live at the end, those that kept some at a steady
// rate all through the recording — a leak's mark — and not only lately
// (requests in flight, a cache about to be emptied) or once (start-up).
// The profile's timeline says when each live weight was allocated: a
// site's live weight allocated before time t, for t across the recording,
// is a line rising at the leak's rate for a leak, a late step for what is
// in flight, a flat line after an early step for a cache filled once.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

struct LeakSuspect {
  uint32_t stack = 0;       // in Profile::stacks(): the site and its callers
  uint64_t live = 0;        // its weight: live at the end
  uint64_t old = 0;         // of which allocated within the span fitted
  double rate_per_s = 0;    // the fitted line's slope: live weight kept per second
  double fit = 0;           // how well a line fits (R², 0 to 1): 1 is a steady rate
  uint32_t records = 0;     // timeline entries within the span
  // The live weight allocated before each of kCurvePoints equal steps of
  // the whole recording, the last being `live`: the curve the page draws.
  std::vector<uint64_t> curve;
};

struct LeakSuspects {
  // Only allocations at least this old at the end are fitted: younger ones
  // may be in flight. The profile's --min-age, else a quarter of its
  // length; with --min-gcs, from the youngest allocation it kept.
  uint64_t young_ns = 0;
  uint64_t span_ns = 0;  // the fitted span: from the start to young_ns before the end
  std::vector<LeakSuspect> suspects;  // fastest first
};

inline constexpr size_t kCurvePoints = 40;
// A site is a suspect when a line fits its kept weight this well.
inline constexpr double kSteadyFit = 0.9;

// Whether `profile` holds allocations still live at the end (-e malloc or
// -e alloc with --live): its info has "live".
bool is_live_profile(const Profile& profile);

// The suspects of a live profile; none without a timeline.
LeakSuspects find_leak_suspects(const Profile& profile);

// A site's innermost `depth` frames (pseudo-frames left out), innermost
// first, joined by " ← "; where an interpreter's native frames lie
// between the allocating function and the program's (Python, JavaScript),
// they are skipped: "_PyBytes_Resize ← … ← copyfile ← do_GET".
std::string site_name(const Profile& profile, uint32_t stack, size_t depth = 3);

// The function to look for in the graph: the innermost of the program's
// language (Java, Python, JavaScript) if any, else the innermost but the
// allocated class.
std::string site_function(const Profile& profile, uint32_t stack);

// The suspects as a text table (ember report), the first `rows` of them,
// or why there are none.
void write_leak_suspects(const Profile& profile, size_t rows, std::ostream& out);

}  // namespace ember::flamegraph
