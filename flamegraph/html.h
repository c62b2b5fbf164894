// The interactive HTML flamegraph: flamegraph.html (embedded at build time)
// with the profile filled in as JSON. One self-contained file.
#pragma once

#include <expected>
#include <iosfwd>
#include <string>
#include <string_view>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

struct HtmlOptions {
  std::string title;  // page heading; a default is derived from the event
  // A differential flamegraph: the profile is NEW, drawn in its shape and
  // coloured by each frame's change of share against `base`.
  const Profile* base = nullptr;
  std::string label, base_label;  // what NEW and BASE are (file names)
  // JSON of the view the page starts in when its URL holds none (transforms,
  // reverse, sort...: the fields of the page's saved defaults).
  std::string view;
};

void write_html(const Profile& profile, const HtmlOptions& options, std::ostream& out);

// The JSON document the page reads (contract version 1, see flamegraph.html).
std::string html_data_json(const Profile& profile, const HtmlOptions& options);

// The profile a page written by write_html holds (of a differential page,
// NEW), read back from its embedded JSON. Fails with the reason on a page
// that is not ember's or whose data is damaged.
struct HtmlReadResult {
  Profile profile;
  std::string base_label;  // a differential page: what BASE was (NEW is read)
  bool differential = false;
};
std::expected<HtmlReadResult, std::string> read_html(std::string_view page);

}  // namespace ember::flamegraph
