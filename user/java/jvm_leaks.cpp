// `ember jvm PID --leaks`: a leak hunt in one report. ember's agent samples
// the JVM's allocations and follows each sampled object for a while (as
// `record -e alloc --live --min-age` does); the sites whose old objects
// grew at a steady rate are the suspects (flamegraph/leaks.h). Then the
// agent holds the objects it still follows (its `pin`, agent/protocol.h),
// the JVM dumps its heap, and ember reads from the dump what keeps each
// suspect's objects alive: their shortest paths from the GC roots, named
// by field, and what the deepest object they share retains. Objects no
// root reaches any more are garbage the next collection frees: counted,
// never reported as held.
#include <malloc.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "agent/protocol.h"
#include "flamegraph/leaks.h"
#include "flamegraph/output.h"
#include "symbolizer/jit_map.h"
#include "symbolizer/proc_maps.h"
#include "user/heap/heap_report.h"
#include "user/java/heap_dump.h"
#include "user/java/java.h"
#include "user/java/java_profiles.h"
#include "user/java/jvm.h"

namespace ember {
namespace {

constexpr double kDefaultSeconds = 60;
// Sites reported when none grows steadily: those of most old live bytes.
constexpr size_t kOldSitesShown = 5;
constexpr size_t kPathsShown = 3;
// How long the agent may take to pin, and the stream to show it.
constexpr int kPinTimeoutMs = 15000;

// steady_clock is CLOCK_MONOTONIC, the agent's A lines' clock.
uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::string random_token() {
  std::random_device random;
  char text[24];
  std::snprintf(text, sizeof text, "%08x%08x", random(), random());
  return text;
}

// One agent's stream, read as it grows: its Java events, and the code map
// only for where the stream goes on (its R lines).
struct Stream {
  explicit Stream(JavaSession::Agent a) : agent(std::move(a)) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  JavaSession::Agent agent;
  symbolizer::JitMap map;
  java::JavaEvents events;

  void read() { read_agent_stream(agent.fd, agent.name, agent.files, map, &events); }
  ~Stream() {
    if (agent.fd >= 0) close(agent.fd);
  }
};

// A site of objects old enough by the end that the program holds, with
// how the heap holds them.
struct Site {
  uint32_t stack = 0;                                 // in the profile of held objects
  const flamegraph::LeakSuspect* suspect = nullptr;  // they grew at a steady rate
  std::vector<const heap::Holding*> held;            // its sampled objects, in the dump
};

std::string figures(const flamegraph::Profile& profile, const Site& site) {
  char line[256];
  if (const flamegraph::LeakSuspect* s = site.suspect)
    std::snprintf(line, sizeof line, "%s held, growing %s a minute (a line fits at %.2f)",
                  heap::human_bytes(s->live).c_str(), heap::human_bytes(static_cast<uint64_t>(s->rate_per_s * 60)).c_str(),
                  s->fit);
  else
    std::snprintf(line, sizeof line, "%s held, not growing steadily",
                  heap::human_bytes(profile.stacks()[site.stack].weight).c_str());
  return line;
}

// How the heap holds a site's objects: its most common paths, each with
// the holder they share, as the report and the page's Leaks panel say it.
std::vector<std::string> held_lines(const Site& site, const heap::HeapGraph& graph) {
  std::vector<std::string> lines;
  std::vector<heap::HeldAlike> paths = heap::group_holdings(site.held);
  char share[32];
  for (size_t k = 0; k < paths.size() && k < kPathsShown; ++k) {
    const heap::HeldAlike& p = paths[k];
    std::snprintf(share, sizeof share, "%5.1f%% through: ",
                  100.0 * static_cast<double>(p.objects) / static_cast<double>(site.held.size()));
    lines.push_back(share + p.path);
    if (p.holder != heap::kNoObject)
      lines.push_back("       all through one " + heap::object_name(graph, p.holder) + ", which retains " +
                      heap::human_bytes(p.holder_retained));
  }
  if (paths.size() > kPathsShown) lines.push_back("(" + std::to_string(paths.size() - kPathsShown) + " more paths)");
  return lines;
}

// One site of the report, numbered `n`: its figures and how the heap holds it.
std::string site_report(const flamegraph::Profile& profile, const Site& site, size_t n, const heap::HeapGraph& graph) {
  char line[512];
  std::snprintf(line, sizeof line, "\n%zu. %s\n   %s, from %s sampled objects\n", n,
                flamegraph::site_name(profile, site.stack).c_str(), figures(profile, site).c_str(),
                heap::grouped(site.held.size()).c_str());
  std::string out = line;
  for (const std::string& held : held_lines(site, graph)) out += "   " + held + "\n";
  return out;
}

// The stacks of a profile, heaviest first.
std::vector<uint32_t> heaviest_stacks(const flamegraph::Profile& profile) {
  std::vector<uint32_t> stacks;
  for (uint32_t k = 0; k < profile.stacks().size(); ++k)
    if (profile.stacks()[k].weight) stacks.push_back(k);
  std::stable_sort(stacks.begin(), stacks.end(),
                   [&](uint32_t a, uint32_t b) { return profile.stacks()[a].weight > profile.stacks()[b].weight; });
  return stacks;
}

// The report's text, `top` sites at most in each part: the suspects
// (their held objects grew at a steady rate), fastest first, or where there
// are none the sites of most held bytes; then the sites of most garbage,
// old objects that no GC root reaches.
std::string leak_report(const flamegraph::Profile& held, const flamegraph::LeakSuspects& found,
                        const std::vector<Site>& sites, const flamegraph::Profile& garbage,
                        const heap::HeapGraph& graph, size_t top) {
  std::vector<const Site*> shown;
  for (const flamegraph::LeakSuspect& s : found.suspects) shown.push_back(&sites[s.stack]);
  std::string out;
  if (!shown.empty()) {
    out += "\nLeak suspects: sites whose old objects are held and grew at a steady rate, the fastest first:\n";
  } else {
    for (uint32_t k : heaviest_stacks(held))
      if (shown.size() < std::min(top, kOldSitesShown)) shown.push_back(&sites[k]);
    out += shown.empty() ? "\nNo leak suspect: the program holds no object old enough.\n"
                         : "\nNo leak suspect: no site's held objects grew at a steady rate. The sites of most held "
                           "bytes:\n";
  }
  for (size_t i = 0; i < shown.size() && i < top; ++i) out += site_report(held, *shown[i], i + 1, graph);
  std::vector<uint32_t> dropped = heaviest_stacks(garbage);
  if (!dropped.empty()) out += "\nNot leaks: sites of old objects no GC root reaches (garbage not collected yet):\n";
  for (size_t i = 0; i < dropped.size() && i < top; ++i)
    out += "  " + heap::human_bytes(garbage.stacks()[dropped[i]].weight) + "  " +
           flamegraph::site_name(garbage, dropped[i]) + "\n";
  return out;
}

// Attaches the agent and follows the JVM's allocations for `span_ns` (or
// until Ctrl-C); the stream read to the end, or why not.
std::expected<void, std::string> follow(JavaSession& java, pid_t pid, const std::string& jvm_name, uint64_t span_ns,
                                        std::optional<Stream>& stream, uint64_t& start_ns, uint64_t& end_ns) {
  std::vector<JavaSession::Agent> agents = java.attach({pid}, true, [] { return stop_requested(); });
  if (agents.empty()) return std::unexpected("could not attach ember's agent to " + jvm_name + " (the reason is above)");
  stream.emplace(std::move(agents.front()));
  catch_stop_signals();
  start_ns = monotonic_ns();
  while (!stop_requested() && monotonic_ns() - start_ns < span_ns) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stream->read();
    if (java::has_exited(pid)) return std::unexpected(jvm_name + " exited while its allocations were followed");
  }
  end_ns = monotonic_ns();
  stream->read();
  for (const std::string& what : stream->events.unavailable())
    if (what == "alloc") return std::unexpected(jvm_name + " refused allocation sampling (JDK 11 or later needed)");
  return {};
}

// Has the agent hold the objects it still follows (its `pin`), then the
// JVM dump its heap (within --heap's limit unless `force`: the heap may
// have grown since); the agent lets go of them once the dump is written.
std::expected<HeapDump, std::string> pin_and_dump(JavaSession& java, const java::JvmProcess& jvm,
                                                  const std::string& jvm_name, Stream& stream, const std::string& token,
                                                  bool force) {
  auto agent_path = agent_for(jvm, default_agent_path());
  if (!agent_path) return std::unexpected(jvm_name + ": " + agent_path.error());
  if (auto r = java::load_agent(jvm.pid, *agent_path, std::string(agent::protocol::args::kPin) + "=" + token,
                                kPinTimeoutMs);
      !r)
    return std::unexpected(jvm_name + ": " + r.error());
  const java::JavaEvents& events = stream.events;
  for (auto asked = std::chrono::steady_clock::now();
       !(events.pin() && events.pin()->token == token) && events.pin_unavailable().empty();) {
    if (std::chrono::steady_clock::now() - asked > std::chrono::milliseconds(kPinTimeoutMs))
      return std::unexpected(jvm_name + "'s agent did not say which objects it holds");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stream.read();
  }
  if (!events.pin_unavailable().empty())
    return std::unexpected(jvm_name + "'s agent could not hold its objects for the dump: " + events.pin_unavailable());
  auto dumped = dump_heap(jvm.pid, force, "--leaks");
  java.detach();
  return dumped;
}

}  // namespace

int run_leaks(const JvmOptions& o) {
  if (o.histo || o.live || o.heap || !o.track.empty() || !o.alloc.empty() || !o.save.empty() || !o.diff.empty())
    return fail("--leaks goes without --histo, --live, --heap, --track, --alloc, --save and --diff");
  const double seconds = o.duration > 0 ? o.duration : kDefaultSeconds;
  const uint64_t span_ns = static_cast<uint64_t>(seconds * 1e9);
  const uint64_t min_age_ns = o.min_age_ns ? o.min_age_ns : span_ns / 4;
  if (min_age_ns >= span_ns)
    return fail("--min-age must be shorter than the " + std::to_string(static_cast<int>(seconds)) +
                " s followed (-d): no object could be old enough");
  if (!o.output.empty()) {
    if (auto f = flamegraph::format_for_path(o.output); !f) return fail(f.error());
    if (auto w = flamegraph::check_writable(o.output); !w) return fail(w.error());
  }
  auto jvm = java::inspect_jvm(o.pid);
  if (!jvm) return fail(jvm.error());
  if (auto a = check_attachable(o.pid, "--leaks"); !a) return fail(a.error());
  // The dump at the end must be allowed before a minute is spent.
  if (auto size = check_dump_size(o.pid, o.force, "--leaks"); !size) return fail(size.error());
  auto telemetry = read_telemetry(o.pid);
  std::string main_class = telemetry && !telemetry->main_class.empty() ? " (" + telemetry->main_class + ")" : "";
  std::string jvm_name = "JVM " + std::to_string(o.pid) + main_class;
  std::string started = symbolizer::process_start_text(static_cast<uint32_t>(o.pid));

  namespace args = agent::protocol::args;
  JavaSession java(default_agent_path(),
                   std::string(",") + args::kAlloc + "=" + std::to_string(o.alloc_interval) + "," + args::kLive + "," +
                       args::kNoGc,
                   true,  // ember walks no stacks here: no frame-pointer advice
                   static_cast<int>(o.attach_timeout * 1000), "--attach-timeout", "no leak report without it");
  std::fprintf(stderr,
               "ember: following the allocations of %s for %g s (a sample every %" PRIu64
               " bytes; Ctrl-C ends it sooner), then its heap is dumped\n",
               jvm_name.c_str(), seconds, o.alloc_interval);
  std::optional<Stream> stream;
  uint64_t start_ns = 0, end_ns = 0;
  if (auto r = follow(java, o.pid, jvm_name, span_ns, stream, start_ns, end_ns); !r) return fail(r.error());
  const std::string token = random_token();
  auto dumped = pin_and_dump(java, *jvm, jvm_name, *stream, token, o.force);
  if (!dumped) return fail(dumped.error());
  if (symbolizer::process_start_text(static_cast<uint32_t>(o.pid)) != started)
    return fail("JVM " + std::to_string(o.pid) + " restarted while ember followed it: its objects are not the ones followed");

  // The graph of the heap, and in it the pinned objects old enough by the end.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // as --heap: each stage's arrays returned when freed
  const MappedFile& dump = *dumped->file;
  auto done_with = [&dump](size_t offset) { dump.done_with(offset); };
  auto graph = heap::read_heap_graph(dump.view(), heap_layout(o.pid), done_with,
                                     std::string(agent::protocol::kPinMarker) + " " + token);
  if (!graph) return fail(jvm_name + ": " + graph.error());
  if (!graph->pin_found()) return fail(jvm_name + "'s heap dump does not hold the objects ember's agent held");
  const java::JavaEvents& events = stream->events;
  std::unordered_set<uint64_t> old_samples;
  for (const auto& a : events.live_allocations(min_age_ns, end_ns)) old_samples.insert(a.sample);
  std::vector<uint64_t> samples;  // of the objects followed in the heap
  std::vector<heap::ObjectId> objects;
  for (size_t i = 0; i < graph->pinned().size() && i + 1 < events.pin()->samples.size(); ++i)
    if (uint64_t sample = events.pin()->samples[i + 1]; old_samples.contains(sample) && graph->pinned()[i] != heap::kNoObject) {
      samples.push_back(sample);
      objects.push_back(graph->pinned()[i]);
    }
  auto analyzed = heap::analyze_heap(*graph, dump.view(), 0, done_with, objects);
  if (!analyzed) return fail(jvm_name + ": " + analyzed.error());
  std::unordered_map<uint64_t, const heap::Holding*> holding_of;
  for (size_t i = 0; i < samples.size(); ++i) holding_of[samples[i]] = &analyzed->followed[i];
  auto held = [&](uint64_t sample) {
    auto it = holding_of.find(sample);
    return it != holding_of.end() && it->second->reached();
  };

  // The profiles of the objects held, and of the garbage: sites by stack.
  JavaProfileOptions options;
  options.live_only = true;
  options.min_age_ns = min_age_ns;
  options.end_ns = end_ns;
  options.start_ns = start_ns;
  std::unordered_map<java::JavaEvents::Site, uint32_t, java::JavaEvents::SiteHash> stack_of;
  options.on_site = [&](const java::JavaEvents::Site& site, uint32_t stack) { stack_of[site] = stack; };
  options.keep_sample = held;
  JavaProcess process{static_cast<uint32_t>(o.pid), java::process_comm(o.pid)};
  flamegraph::Profile held_profile = java_profile(events, JavaProfileKind::AllocBytes, process, options);
  char age[32];
  std::snprintf(age, sizeof age, "%g s", min_age_ns / 1e9);
  held_profile.info.emplace_back("min-age", age);
  held_profile.info.emplace_back("held", "only objects a GC root reached in a heap dump at the end");
  held_profile.duration_ns = end_ns - start_ns;
  std::vector<Site> sites(held_profile.stacks().size());
  for (uint32_t k = 0; k < sites.size(); ++k) sites[k].stack = k;
  for (const auto& a : events.live_allocations(min_age_ns, end_ns))
    if (auto it = stack_of.find(a.site); it != stack_of.end() && held(a.sample))
      sites[it->second].held.push_back(holding_of[a.sample]);
  flamegraph::LeakSuspects found = flamegraph::find_leak_suspects(held_profile);
  for (const flamegraph::LeakSuspect& s : found.suspects) sites[s.stack].suspect = &s;
  options.on_site = nullptr;
  options.keep_sample = [&](uint64_t sample) { return holding_of.contains(sample) && !held(sample); };
  flamegraph::Profile garbage_profile = java_profile(events, JavaProfileKind::AllocBytes, process, options);

  uint64_t reached = 0;
  for (const heap::Holding& h : analyzed->followed) reached += h.reached();
  std::printf("%s: %.1f s of allocations followed (a sample every %" PRIu64
              " bytes); the dump paused the JVM for %s%.3f s\n"
              "%s sampled objects still live at the end, %s of them at least %s old: %s held, %s garbage\n",
              jvm_name.c_str(), (end_ns - start_ns) / 1e9, o.alloc_interval, dumped->pause_at_most ? "up to " : "",
              static_cast<double>(dumped->pause.count()) / 1e9, heap::grouped(events.live_allocations().size()).c_str(),
              heap::grouped(old_samples.size()).c_str(), age, heap::grouped(reached).c_str(),
              heap::grouped(analyzed->followed.size() - reached).c_str());
  std::fputs(leak_report(held_profile, found, sites, garbage_profile, *graph, o.top).c_str(), stdout);
  std::fflush(stdout);
  if (!o.output.empty()) {
    flamegraph::HtmlOptions html;
    html.title = "Leaks of " + jvm_name + ": bytes held, allocated at least " + std::string(age) + " before the end";
    for (const Site& site : sites)
      if (!site.held.empty()) html.held[site.stack] = held_lines(site, *graph);
    if (auto w = flamegraph::write_profile(held_profile, o.output, html); !w) return fail(w.error());
    std::fprintf(stderr, "ember: wrote %s\n", o.output.c_str());
  }
  return 0;
}

}  // namespace ember
