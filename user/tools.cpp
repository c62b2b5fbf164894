#include "user/tools.h"

#include <cstdio>
#include <iostream>

#include "flamegraph/input.h"
#include "flamegraph/output.h"
#include "flamegraph/table.h"

namespace ember {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "ember: %s\n", message.c_str());
  return 1;
}

// Reads a profile, telling the user about every line it had to skip.
std::expected<flamegraph::Profile, std::string> read(const std::string& path) {
  auto r = flamegraph::read_profile(path);
  if (!r) return std::unexpected(r.error());
  for (const std::string& w : r->warnings) std::fprintf(stderr, "ember: warning: %s: %s\n", path.c_str(), w.c_str());
  if (r->profile.stacks().empty()) std::fprintf(stderr, "ember: warning: %s holds no samples\n", path.c_str());
  return std::move(r->profile);
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int run_convert(const std::string& in, const std::string& out) {
  if (auto f = flamegraph::format_for_path(out); !f) return fail(f.error());
  auto profile = read(in);
  if (!profile) return fail(profile.error());
  flamegraph::HtmlOptions html;
  html.title = "ember — " + base_name(in);
  if (auto w = flamegraph::write_profile(*profile, out, html); !w) return fail(w.error());
  return 0;
}

int run_report(const std::string& in, size_t rows) {
  auto profile = read(in);
  if (!profile) return fail(profile.error());
  flamegraph::write_report(*profile, rows, std::cout);
  return 0;
}

int run_diff(const std::string& base, const std::string& now, const std::string& out) {
  auto format = flamegraph::format_for_path(out);
  if (!format) return fail(format.error());
  if (*format != flamegraph::Format::Html) return fail("ember diff writes a flamegraph: give -o a .html name");
  auto before = read(base);
  if (!before) return fail(before.error());
  auto after = read(now);
  if (!after) return fail(after.error());
  flamegraph::HtmlOptions html;
  html.title = "ember diff — " + base_name(base) + " → " + base_name(now);
  html.base = &*before;
  html.label = base_name(now);
  html.base_label = base_name(base);
  if (auto w = flamegraph::write_profile(*after, out, html); !w) return fail(w.error());
  return 0;
}

}  // namespace ember
