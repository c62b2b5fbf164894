#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "user/events/event.h"

namespace ember::events {

extern const Event kCpuClock, kCycles, kOffcpu, kWall, kLock, kMalloc, kAlloc;

namespace {

constexpr const Event* kAll[] = {&kCpuClock, &kCycles, &kOffcpu, &kWall, &kLock, &kMalloc, &kAlloc};

// How each setting is spelt, for the messages that name it: record's
// flag, serve's request field.
struct Flag {
  Setting setting;
  const char* option;
  const char* field;
};
constexpr Flag kFlags[] = {{kFrequency, "-F", "frequency"},
                           {kMinBlock, "--min-block", "min_block"},
                           {kAllocInterval, "--alloc-interval", "interval"},
                           {kLive, "--live", "live"},
                           {kWaker, "--waker", "waker"},
                           {kMinAge, "--min-age", "min_age"},
                           {kMinGcs, "--min-gcs", "min_gcs"}};

// The events of the registry that take `setting`: "-e a or -e b" (record),
// "'a' or 'b'" (the agent's keys, serve's fields).
std::string takers(Setting setting, Spelling spelling) {
  std::string text;
  for (const Event* e : kAll)
    if (e->settings & setting) text += (text.empty() ? "" : " or ") + event_named(e->name, spelling);
  return text;
}

// `setting`'s name as `spelling` writes it: "--live" or "live".
std::string named_setting(Setting setting, Spelling spelling) {
  for (const Flag& f : kFlags)
    if (f.setting == setting) return spelling == Spelling::Option ? f.option : f.field;
  return {};
}

std::expected<void, std::string> check_setting(const Flag& flag, const char* name, const Settings& s,
                                               const HostFacts& host) {
  switch (flag.setting) {
    case kFrequency: return check_frequency(s.frequency, host);
    case kMinBlock:
      if (!parse_duration_ns(s.min_block))
        return std::unexpected(std::string(name) + " '" + s.min_block +
                               "' is not a duration: give e.g. 500us, 2ms or 1s");
      return {};
    case kMinAge:
      if (!s.min_age.empty() && !parse_duration_ns(s.min_age))
        return std::unexpected(std::string(name) + " '" + s.min_age + "' is not a duration: give e.g. 30s, 5m or 500ms");
      return {};
    case kAllocInterval:
      if (s.alloc_interval == 0) return std::unexpected(std::string(name) + " must be at least 1 byte");
      return {};
    default: return {};
  }
}

}  // namespace

std::span<const Event* const> all() { return kAll; }

std::vector<std::pair<std::string, std::string>> live_info(const Resolved& s) {
  if (!s.settings.live) return {};
  std::vector<std::pair<std::string, std::string>> info = {{"live", "still allocated at the end"}};
  if (s.min_age_ns) {
    char age[32];
    std::snprintf(age, sizeof age, "%g s", s.min_age_ns / 1e9);
    info.emplace_back("min-age", age);
  }
  if (s.settings.min_gcs) info.emplace_back("min-gcs", std::to_string(s.settings.min_gcs));
  return info;
}

std::string summary_line(const Outcome& o, const char* format, ...) {
  char rest[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(rest, sizeof rest, format, args);
  va_end(args);
  char line[300];
  std::snprintf(line, sizeof line, "  %-11.*s %s", static_cast<int>(o.label.size()), o.label.data(), rest);
  return line;
}

const Event* find(std::string_view name) {
  for (const Event* e : kAll)
    if (e->name == name || (!e->alias.empty() && e->alias == name)) return e;
  return nullptr;
}

std::optional<double> parse_scaled(std::string_view text,
                                   std::initializer_list<std::pair<std::string_view, double>> units) {
  std::string number(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (!(value >= 0) || std::isinf(value)) return std::nullopt;
  for (const auto& [unit, scale] : units)
    if (text.substr(used) == unit) return value * scale;
  return std::nullopt;
}

std::optional<uint64_t> parse_duration_ns(const std::string& text) {
  auto ns = parse_scaled(text, {{"ns", 1}, {"us", 1e3}, {"", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}});
  if (!ns) return std::nullopt;
  return static_cast<uint64_t>(*ns);
}

std::string event_named(std::string_view name, Spelling spelling) {
  return spelling == Spelling::Option ? "-e " + std::string(name) : "'" + std::string(name) + "'";
}

std::expected<std::vector<const Event*>, std::string> check_names(const std::vector<std::string>& names,
                                                                  Spelling spelling) {
  auto named = [&](std::string_view name) { return event_named(name, spelling); };
  std::vector<const Event*> events;
  const std::string* cpu = nullptr;  // as given
  for (const std::string& name : names) {
    const Event* e = find(name);
    if (!e) {
      std::string known;
      for (const Event* k : kAll)
        known += (known.empty() ? "" : ", ") + std::string(k->name) +
                 (k->alias.empty() ? "" : " (or " + std::string(k->alias) + ")");
      return std::unexpected("unknown event '" + name + "': give one of " + known);
    }
    if (e->samples_cpu) {
      if (cpu)
        return std::unexpected(named(*cpu) + " and " + named(name) + ": one CPU-sampling event " +
                               (spelling == Spelling::Option ? "per recording" : "at most"));
      cpu = &name;
    }
    if (std::find(events.begin(), events.end(), e) != events.end())
      return std::unexpected(named(name) + " is given twice");
    events.push_back(e);
  }
  return events;
}

std::expected<Plan, std::string> plan(const std::vector<std::string>& names, const Settings& settings,
                                      const Scope& scope, const HostFacts& host, std::vector<std::string>& warnings,
                                      Spelling spelling) {
  Plan plan;
  auto events = check_names(names, spelling);
  if (!events) return std::unexpected(events.error());
  plan.events = std::move(*events);
  uint32_t taken = 0;
  for (const Event* e : plan.events) taken |= e->settings;
  // Each setting is checked once, if an event takes it.
  for (const Flag& f : kFlags)
    if (taken & f.setting)
      if (auto ok = check_setting(f, spelling == Spelling::Option ? f.option : f.field, settings, host); !ok)
        return std::unexpected(ok.error());
  auto name = [&](Setting setting) { return named_setting(setting, spelling); };
  auto with_live = [&](Setting setting) { return takers(setting, spelling) + " with " + name(kLive); };
  if (settings.live && !(taken & kLive))
    return std::unexpected(name(kLive) + " applies to allocations: add " + takers(kLive, spelling));
  if (settings.waker && !(taken & kWaker))
    return std::unexpected(name(kWaker) + " applies to blocked threads: add " + takers(kWaker, spelling));
  if (!settings.min_age.empty() && !(taken & kMinAge))
    return std::unexpected(name(kMinAge) + " applies to allocations still live: add " + with_live(kMinAge));
  if (!settings.min_age.empty() && !settings.live)
    return std::unexpected(name(kMinAge) +
                           " keeps the allocations still live at the end that are at least that old: add " +
                           name(kLive));
  if (settings.min_gcs && !(taken & kMinGcs))
    return std::unexpected(name(kMinGcs) +
                           " applies to Java objects still live (C and C++ blocks are not collected): add " +
                           with_live(kMinGcs));
  if (settings.min_gcs && !settings.live)
    return std::unexpected(name(kMinGcs) +
                           " keeps the Java objects still live at the end that survived that many collections: add " +
                           name(kLive));

  plan.min_block_ns = taken & kMinBlock ? *parse_duration_ns(settings.min_block) : 0;
  plan.min_age_ns = settings.min_age.empty() ? 0 : *parse_duration_ns(settings.min_age);
  Resolved resolved = plan.resolved(settings, spelling);
  for (size_t i = 0; i < plan.events.size(); ++i) {
    const Event* e = plan.events[i];
    if (e->check)
      if (auto ok = e->check(resolved, scope); !ok) return std::unexpected(ok.error());
    if (e->configure)
      if (auto ok = e->configure(resolved, scope, plan.parts, warnings); !ok)
        return std::unexpected(ok.error());
    if (e->agent_options) plan.agent_options += e->agent_options(resolved);
    EventView view = e->view(resolved);
    view.name = names[i];  // as given: "-e cpu" writes out.cpu.html
    view.unit = e->unit;
    plan.views.push_back(std::move(view));
  }
  return plan;
}

}  // namespace ember::events
