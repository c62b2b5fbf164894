// The interactive HTML flamegraph: flamegraph.html (embedded at build time)
// with the profile filled in. One self-contained file.
//
// The page's data, contract version 2 (flamegraph.html reads it, read_html
// reads it back): a JSON object describing the profile (version, title,
// event, unit, kinds, total, label and base {total, label} on a
// differential page, view, period_ns, start_unix_ns, duration_ns,
// time_step_ms when it has a timeline, info)
// whose "tables" is base64 of the gzip of these tables, each number an
// unsigned LEB128 varint:
//   names    count, byte length, then each name's UTF-8 ended by a NUL
//   modules  likewise (index 0: no module)
//   frames   count, then each frame's name, kind and module (indices)
//   stacks   count, then each stack: prefix (frames it shares with the one
//            before), n, n frame ids, weight
//   base     a differential page's BASE stacks likewise (count 0 if none)
//   timeline count (0 if none), then each entry in time order: milliseconds
//            since the one before (the first: since start_unix_ns), stack
//            (index in the order written), weight; a stack's weight taken in
//            one millisecond is one entry. Times are precise to
//            time_step_ms. Pages written before timelines end before it.
// Frames are numbered in the page's sibling order (name, kind name,
// module) and stacks written in that order, so the page builds its tree
// without sorting. Packed so, bench/fleet_profile.mjs's 100,000 stacks make
// a page of 11.7 MB, where JSON arrays made 26.3 MB.
//
// The preview: a plain page (no base, no timeline) also holds, before its
// script, the same JSON with "preview" in place of "tables": base64 of the
// gzip of
//   names, modules, frames  as above, of the frames the nodes name only
//   nodes    count, the whole tree's depth, then in pre-order each node's
//            depth (1: a child of the root), frame, x less its parent's x,
//            total; x is the weight left of the node in the page's layout
//   kinds    count, then each kind (index) a frame of the profile has
//   stacks   the number of stacks
// The nodes are those a canvas up to 4,096 CSS px wide draws, at most
// 20,000 of the widest. The page draws them while the browser still reads
// the tables (after the script): at 100,000 fleet stacks they took 0.3 s
// to read and 0.25 s to unpack and decode before anything was drawn.
#pragma once

#include <expected>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

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
  // A live profile's sites by stack: how a heap dump found their objects
  // held (`ember jvm --leaks`), lines the Leaks panel shows under a suspect.
  std::map<uint32_t, std::vector<std::string>> held;
};

void write_html(const Profile& profile, const HtmlOptions& options, std::ostream& out);

// The JSON document the page reads (contract version 2, above).
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

// The profile in a page's tables once unpacked (past base64 and gzip), the
// frame kinds in ember's order: read_html's core, which the fuzz target
// feeds directly.
std::expected<Profile, std::string> read_page_tables(std::string_view tables);

}  // namespace ember::flamegraph
