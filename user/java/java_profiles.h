// Java allocation and lock profiles from the events a JVM's agent wrote
// (user/java/java_events.h): stacks of process, [thread,] Java frames
// outermost first, the native frames of an allocation made by native code
// (the C code of a JNI method, then the JNI function it called), and the
// allocated class — or the contended monitor's class — as the top frame
// (FrameKind::Alloc, "the class kind").
#pragma once

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flamegraph/profile.h"
#include "user/java/java_events.h"
#include "symbolizer/symbolizer.h"

namespace ember {

enum class JavaProfileKind {
  AllocBytes,    // event "alloc", unit "bytes": estimated bytes allocated
  AllocObjects,  // event "alloc-objects", unit "samples": estimated objects allocated
  Lock,          // event "lock", unit "ns": time spent waiting to enter contended monitors
};

// Names native frames: `addresses` are in the symbol table of the file at
// `path` (as JVM `pid` sees it); one Symbol each.
using NativeNamer = std::function<std::vector<symbolizer::Symbol>(uint32_t pid, const std::string& path,
                                                                   std::span<const uint64_t> addresses)>;

struct JavaProfileOptions {
  bool live_only = false;      // alloc: only samples whose objects were alive when the stream ended
  bool thread_frames = false;  // "[name tid=N]" under the process frame
  bool pid_frames = false;     // root "comm (pid)" instead of "comm"
  NativeNamer name_native;     // unset: native frames are "libfoo.so+0x1234"
  uint64_t min_age_ns = 0;       // live_only: and allocated at least this long before end_ns
  uint64_t min_gcs = 0;          // live_only: and through at least this many collections (JavaEvents::gcs)
  uint64_t end_ns = UINT64_MAX;  // the recording's end (CLOCK_MONOTONIC, the A lines' clock)
  // live_only: the recording's start on the same clock, from which the
  // profile's timeline counts when each live weight was allocated (0: no timeline).
  uint64_t start_ns = 0;
  // live_only: and of those, only the samples (LiveAllocation::sample) this keeps.
  std::function<bool(uint64_t sample)> keep_sample = {};
  // Told each allocation site's stack in the profile (Profile::stacks()).
  std::function<void(const java::JavaEvents::Site&, uint32_t stack)> on_site = {};
};

// A NativeNamer through `symbolizer`: the file through /proc/PID/root
// while the JVM lives (its container's), else by its path — the agent
// described it, so its frames are named after the JVM has exited too.
inline NativeNamer java_native_namer(symbolizer::Symbolizer& symbolizer) {
  return [&symbolizer](uint32_t pid, const std::string& path, std::span<const uint64_t> addresses) {
    std::string in_root = "/proc/" + std::to_string(pid) + "/root" + path;
    return symbolizer.symbolize_file(access(in_root.c_str(), R_OK) == 0 ? in_root : path, addresses);
  };
}

struct JavaProcess {
  uint32_t pid = 0;
  std::string name;  // comm
};

// The graph note "jvms": which JVMs a recording's Java graphs came from,
// each with when it started (symbolizer::process_start_text; a pid is
// given again after its process exits): "123 (started 1764571212.34), 456".
// A JVM's entry, to be joined with ", "; and, read back, when JVM `pid`
// started: nothing if the note does not list it, "" if it has no time.
std::string jvms_note_entry(uint32_t pid, const std::string& started);
std::optional<std::string> jvm_started_in_note(std::string_view note, uint32_t pid);

std::string_view java_event_name(JavaProfileKind kind);
std::string_view java_unit(JavaProfileKind kind);

// Adds one JVM's events of `kind` to `profile` (which may hold other JVMs'
// already: equal stacks merge). Weights are rounded estimates; a site whose
// estimate rounds to 0 is left out. Live allocations with a start_ns are
// timed too: appended to the timeline, oldest first.
void add_java_profile(const java::JavaEvents& events, JavaProfileKind kind, const JavaProcess& process,
                      const JavaProfileOptions& options, flamegraph::Profile& profile);

// Facts about one JVM's events for the report and the graph's info
// (samples, intervals, what live could not follow, losses, bad lines).
std::vector<std::pair<std::string, std::string>> java_profile_info(const java::JavaEvents& events,
                                                                   JavaProfileKind kind,
                                                                   const JavaProfileOptions& options);

// One JVM's profile of `kind`: event, unit and info set.
flamegraph::Profile java_profile(const java::JavaEvents& events, JavaProfileKind kind,
                                 const JavaProcess& process, const JavaProfileOptions& options);

}  // namespace ember
