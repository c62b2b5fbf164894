// The events ember records, one file each (cpu.cpp, offcpu.cpp, ...), all
// listed in registry.cpp: what `record -e`, serve and its JSON API offer.
// An event declares its name, the settings it takes and how they are
// checked, what it asks of the kernel (its KernelPart) and of the JVMs'
// agents, how its records make a graph (EventView), and its summary line.
#pragma once

#include <cstdint>
#include <expected>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "user/events/kernel_part.h"
#include "user/events/view.h"
#include "user/host/host.h"
#include "user/java/java_profiles.h"

namespace ember::events {

// The settings of a recording's events, as record's options and serve's
// requests give them. Each is checked by the events that take it.
struct Settings {
  uint64_t frequency = 99;               // Hz per CPU
  std::string min_block = "1us";         // blocks shorter than this are left out
  uint64_t alloc_interval = 512 * 1024;  // a sample per this many bytes allocated
  bool live = false;                     // allocations: only those not freed by the end
  std::string min_age;                   // with live: only those at least this old by then; empty: any age
  uint64_t min_gcs = 0;                  // with live, Java: only objects that survived this many collections
  bool waker = false;                    // blocks: each with its waker's stacks
};

enum Setting : uint32_t {
  kFrequency = 1u << 0,
  kMinBlock = 1u << 1,
  kAllocInterval = 1u << 2,
  kLive = 1u << 3,
  kWaker = 1u << 4,
  kMinAge = 1u << 5,
  kMinGcs = 1u << 6,
};

// What a recording samples: the events' needs depend on it.
struct Scope {
  std::vector<uint32_t> pids;          // named processes (-p, and the threads' of --tid)
  std::vector<uint32_t> members;       // the processes of the targeted cgroups now (--cgroup)
  std::string command;                 // the command's executable as found in $PATH, if one runs
  bool java = true;                    // ember's agent may be attached
};

// How a command's messages name its settings: as record's options
// (-e cpu, --min-block, --no-java) or as the fields of serve's requests and
// the keys of the agent's configuration ('cpu', min_block, java.attach).
enum class Spelling { Option, Field };

// Event `name` as a command of that spelling names it: -e cpu, or 'cpu'.
std::string event_named(std::string_view name, Spelling spelling);

// The settings as an event reads them: min_block and min_age parsed.
struct Resolved {
  const Settings& settings;
  uint64_t min_block_ns = 0;
  uint64_t min_age_ns = 0;
  Spelling spelling = Spelling::Option;  // for the messages
};

// What an event's summary line reports on.
struct Outcome {
  std::string_view label;        // the event's name, or "samples" for a lone CPU graph
  double total = 0;              // the graph's weight, in the event's unit
  uint64_t records = 0;          // records taken in (samples, blocks)
};

struct Event {
  std::string_view name = {};
  std::string_view alias = {};  // also accepted for it (e.g. "cpu"), or empty
  std::string_view help = {};   // for --help and serve's API
  std::string_view unit = {};   // "samples", "ns" or "bytes"
  uint32_t settings = 0;    // Setting bits it takes
  bool samples_cpu = false; // drives the perf-event timer: one such event per recording
  bool served = true;       // offered by ember serve (not cycles: no PMU in most VMs)
  // What it asks of the kernel: its part in `parts`, shared with the
  // other events' asks; warnings for what it cannot see. An error refuses
  // the recording.
  std::expected<void, std::string> (*configure)(const Resolved& s, const Scope& scope, KernelParts& parts,
                                                std::vector<std::string>& warnings) = nullptr;
  // Options of the JVMs' agent for it (",alloc=...,live"); empty: none needed.
  std::string (*agent_options)(const Resolved& s) = nullptr;
  // Which of the agents' streams its graph adds, if any.
  std::optional<JavaProfileKind> java_profile = {};
  // How the collector builds its graph from the kernel's records.
  EventView (*view)(const Resolved& s) = nullptr;
  // Facts of its graph's info beyond the common ones (frequency, min-block).
  std::vector<std::pair<std::string, std::string>> (*info)(const Resolved& s) = nullptr;
  // Its line of the summary after a recording, without the newline.
  std::string (*summary)(const Resolved& s, const Outcome& o) = nullptr;
  // A further requirement on its settings or scope (alloc needs the agent).
  std::expected<void, std::string> (*check)(const Resolved& s, const Scope& scope) = nullptr;
};

// The graph info of an allocation event's --live settings: "live", and
// "min-age" in seconds ("30 s"), which flamegraph/leaks.cpp reads back.
std::vector<std::pair<std::string, std::string>> live_info(const Resolved& s);

// A summary line: `o`'s label in its column, then the printf-formatted rest.
std::string summary_line(const Outcome& o, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Every event, in the order --help lists them.
std::span<const Event* const> all();
// The event named `name` (or its alias), or nothing.
const Event* find(std::string_view name);

// A number and one of `units` after it ("10ms", "512MiB"), times that
// unit's scale; nothing if the number is negative or the unit unknown.
std::optional<double> parse_scaled(std::string_view text,
                                   std::initializer_list<std::pair<std::string_view, double>> units);

// A --min-block or --min-age value: "10ms", "500us", "2s", "100"
// (microseconds), "5m" -> nanoseconds; nothing if it is not a duration.
std::optional<uint64_t> parse_duration_ns(const std::string& text);

// The events `names` asks for, in its order: each known (by name or
// alias), given once, and one at most that samples the CPU.
std::expected<std::vector<const Event*>, std::string> check_names(const std::vector<std::string>& names,
                                                                  Spelling spelling);

// The events of one recording, their settings checked, and what they ask
// of the kernel and the agents.
struct Plan {
  std::vector<const Event*> events;  // in the order given
  std::vector<EventView> views;      // one graph each
  KernelParts parts;                 // what the events ask of the kernel (targets, unwinding: the session's)
  std::string agent_options;         // for the JVMs' agents
  uint64_t min_block_ns = 0;
  uint64_t min_age_ns = 0;

  // `settings` (those the plan was made of) as its events read them.
  Resolved resolved(const Settings& settings, Spelling spelling = Spelling::Option) const {
    return {settings, min_block_ns, min_age_ns, spelling};
  }
};


// Checks the event names and the settings they take, once, by the events
// that take them (a flag no event takes, --live or --waker, is refused),
// against what `host` allows. `warnings`: what the events cannot see,
// given even when the plan is refused (they may say why).
std::expected<Plan, std::string> plan(const std::vector<std::string>& names, const Settings& settings,
                                      const Scope& scope, const HostFacts& host, std::vector<std::string>& warnings,
                                      Spelling spelling = Spelling::Option);

}  // namespace ember::events
