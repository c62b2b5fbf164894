#include "user/java/java_profiles.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "symbolizer/profile_frames.h"

namespace ember {
namespace {

using flamegraph::Frame;
using flamegraph::FrameId;
using flamegraph::FrameKind;
using java::JavaEvents;

// Frames of native code by (library, address): the function, then what
// was inlined into it at the call site.
using NativeNames = std::map<std::pair<uint32_t, uint64_t>, std::vector<FrameId>>;

std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

// Names every native frame of `sites` at once, a batch per library.
template <class Sites>
NativeNames name_native_frames(const JavaEvents& events, const Sites& sites, uint32_t pid,
                               const JavaProfileOptions& options, flamegraph::Profile& profile) {
  std::map<uint32_t, std::vector<uint64_t>> wanted;  // library -> addresses
  NativeNames names;
  for (const auto& [site, w] : sites)
    for (const JavaEvents::NativeFrame& f : events.native_stack(site.native))
      if (names.try_emplace({f.library, f.address}).second) wanted[f.library].push_back(f.address);
  const auto& libraries = events.native_libraries();
  for (const auto& [library, addresses] : wanted) {
    if (library == JavaEvents::kNoLibrary) {
      for (uint64_t a : addresses) names[{library, a}] = {profile.intern(Frame{"[unknown]", FrameKind::Unknown, {}})};
      continue;
    }
    const std::string& path = libraries[library].path;
    std::vector<symbolizer::Symbol> symbols;
    if (options.name_native) symbols = options.name_native(pid, path, addresses);
    for (size_t i = 0; i < addresses.size(); ++i) {
      std::vector<FrameId>& ids = names[{library, addresses[i]}];
      if (std::vector<Frame> named = i < symbols.size() ? profile_frames(symbols[i]) : std::vector<Frame>{};
          !named.empty()) {
        for (const Frame& f : named) ids.push_back(profile.intern(f));
      } else {
        std::string base = path.substr(path.rfind('/') + 1);
        ids.push_back(profile.intern(Frame{base + "+" + hex(addresses[i]), FrameKind::Unknown, path}));
      }
    }
  }
  return names;
}

// Frames of one site, root first.
void site_frames(const JavaEvents& events, const JavaEvents::Site& site, FrameId root,
                 const JavaProfileOptions& options, const NativeNames& native_names, flamegraph::Profile& profile,
                 std::vector<FrameId>& out) {
  out.clear();
  out.push_back(root);
  if (options.thread_frames) {
    std::string_view name = events.thread_name(site.tid);
    out.push_back(profile.intern(Frame{"[" + std::string(name.empty() ? "?" : name) + " tid=" +
                                           std::to_string(site.tid) + "]",
                                       FrameKind::Thread,
                                       {}}));
  }
  const JavaEvents::Stack& stack = events.stack(site.stack);
  // The agent keeps the innermost frames: what is missing is at the root.
  if (stack.truncated) out.push_back(profile.intern(Frame{"[truncated]", FrameKind::Unknown, {}}));
  // GetStackTrace does not say whether a frame runs compiled or
  // interpreted: all Java frames are Jit here.
  for (auto m = stack.methods.rbegin(); m != stack.methods.rend(); ++m)
    out.push_back(profile.intern(Frame{std::string(events.method(*m)), FrameKind::Jit, {}}));
  // Native code that allocated: above the native method's frame, up to the
  // JNI function it called.
  const auto& native = events.native_stack(site.native);
  for (auto f = native.rbegin(); f != native.rend(); ++f) {
    const std::vector<FrameId>& ids = native_names.at({f->library, f->address});
    out.insert(out.end(), ids.begin(), ids.end());
  }
  out.push_back(profile.intern(Frame{std::string(events.class_name(site.klass)), FrameKind::Alloc, {}}));
}

uint64_t rounded(double v) { return v > 0 ? static_cast<uint64_t>(std::llround(v)) : 0; }

std::string bytes_text(uint64_t n) { return std::to_string(n) + " bytes"; }

std::string seconds_text(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", ns / 1e9);
  return text;
}

}  // namespace

std::string jvms_note_entry(uint32_t pid, const std::string& started) {
  return std::to_string(pid) + (started.empty() ? "" : " (started " + started + ")");
}

std::optional<std::string> jvm_started_in_note(std::string_view note, uint32_t pid) {
  const std::string id = std::to_string(pid), time = " (started ";
  for (size_t at = 0; at < note.size();) {
    size_t end = std::min(note.find(", ", at), note.size());
    std::string_view entry = note.substr(at, end - at);
    at = end + 2;
    if (entry == id) return "";
    if (entry.starts_with(id + time) && entry.ends_with(')'))
      return std::string(entry.substr(id.size() + time.size(), entry.size() - id.size() - time.size() - 1));
  }
  return std::nullopt;
}

std::string_view java_event_name(JavaProfileKind kind) {
  switch (kind) {
    case JavaProfileKind::AllocBytes: return "alloc";
    case JavaProfileKind::AllocObjects: return "alloc-objects";
    case JavaProfileKind::Lock: return "lock";
  }
  return "";
}

std::string_view java_unit(JavaProfileKind kind) {
  switch (kind) {
    case JavaProfileKind::AllocBytes: return "bytes";
    case JavaProfileKind::AllocObjects: return "samples";
    case JavaProfileKind::Lock: return "ns";
  }
  return "";
}

void add_java_profile(const JavaEvents& events, JavaProfileKind kind, const JavaProcess& process,
                      const JavaProfileOptions& options, flamegraph::Profile& profile) {
  std::string root = options.pid_frames ? process.name + " (" + std::to_string(process.pid) + ")" : process.name;
  FrameId root_id = profile.intern(Frame{root, FrameKind::Process, {}});
  std::vector<FrameId> frames;
  if (kind == JavaProfileKind::Lock) {
    for (const auto& [site, w] : events.lock_sites()) {
      if (w.wait_ns == 0) continue;
      site_frames(events, site, root_id, options, {}, profile, frames);
      profile.add(frames, w.wait_ns);
    }
    return;
  }
  auto weight_of = [&](const JavaEvents::AllocWeight& w) {
    return kind == JavaProfileKind::AllocBytes ? w.bytes : w.objects;
  };
  std::unordered_map<JavaEvents::Site, uint32_t, JavaEvents::SiteHash> stack_of;
  auto add_sites = [&](const std::unordered_map<JavaEvents::Site, JavaEvents::AllocWeight, JavaEvents::SiteHash>& sites) {
    NativeNames native_names = name_native_frames(events, sites, process.pid, options, profile);
    for (const auto& [site, w] : sites) {
      uint64_t weight = rounded(weight_of(w));
      if (weight == 0) continue;
      site_frames(events, site, root_id, options, native_names, profile, frames);
      stack_of[site] = profile.add(frames, weight);
      if (options.on_site) options.on_site(site, stack_of[site]);
    }
  };
  if (!options.live_only) {
    add_sites(events.alloc_sites());
    return;
  }
  // Summed oldest first, and each allocation's share on the timeline is
  // the step its rounded running sum takes: the shares add up to the
  // site's rounded weight exactly.
  std::vector<JavaEvents::LiveAllocation> live =
      events.live_allocations(options.min_age_ns, options.end_ns, options.min_gcs);
  if (options.keep_sample)
    std::erase_if(live, [&](const JavaEvents::LiveAllocation& a) { return !options.keep_sample(a.sample); });
  std::unordered_map<JavaEvents::Site, JavaEvents::AllocWeight, JavaEvents::SiteHash> sites;
  std::vector<std::pair<uint64_t, uint64_t>> steps;  // per allocation: its site's rounded sum before and after
  steps.reserve(live.size());
  for (const auto& a : live) {
    JavaEvents::AllocWeight& w = sites[a.site];
    uint64_t before = rounded(weight_of(w));
    w.samples += a.weight.samples;
    w.bytes += a.weight.bytes;
    w.objects += a.weight.objects;
    steps.emplace_back(before, rounded(weight_of(w)));
  }
  add_sites(sites);
  if (!options.start_ns) return;
  for (size_t i = 0; i < live.size(); ++i) {
    auto stack = stack_of.find(live[i].site);
    if (stack == stack_of.end() || steps[i].second == steps[i].first) continue;
    uint64_t t = live[i].time_ns > options.start_ns ? live[i].time_ns - options.start_ns : 0;
    profile.timeline.push_back({t, steps[i].second - steps[i].first, stack->second});
  }
}

std::vector<std::pair<std::string, std::string>> java_profile_info(const JavaEvents& events, JavaProfileKind kind,
                                                                   const JavaProfileOptions& options) {
  const JavaEvents::Stats& s = events.stats();
  std::vector<std::pair<std::string, std::string>> info;
  auto add = [&](std::string key, uint64_t n) { info.emplace_back(std::move(key), std::to_string(n)); };
  bool alloc = kind != JavaProfileKind::Lock;
  for (const std::string& what : events.unavailable())
    if ((what == "alloc") == alloc)
      info.emplace_back(what + " events", "unavailable: the JVM refused them (JDK 11 or later needed for alloc)");
  if (alloc) {
    if (events.alloc_interval()) info.emplace_back("alloc interval", bytes_text(events.alloc_interval()));
    add("alloc samples", s.alloc_samples);
    if (s.native_alloc_samples) add("alloc samples from native code", s.native_alloc_samples);
    if (options.live_only) {
      if (!events.live())
        info.emplace_back("live", "not recorded: the agent did not follow objects (option live)");
      else if (events.live_end() == "gc")
        info.emplace_back("live", "objects left after a full GC at the end");
      else if (events.live_end() == "none" && (options.min_age_ns || options.min_gcs)) {
        std::string kept = "objects not yet collected at the end";
        if (options.min_age_ns) kept += " and allocated at least " + seconds_text(options.min_age_ns) + " before it";
        if (options.min_gcs) kept += " and through at least " + std::to_string(options.min_gcs) + " collections";
        info.emplace_back("live", kept + " (no GC forced)");
      }
      else if (events.live_end() == "none")
        info.emplace_back("live", "objects not yet collected at the end, garbage included (no final GC: the JVM "
                                  "exited with a collector other than G1, where one would hang the exit)");
      else
        info.emplace_back("live", "objects not yet collected so far, garbage included (the stream has not ended)");
      if (options.min_gcs && !events.gcs())
        info.emplace_back("collections", "not counted by this JVM's agent (an older one loaded by an earlier ember, "
                                         "or the JVM refused its GC events: see its stderr): --min-gcs keeps nothing; "
                                         "restart the JVM for this ember's agent, or use --min-age");
      else if (events.gcs())
        add("collections", *events.gcs());
      add("live samples", s.live_followed - s.freed);
      add("freed samples", s.freed);
      // Not followed: they cannot be called live or freed, so they are left
      // out of the live graph — said here rather than dropped silently.
      if (s.live_untracked) add("samples not followed (live table full)", s.live_untracked);
    }
  } else {
    if (events.lock_interval()) info.emplace_back("lock interval", std::to_string(events.lock_interval()) + " ns");
    add("lock samples", s.lock_samples);
  }
  if (s.truncated_stacks) add("truncated Java stacks", s.truncated_stacks);
  for (const auto& [name, n] : s.agent_counters)
    if (n) add("agent " + name, n);
  if (s.bad_lines) add("bad event lines", s.bad_lines);
  return info;
}

flamegraph::Profile java_profile(const JavaEvents& events, JavaProfileKind kind, const JavaProcess& process,
                                 const JavaProfileOptions& options) {
  flamegraph::Profile profile;
  profile.event = std::string(java_event_name(kind));
  if (kind != JavaProfileKind::Lock && options.live_only) profile.event += "-live";
  profile.unit = std::string(java_unit(kind));
  add_java_profile(events, kind, process, options, profile);
  profile.info = java_profile_info(events, kind, options);
  return profile;
}

}  // namespace ember
