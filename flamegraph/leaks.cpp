#include "flamegraph/leaks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <unordered_map>

namespace ember::flamegraph {
namespace {

// Equal steps of the span, each a point of the fitted curve: enough to
// tell a line from a step, few enough that a slow leak's sparse samples
// still fall in most of them.
constexpr size_t kSteps = 30;
// Fewer samples, or samples in fewer steps, tell nothing of a rate.
constexpr uint32_t kMinRecords = 5;
constexpr size_t kMinSteps = 3;

// The recording's length: the profile's, else up to its last timed weight.
uint64_t duration_of(const Profile& profile) {
  uint64_t last = profile.timeline.empty() ? 0 : profile.timeline.back().time_ns + profile.time_step_ns;
  return std::max(profile.duration_ns, last);
}

// Least squares of the kept weight on time, with an intercept: the slope
// and R² (0 when the weight does not vary: nothing kept after the start).
std::pair<double, double> fit_line(const std::vector<double>& kept, double step_s) {
  const double n = static_cast<double>(kept.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    double x = (i + 1) * step_s, y = kept[i];
    sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
  }
  double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cov = sxy - sx * sy / n;
  if (vx <= 0 || vy <= 0) return {0, 0};
  return {cov / vx, std::clamp(cov * cov / (vx * vy), 0.0, 1.0)};
}

std::string scaled(double value, const std::string& unit) {
  char text[48];
  if (unit != "bytes") {
    std::snprintf(text, sizeof text, "%.3g %s", value, unit.c_str());
    return text;
  }
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (value >= 1024 && u + 1 < std::size(units)) value /= 1024, ++u;
  std::snprintf(text, sizeof text, u ? "%.1f %s" : "%.0f %s", value, units[u]);
  return text;
}

}  // namespace

bool is_live_profile(const Profile& profile) { return profile.info_value("live") != nullptr; }

LeakSuspects find_leak_suspects(const Profile& profile) {
  LeakSuspects out;
  const uint64_t duration = duration_of(profile);
  if (!is_live_profile(profile) || profile.timeline.empty() || duration == 0) return out;
  const std::string* age = profile.info_value("min-age");
  out.young_ns = age ? static_cast<uint64_t>(std::strtod(age->c_str(), nullptr) * 1e9) : duration / 4;
  // Kept by collections survived (Java's --min-gcs): young is what came
  // after the youngest kept, whenever the collections ran.
  if (profile.info_value("min-gcs")) {
    uint64_t after_last = duration - std::min(duration, profile.timeline.back().time_ns + profile.time_step_ns + 1);
    out.young_ns = age ? std::max(out.young_ns, after_last) : after_last;
  }
  if (out.young_ns >= duration) return out;
  out.span_ns = duration - out.young_ns;

  struct Site {
    std::vector<double> kept = std::vector<double>(kSteps);  // allocated within each step
    std::vector<uint64_t> curve = std::vector<uint64_t>(kCurvePoints);
    uint32_t records = 0;
  };
  std::unordered_map<uint32_t, Site> sites;
  for (const Timed& t : profile.timeline) {
    Site& site = sites[t.stack];
    site.curve[std::min(kCurvePoints - 1, static_cast<size_t>(t.time_ns * kCurvePoints / duration))] += t.weight;
    if (t.time_ns >= out.span_ns) continue;
    site.kept[t.time_ns * kSteps / out.span_ns] += static_cast<double>(t.weight);
    ++site.records;
  }
  const double step_s = out.span_ns / 1e9 / kSteps;
  for (auto& [stack, site] : sites) {
    size_t steps = std::count_if(site.kept.begin(), site.kept.end(), [](double w) { return w > 0; });
    if (site.records < kMinRecords || steps < kMinSteps) continue;
    double old = 0;
    for (double& w : site.kept) w = old += w;  // kept weight allocated before each step's end
    auto [rate, fit] = fit_line(site.kept, step_s);
    if (rate <= 0 || fit < kSteadyFit) continue;
    LeakSuspect s;
    s.stack = stack;
    s.live = profile.stacks()[stack].weight;
    s.old = static_cast<uint64_t>(old);
    s.rate_per_s = rate;
    s.fit = fit;
    s.records = site.records;
    uint64_t sum = 0;
    for (uint64_t& c : site.curve) c = sum += c;
    s.curve = std::move(site.curve);
    out.suspects.push_back(std::move(s));
  }
  std::sort(out.suspects.begin(), out.suspects.end(), [](const LeakSuspect& a, const LeakSuspect& b) {
    return a.rate_per_s != b.rate_per_s ? a.rate_per_s > b.rate_per_s : a.stack < b.stack;
  });
  return out;
}

namespace {

bool pseudo(FrameKind k) { return k == FrameKind::Process || k == FrameKind::Thread; }

// A frame of the program's own language: Java, Python, JavaScript.
bool language(FrameKind k) {
  return k == FrameKind::Jit || k == FrameKind::Inlined || k == FrameKind::Interpreted || k == FrameKind::Python ||
         k == FrameKind::JavaScript;
}

}  // namespace

std::string site_name(const Profile& profile, uint32_t stack, size_t depth) {
  std::vector<const Frame*> inner;  // innermost first, pseudo-frames left out
  for (auto it = profile.stacks()[stack].frames.rbegin(); it != profile.stacks()[stack].frames.rend(); ++it)
    if (!pseudo(profile.frames()[*it].kind)) inner.push_back(&profile.frames()[*it]);
  if (inner.empty()) return "[no frames]";
  // Under an interpreter's own frames (CPython's, V8's), the program's
  // innermost functions say where: the runtime's in between are skipped.
  size_t first_language = 1;
  while (first_language < inner.size() && !language(inner[first_language]->kind)) ++first_language;
  bool skip = first_language > 1 && first_language < inner.size() && !language(inner[0]->kind) &&
              inner[0]->kind != FrameKind::Alloc;
  std::string out = inner[0]->name;
  for (size_t i = skip ? first_language : 1, named = 1; i < inner.size() && named < depth; ++i, ++named)
    out += (skip && i == first_language ? " ← … ← " : " ← ") + inner[i]->name;
  return out;
}

std::string site_function(const Profile& profile, uint32_t stack) {
  const std::vector<FrameId>& frames = profile.stacks()[stack].frames;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (language(profile.frames()[*it].kind)) return profile.frames()[*it].name;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (FrameKind k = profile.frames()[*it].kind; !pseudo(k) && k != FrameKind::Alloc) return profile.frames()[*it].name;
  return "";
}

void write_leak_suspects(const Profile& profile, size_t rows, std::ostream& out) {
  if (profile.timeline.empty()) {
    out << "\nleak suspects: none can be told, this profile has no times (folded stacks have none: read the "
           "recording's .html or .pprof)\n";
    return;
  }
  LeakSuspects found = find_leak_suspects(profile);
  char line[512];
  if (!found.span_ns) {
    out << "\nleak suspects: none can be told, nothing allocated before the last " << found.young_ns / 1e9
        << " s (--min-age) of the recording is live\n";
    return;
  }
  std::snprintf(line, sizeof line,
                "\nleak suspects: sites whose live %s were kept at a steady rate (a line fits at %.2f or better) "
                "from the start to %.1f s before the end (younger may be in flight): %zu\n",
                profile.unit.c_str(), kSteadyFit, found.young_ns / 1e9, found.suspects.size());
  out << line;
  if (found.suspects.empty()) return;
  std::snprintf(line, sizeof line, "%14s %12s %12s %5s %7s  %s\n", "kept/min", "live", "old", "fit", "samples",
                "site");
  out << line;
  for (size_t i = 0; i < found.suspects.size() && i < rows; ++i) {
    const LeakSuspect& s = found.suspects[i];
    std::snprintf(line, sizeof line, "%14s %12s %12s %5.2f %7u  ", scaled(s.rate_per_s * 60, profile.unit).c_str(),
                  scaled(static_cast<double>(s.live), profile.unit).c_str(),
                  scaled(static_cast<double>(s.old), profile.unit).c_str(), s.fit, s.records);
    out << line << site_name(profile, s.stack) << '\n';
  }
}

}  // namespace ember::flamegraph
