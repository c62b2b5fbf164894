// `ember jvm PID --track REGEX`: the instances and bytes of the classes
// matching REGEX, from a class histogram every --every seconds, as a line
// chart page or CSV (JProfiler's class tracker).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "flamegraph/output.h"
#include "user/java/java_attach.h"
#include "user/java/jvm.h"

extern "C" const char ember_track_html[], ember_track_html_end[];

namespace ember {
namespace {

// A page with thousands of lines says nothing: the classes of most bytes at
// their peak are drawn, the rest counted.
constexpr size_t kMaxSeries = 40;
constexpr std::string_view kPlaceholder = "@EMBER_TRACK@";

// The classes of most bytes at their peak, at most kMaxSeries; how many were left out.
size_t keep_biggest(ClassTrack& track) {
  auto peak = [](const ClassTrack::Series& s) { return *std::max_element(s.bytes.begin(), s.bytes.end()); };
  std::stable_sort(track.series.begin(), track.series.end(),
                   [&](const ClassTrack::Series& a, const ClassTrack::Series& b) { return peak(a) > peak(b); });
  size_t dropped = track.series.size() > kMaxSeries ? track.series.size() - kMaxSeries : 0;
  track.series.resize(track.series.size() - dropped);
  return dropped;
}

}  // namespace

std::string track_csv(const ClassTrack& track) {
  std::string out = "seconds,class,instances,bytes\n";
  char buf[64];
  for (size_t t = 0; t < track.times.size(); ++t)
    for (const ClassTrack::Series& s : track.series) {
      std::snprintf(buf, sizeof buf, "%.3f,", track.times[t]);
      out += buf;
      // Class names hold no comma or quote (Java identifiers, '$', '[]', '.').
      out += s.name + "," + std::to_string(s.instances[t]) + "," + std::to_string(s.bytes[t]) + "\n";
    }
  return out;
}

std::string track_html(const ClassTrack& track, const std::string& title, const std::string& facts_json) {
  nlohmann::json data;
  data["title"] = title;
  data["facts"] = nlohmann::json::parse(facts_json);
  data["times"] = track.times;
  data["series"] = nlohmann::json::array();
  for (const ClassTrack::Series& s : track.series)
    data["series"].push_back({{"name", s.name}, {"instances", s.instances}, {"bytes", s.bytes}});
  // No '<' inside the script element: nothing in a name can close it.
  std::string json, dumped = data.dump();
  for (char c : dumped) json += c == '<' ? std::string("\\u003c") : std::string(1, c);
  std::string_view page(ember_track_html, static_cast<size_t>(ember_track_html_end - ember_track_html));
  size_t at = page.find(kPlaceholder);
  return std::string(page.substr(0, at)) + json + std::string(page.substr(at + kPlaceholder.size()));
}

int run_track(const JvmOptions& o) {
  if (o.heap || o.histo || !o.save.empty() || !o.diff.empty())
    return fail("--track goes without --heap, --histo, --save and --diff");
  if (!(o.every >= 0.1)) return fail("--every must be 0.1 seconds or more");
  std::regex pattern;
  try {
    pattern = std::regex(o.track, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return fail("--track '" + o.track + "': not a regular expression (" + e.what() + ")");
  }
  if (!o.output.empty()) {
    if (!o.output.ends_with(".html") && !o.output.ends_with(".csv"))
      return fail("--track writes .html (a chart) or .csv, not " + o.output);
    if (auto w = flamegraph::check_writable(o.output); !w) return fail(w.error());
  }
  auto jvm = java::inspect_jvm(o.pid);
  if (!jvm) return fail(jvm.error());
  if (auto a = check_attachable(o.pid, "--track"); !a) return fail(a.error());
  auto telemetry = read_jvm_telemetry(o.pid);
  std::string jvm_name = "JVM " + std::to_string(o.pid) +
                         (telemetry && !telemetry->main_class.empty() ? " (" + telemetry->main_class + ")" : "");
  catch_stop_signals();

  std::fprintf(stderr, "ember: tracking the classes of %s matching /%s/: a histogram every %g s (%s)%s\n",
               jvm_name.c_str(), o.track.c_str(), o.every,
               o.live ? "reachable objects: the JVM runs a full GC for each" : "all objects, garbage included",
               o.duration > 0 ? "" : "; Ctrl-C ends it");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::string started = utc_now();
  const auto every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.every));
  ClassTrack track;
  std::string ended;
  // Histograms at 0, every, 2 every ... and the duration's end, which is
  // the last: timed from the schedule, not from when the previous one
  // finished (-d 20 at 10 s took the one at 20 s as past the end).
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration));
  for (auto next = start; !stop_requested();) {
    double at = std::chrono::duration<double>(Clock::now() - start).count();
    auto histogram = class_histogram(o.pid, o.live);
    if (!histogram) {
      if (java::has_exited(o.pid)) {
        ended = jvm_name + " exited";
        break;
      }
      return fail(histogram.error());
    }
    track.add(at, *histogram, [&](const std::string& name) { return std::regex_search(name, pattern); });
    int64_t instances = 0, bytes = 0;
    for (const ClassTrack::Series& s : track.series) {
      instances += s.instances.back();
      bytes += s.bytes.back();
    }
    std::printf("%8.1f s  %zu classes  %12lld instances  %14lld bytes\n", at, track.series.size(),
                static_cast<long long>(instances), static_cast<long long>(bytes));
    std::fflush(stdout);
    if (o.duration > 0 && next >= end) break;
    next += every;
    if (o.duration > 0) next = std::min(next, end);
    while (Clock::now() < next && !stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!ended.empty()) std::fprintf(stderr, "ember: %s\n", ended.c_str());
  size_t dropped = keep_biggest(track);
  if (track.series.empty()) std::fprintf(stderr, "ember: no class of %s matched /%s/\n", jvm_name.c_str(), o.track.c_str());
  if (o.output.empty()) return 0;
  std::string contents;
  if (o.output.ends_with(".csv")) {
    contents = track_csv(track);
  } else {
    nlohmann::json facts = {{"jvm", jvm_name},
                            {"pattern", o.track},
                            {"every", o.every},
                            {"live", o.live},
                            {"started", started},
                            {"note", dropped ? std::to_string(dropped) + " smaller classes left out" : ""}};
    contents = track_html(track, "Classes of " + jvm_name + " matching /" + o.track + "/", facts.dump());
  }
  if (auto w = flamegraph::write_atomically(o.output, contents); !w) return fail(w.error());
  std::fprintf(stderr, "ember: wrote %s (%zu histograms, %zu classes)\n", o.output.c_str(), track.times.size(),
               track.series.size());
  return 0;
}

}  // namespace ember
