#include "user/cli/tools.h"

#include <cstdio>
#include <filesystem>
#include <tuple>
#include <iostream>

#include "flamegraph/input.h"
#include "flamegraph/leaks.h"
#include "flamegraph/output.h"
#include "flamegraph/table.h"
#include "user/fleet/spool_profile.h"

namespace ember {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "ember: %s\n", message.c_str());
  return 1;
}

// Enough skipped lines to see what is wrong, not a screenful per line.
constexpr size_t kWarningsShown = 10;

// Reads a profile, telling the user about the lines it had to skip and,
// in a pprof with several sample types, which one it read. A file that
// yields no samples is an error: an empty report or graph would hide it.
std::expected<flamegraph::Profile, std::string> read(const std::string& path, const std::string& event) {
  auto r = flamegraph::read_profile(path, {event});
  if (!r) return std::unexpected(r.error());
  for (size_t i = 0; i < r->warnings.size() && i < kWarningsShown; ++i)
    std::fprintf(stderr, "ember: warning: %s: %s\n", path.c_str(), r->warnings[i].c_str());
  if (r->warnings.size() > kWarningsShown)
    std::fprintf(stderr, "ember: warning: %s: %zu more lines skipped\n", path.c_str(), r->warnings.size() - kWarningsShown);
  const flamegraph::SampleTypes& types = r->sample_types;
  if (types.names.size() > 1 && event.empty()) {
    std::string all;
    for (const std::string& t : types.names) all += (all.empty() ? "" : ", ") + t;
    std::fprintf(stderr, "ember: %s holds the sample types %s: reading %s (--event chooses)\n", path.c_str(),
                 all.c_str(), types.names[types.read].c_str());
  }
  if (r->profile.stacks().empty()) {
    if (!r->warnings.empty())
      return std::unexpected(path + ": no line is folded stacks ('frame;frame COUNT'): not a profile ember reads");
    return std::unexpected(path + " holds no samples" + (event.empty() ? "" : " of " + event));
  }
  return std::move(r->profile);
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One service's periods of ember agent's spool, merged.
std::expected<flamegraph::Profile, std::string> read_spool(const std::string& dir, const std::string& event,
                                                           const SpoolRange& range) {
  if (range.service.empty()) {
    auto contents = fleet::SpoolCatalog(dir).contents();
    if (!contents) return std::unexpected(contents.error());
    std::string services, last;  // the series come by service
    for (const fleet::SpoolSeries& s : contents->series)
      if (s.service != last) services += (services.empty() ? "" : ", ") + (last = s.service);
    if (services.empty())
      return std::unexpected(dir + " holds no period of an ember agent's spool: give a spool's directory (spool.dir) "
                                   "or a profile file");
    return std::unexpected("give --service: the spool holds " + services);
  }
  fleet::SpoolQuery q;
  q.service = range.service;
  if (!event.empty()) q.type = event;
  for (auto [text, field, out] : {std::tuple{range.from, "--from", &q.from_ns}, std::tuple{range.to, "--to", &q.to_ns}}) {
    if (text.empty()) continue;
    auto t = fleet::parse_time(text);
    if (!t) return std::unexpected(std::string(field) + " '" + text + "' is not a time: give Unix seconds or UTC as 2026-11-26T03:00[:00]");
    *out = *t;
  }
  return fleet::merge_spool(dir, q);
}

// As record says it.
void say_written(const std::string& out, const flamegraph::Profile& profile) {
  std::fprintf(stderr, "ember: wrote %s (%zu stacks)\n", out.c_str(), profile.stacks().size());
}

// Every event of `in` into `out`, both formats that hold several (pprof,
// OTLP). A pprof's "cpu" type after a type of counts is those samples'
// CPU time, not an event of its own.
int convert_every_event(const std::string& in, const std::string& out) {
  auto first = flamegraph::read_profile(in);
  if (!first) return fail(first.error());
  std::vector<flamegraph::Profile> profiles;
  const std::vector<std::string>& names = first->sample_types.names;
  if (names.empty()) profiles.push_back(std::move(first->profile));  // folded stacks, HTML: one graph
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0 && names[i] == "cpu") continue;
    if (i == first->sample_types.read) {
      profiles.push_back(std::move(first->profile));
      continue;
    }
    auto p = read(in, names[i]);
    if (!p) return fail(p.error());
    profiles.push_back(std::move(*p));
  }
  std::erase_if(profiles, [](const flamegraph::Profile& p) { return p.stacks().empty(); });
  if (profiles.empty()) return fail(in + " holds no samples");
  std::vector<const flamegraph::Profile*> all;
  for (const flamegraph::Profile& p : profiles) all.push_back(&p);
  if (auto w = flamegraph::write_profiles(all, out); !w) return fail(w.error());
  size_t stacks = 0;
  for (const flamegraph::Profile& p : profiles) stacks += p.stacks().size();
  std::fprintf(stderr, "ember: wrote %s (%zu events, %zu stacks)\n", out.c_str(), profiles.size(), stacks);
  return 0;
}

}  // namespace

int run_convert(const std::string& in, const std::string& out, const std::string& event, const SpoolRange& spool) {
  bool is_spool = std::filesystem::is_directory(in);
  if (!is_spool && (!spool.service.empty() || !spool.from.empty() || !spool.to.empty()))
    return fail("--service, --from and --to read ember agent's spool: give its directory as the input");
  auto format = flamegraph::format_for_path(out);
  if (!format) return fail(format.error());
  if (!is_spool && event.empty() && flamegraph::holds_every_event(*format)) return convert_every_event(in, out);
  auto profile = is_spool ? read_spool(in, event, spool) : read(in, event);
  if (!profile) return fail(profile.error());
  flamegraph::HtmlOptions html;
  html.title = "ember — " + (is_spool ? spool.service : base_name(in));
  if (auto w = flamegraph::write_profile(*profile, out, html); !w) return fail(w.error());
  say_written(out, *profile);
  return 0;
}

int run_report(const std::string& in, size_t rows, const std::string& event) {
  auto profile = read(in, event);
  if (!profile) return fail(profile.error());
  flamegraph::write_report(*profile, rows, std::cout);
  if (flamegraph::is_live_profile(*profile)) flamegraph::write_leak_suspects(*profile, rows, std::cout);
  return 0;
}

int run_diff(const std::string& base, const std::string& now, const std::string& out, const std::string& event) {
  auto format = flamegraph::format_for_path(out);
  if (!format) return fail(format.error());
  if (*format != flamegraph::Format::Html) return fail("ember diff writes a flamegraph: give -o a .html name");
  auto before = read(base, event);
  if (!before) return fail(before.error());
  auto after = read(now, event);
  if (!after) return fail(after.error());
  if (before->unit != after->unit)
    return fail("cannot diff " + before->event + " (" + before->unit + ") against " + after->event + " (" +
                after->unit + "): compare like with like (--event chooses a pprof's sample type)");
  flamegraph::HtmlOptions html;
  html.title = "ember diff — " + base_name(base) + " → " + base_name(now);
  html.base = &*before;
  html.label = base_name(now);
  html.base_label = base_name(base);
  if (auto w = flamegraph::write_profile(*after, out, html); !w) return fail(w.error());
  say_written(out, *after);
  return 0;
}

}  // namespace ember
