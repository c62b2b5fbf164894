#include "flamegraph/html.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <ostream>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "flamegraph/gzip.h"
#include "flamegraph/leaks.h"
#include "flamegraph/protobuf.h"

extern "C" const char ember_flamegraph_html[];
extern "C" const char ember_flamegraph_html_end[];

namespace ember::flamegraph {
namespace {

constexpr std::string_view kPlaceholder = "@EMBER_DATA@";
constexpr std::string_view kPreviewPlaceholder = "@EMBER_PREVIEW@";

// JSON string escaping that is also safe inside <script>: '<', '>' and '&'
// become \u escapes so no frame name can close the tag or open a comment.
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// Sorts on two threads, halves then a merge: a million-stack page sorts
// its frames and stacks, the larger part of what writing it cost on one core.
template <class T, class Less>
void parallel_sort(std::vector<T>& v, Less less) {
  auto middle = v.begin() + static_cast<ptrdiff_t>(v.size() / 2);
  if (v.size() < 100000 || std::thread::hardware_concurrency() < 2) return std::sort(v.begin(), v.end(), less);
  std::thread first([&] { std::sort(v.begin(), middle, less); });
  std::sort(middle, v.end(), less);
  first.join();
  std::inplace_merge(v.begin(), middle, v.end(), less);
}

// Interns strings (which outlive it), returning indices; packs them for the page.
class StringPool {
 public:
  uint32_t add(std::string_view s) {
    auto [it, inserted] = index_.try_emplace(s, static_cast<uint32_t>(order_.size()));
    if (inserted) order_.push_back(s);
    return it->second;
  }
  // count, byte length, then each string ended by a NUL (a NUL inside one,
  // which no symbol has, becomes U+FFFD).
  void pack(protobuf::Writer& out) const {
    std::string bytes;
    for (std::string_view s : order_) {
      for (char c : s) {
        if (c) bytes += c;
        else bytes += "\xef\xbf\xbd";
      }
      bytes += '\0';
    }
    out.varint(order_.size());
    out.varint(bytes.size());
    out.raw(bytes);
  }

 private:
  std::unordered_map<std::string_view, uint32_t> index_;
  std::vector<std::string_view> order_;
};

// The stacks in the page's order: by their frames' page ids, which is the
// page's sibling order, so that it builds its tree without sorting. `ids`
// maps the profile's frame ids to the page's.
std::vector<const Stack*> page_order(const Profile& profile, const std::vector<uint32_t>& ids) {
  std::vector<const Stack*> stacks;
  stacks.reserve(profile.stacks().size());
  for (const Stack& s : profile.stacks()) stacks.push_back(&s);
  parallel_sort(stacks, [&](const Stack* a, const Stack* b) {
    return std::lexicographical_compare(a->frames.begin(), a->frames.end(), b->frames.begin(), b->frames.end(),
                                        [&](FrameId x, FrameId y) { return ids[x] < ids[y]; });
  });
  return stacks;
}

// Stacks (in page_order) delta-coded against the previous one: count, then
// each stack's prefix (frames shared with the one before), n, n page ids,
// weight. Returns each stack's index in that order, by its index in the
// profile.
std::vector<uint32_t> pack_stacks(protobuf::Writer& out, const Profile& profile,
                                  const std::vector<const Stack*>& stacks, const std::vector<uint32_t>& ids) {
  out.varint(stacks.size());
  std::vector<uint32_t> prev, cur;
  for (const Stack* s : stacks) {
    cur.clear();
    for (FrameId f : s->frames) cur.push_back(ids[f]);
    size_t prefix = 0;
    while (prefix < prev.size() && prefix < cur.size() && prev[prefix] == cur[prefix]) ++prefix;
    out.varint(prefix);
    out.varint(cur.size() - prefix);
    for (size_t i = prefix; i < cur.size(); ++i) out.varint(cur[i]);
    out.varint(s->weight);
    prev.swap(cur);
  }
  std::vector<uint32_t> written(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) written[stacks[i] - profile.stacks().data()] = static_cast<uint32_t>(i);
  return written;
}

// The timeline in milliseconds: count, then each entry's time since the
// one before, stack (its written index) and weight; the weights of one
// stack in one millisecond summed.
void pack_timeline(protobuf::Writer& out, const Profile& profile, const std::vector<uint32_t>& written) {
  struct Entry {
    uint64_t ms;
    uint32_t stack;
    uint64_t weight;
  };
  std::vector<Entry> entries;
  entries.reserve(profile.timeline.size());
  for (const Timed& t : profile.timeline) entries.push_back({t.time_ns / 1'000'000, written[t.stack], t.weight});
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.ms != b.ms ? a.ms < b.ms : a.stack < b.stack; });
  size_t n = 0;
  for (const Entry& e : entries) {
    if (n && entries[n - 1].ms == e.ms && entries[n - 1].stack == e.stack) entries[n - 1].weight += e.weight;
    else entries[n++] = e;
  }
  entries.resize(n);
  out.varint(entries.size());
  uint64_t prev = 0;
  for (const Entry& e : entries) {
    out.varint(e.ms - prev);
    out.varint(e.stack);
    out.varint(e.weight);
    prev = e.ms;
  }
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void append_base64(std::string& out, std::string_view in) {
  out.reserve(out.size() + (in.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(in[k])); };
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift : {18, 12, 6, 0}) out += kBase64[(v >> shift) & 63];
  }
  if (size_t left = in.size() - i) {
    uint32_t v = byte(i) << 16 | (left == 2 ? byte(i + 1) << 8 : 0);
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += left == 2 ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
}

std::expected<std::string, std::string> decode_base64(std::string_view in) {
  static const auto table = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kBase64[i])] = static_cast<int8_t>(i);
    return t;
  }();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t v = 0;
  int bits = 0;
  for (unsigned char c : in) {
    int8_t d = table[c];
    if (d < 0) return std::unexpected("not base64");
    v = v << 6 | static_cast<uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

// The page's frames: the profile's, then the base's it lacks (the same
// name, kind and module is the same frame), numbered in the page's order
// of siblings: by name, kind name, module.
struct PageFrames {
  std::vector<const Frame*> frames;     // by page id
  std::vector<uint32_t> ids, base_ids;  // the profile's (the base's) frame id -> page id
};

PageFrames page_frames(const Profile& profile, const Profile* base) {
  PageFrames page;
  std::vector<const Frame*> frames;
  for (const Frame& f : profile.frames()) {
    page.ids.push_back(static_cast<uint32_t>(frames.size()));
    frames.push_back(&f);
  }
  if (base) {
    std::unordered_map<std::string, uint32_t> known;  // name, kind and module -> index
    auto key = [](const Frame& f) { return f.name + '\0' + std::to_string(static_cast<int>(f.kind)) + '\0' + f.module; };
    for (size_t i = 0; i < profile.frames().size(); ++i) known.emplace(key(profile.frames()[i]), i);
    for (const Frame& f : base->frames()) {
      auto [it, inserted] = known.try_emplace(key(f), static_cast<uint32_t>(frames.size()));
      if (inserted) frames.push_back(&f);
      page.base_ids.push_back(it->second);
    }
  }
  std::vector<uint32_t> order(frames.size()), page_id(frames.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  parallel_sort(order, [&](uint32_t a, uint32_t b) {
    const Frame &x = *frames[a], &y = *frames[b];
    return std::tuple(std::string_view(x.name), kind_name(x.kind), std::string_view(x.module)) <
           std::tuple(std::string_view(y.name), kind_name(y.kind), std::string_view(y.module));
  });
  for (uint32_t i = 0; i < order.size(); ++i) page_id[order[i]] = i;
  for (uint32_t& id : page.ids) id = page_id[id];
  for (uint32_t& id : page.base_ids) id = page_id[id];
  page.frames.reserve(order.size());
  for (uint32_t i : order) page.frames.push_back(frames[i]);
  return page;
}

// names, modules, then the frames' count and each one's name, kind and module.
void pack_frames(protobuf::Writer& out, const std::vector<const Frame*>& frames) {
  StringPool names, modules;
  modules.add("");
  protobuf::Writer table;
  for (const Frame* f : frames) {
    table.varint(names.add(f->name));
    table.varint(static_cast<uint64_t>(f->kind));
    table.varint(modules.add(f->module));
  }
  names.pack(out);
  modules.pack(out);
  out.varint(frames.size());
  out.raw(table.str());
}

// A canvas up to kPreviewWidth CSS px wide draws every node of the preview
// that it would draw of the whole tree (the page draws nodes at least half a
// pixel wide); at most kPreviewNodes of the widest are kept.
constexpr uint64_t kPreviewWidth = 4096;
constexpr size_t kPreviewNodes = 20000;

// The preview's tables (html.h): the nodes of the tree at least 1 / (2 x
// kPreviewWidth) of the total wide, found in one pass over the stacks in
// page order, which walks the tree depth first. A node's x is where the
// page's layout puts it: its children are packed from its left edge, its
// own weight (stacks ending at it) after them.
std::string pack_preview(const Profile& profile, const PageFrames& page, const std::vector<const Stack*>& stacks) {
  struct Node {
    uint64_t x, total;
    uint32_t depth, frame;  // a page id
  };
  uint64_t root = profile.total(), least = std::max<uint64_t>(1, root / (2 * kPreviewWidth));
  std::vector<Node> open, kept;  // open[d - 1]: the node at depth d on the current path
  std::vector<uint64_t> next_x(1, 0);  // next_x[d]: where the next child of the open node at depth d goes
  uint32_t max_depth = 0;
  auto close_to = [&](size_t depth) {
    while (open.size() > depth) {
      const Node& n = open.back();
      next_x[n.depth - 1] += n.total;
      if (n.total >= least) kept.push_back(n);
      open.pop_back();
    }
  };
  for (const Stack* s : stacks) {
    size_t shared = 0;
    while (shared < open.size() && shared < s->frames.size() && open[shared].frame == page.ids[s->frames[shared]])
      ++shared;
    close_to(shared);
    for (size_t d = shared + 1; d <= s->frames.size(); ++d) {
      uint64_t x = next_x[d - 1];
      open.push_back({x, 0, static_cast<uint32_t>(d), page.ids[s->frames[d - 1]]});
      next_x.resize(d + 1);
      next_x[d] = x;
    }
    for (Node& n : open) n.total += s->weight;
    max_depth = std::max(max_depth, static_cast<uint32_t>(s->frames.size()));
  }
  close_to(0);
  if (kept.size() > kPreviewNodes) {
    // The widest: above the total of the first left out (an ancestor is at
    // least as wide as its descendants, so what is kept is still a tree).
    std::vector<uint64_t> totals;
    totals.reserve(kept.size());
    for (const Node& n : kept) totals.push_back(n.total);
    std::nth_element(totals.begin(), totals.begin() + kPreviewNodes, totals.end(), std::greater<>());
    uint64_t cut = totals[kPreviewNodes];
    std::erase_if(kept, [&](const Node& n) { return n.total <= cut; });
  }
  // Pre-order: by x, a parent before its first child (which shares its x).
  std::sort(kept.begin(), kept.end(),
            [](const Node& a, const Node& b) { return a.x != b.x ? a.x < b.x : a.depth < b.depth; });
  std::vector<uint32_t> used;
  for (const Node& n : kept) used.push_back(n.frame);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  std::vector<const Frame*> frames;
  for (uint32_t id : used) frames.push_back(page.frames[id]);
  protobuf::Writer out;
  pack_frames(out, frames);
  out.varint(kept.size());
  out.varint(max_depth);
  std::vector<uint64_t> x_at(max_depth + 1, 0);  // x of the node last seen at each depth
  for (const Node& n : kept) {
    out.varint(n.depth);
    out.varint(std::lower_bound(used.begin(), used.end(), n.frame) - used.begin());
    out.varint(n.x - x_at[n.depth - 1]);
    out.varint(n.total);
    x_at[n.depth] = n.x;
  }
  std::array<bool, kFrameKindNames.size()> present{};
  for (const Frame& f : profile.frames()) present[static_cast<size_t>(f.kind)] = true;
  out.varint(std::count(present.begin(), present.end(), true));
  for (size_t k = 0; k < present.size(); ++k)
    if (present[k]) out.varint(k);
  out.varint(profile.stacks().size());
  return out.str();
}

// The page's JSON but its last field (the caller adds it, and the brace
// that closes the object): version, title, event, ... info.
std::string data_head(const Profile& profile, const HtmlOptions& options) {
  std::string title = options.title.empty() ? "ember — " + profile.event : options.title;
  std::string out = "{\"version\":2,\"title\":";
  append_json_string(out, title);
  out += ",\"event\":";
  append_json_string(out, profile.event);
  out += ",\"unit\":";
  append_json_string(out, profile.unit);
  out += ",\"kinds\":[";
  for (size_t i = 0; i < kFrameKindNames.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, kFrameKindNames[i]);
  }
  out += "],\"total\":";
  append_uint(out, profile.total());
  if (options.base) {
    out += ",\"label\":";
    append_json_string(out, options.label);
    out += ",\"base\":{\"total\":";
    append_uint(out, options.base->total());
    out += ",\"label\":";
    append_json_string(out, options.base_label);
    out += '}';
  }
  if (!options.view.empty()) {
    out += ",\"view\":";
    append_json_string(out, options.view);
  }
  // Not drawn by the page; kept so that reading the page back (read_html)
  // gives pprof's cpu time and the recording's time again.
  for (auto [key, value] : {std::pair{"period_ns", profile.period_ns}, std::pair{"start_unix_ns", profile.start_unix_ns},
                            std::pair{"duration_ns", profile.duration_ns}}) {
    if (!value) continue;
    out += ",\"";
    out += key;
    out += "\":";
    append_uint(out, value);
  }
  if (!options.base && !profile.timeline.empty()) {
    out += ",\"time_step_ms\":";
    append_uint(out, std::max<uint64_t>(1, profile.time_step_ns / 1'000'000));
  }
  out += ",\"info\":{";
  for (size_t i = 0; i < profile.info.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, profile.info[i].first);
    out += ':';
    append_json_string(out, profile.info[i].second);
  }
  out += '}';
  return out;
}

// A live profile's leak suspects (flamegraph/leaks.h), for the page's
// Leaks panel: ",\"leaks\":{...}", or nothing for a profile that is not
// live or has no timeline. Each suspect's site as the report names it, and
// the function the panel searches for.
std::string leaks_json(const Profile& profile, const HtmlOptions& options) {
  if (!is_live_profile(profile) || profile.timeline.empty()) return "";
  LeakSuspects found = find_leak_suspects(profile);
  std::string out = ",\"leaks\":{\"young_ms\":";
  append_uint(out, found.young_ns / 1'000'000);
  out += ",\"span_ms\":";
  append_uint(out, found.span_ns / 1'000'000);
  out += ",\"fit\":";
  out += std::to_string(kSteadyFit);
  out += ",\"suspects\":[";
  for (size_t i = 0; i < found.suspects.size(); ++i) {
    const LeakSuspect& s = found.suspects[i];
    if (i) out += ',';
    out += "{\"site\":";
    append_json_string(out, site_name(profile, s.stack));
    out += ",\"function\":";
    append_json_string(out, site_function(profile, s.stack));
    out += ",\"live\":";
    append_uint(out, s.live);
    out += ",\"old\":";
    append_uint(out, s.old);
    char numbers[96];
    std::snprintf(numbers, sizeof numbers, ",\"rate_per_s\":%.6g,\"fit\":%.4f,\"records\":%u", s.rate_per_s, s.fit,
                  s.records);
    out += numbers;
    out += ",\"curve\":[";
    for (size_t c = 0; c < s.curve.size(); ++c) {
      if (c) out += ',';
      append_uint(out, s.curve[c]);
    }
    out += "]";
    if (auto held = options.held.find(s.stack); held != options.held.end()) {
      out += ",\"held\":[";
      for (size_t k = 0; k < held->second.size(); ++k) {
        if (k) out += ',';
        append_json_string(out, held->second[k]);
      }
      out += "]";
    }
    out += "}";
  }
  out += "]}";
  return out;
}

// `field` (a JSON name) holding base64 of the gzip of `tables`, and the end
// of the object data_head began.
void append_packed(std::string& out, std::string_view field, const std::string& tables) {
  out += ",\"";
  out += field;
  out += "\":\"";
  append_base64(out, gzip(tables));
  out += "\"}";
}

std::string data_json(const Profile& profile, const HtmlOptions& options, const PageFrames& page,
                      const std::vector<const Stack*>& stacks) {
  protobuf::Writer tables;
  pack_frames(tables, page.frames);
  std::vector<uint32_t> written = pack_stacks(tables, profile, stacks, page.ids);
  if (options.base) pack_stacks(tables, *options.base, page_order(*options.base, page.base_ids), page.base_ids);
  else tables.varint(0);
  // A differential page has no time to pick: its two profiles have each their own.
  if (!options.base && !profile.timeline.empty()) pack_timeline(tables, profile, written);
  else tables.varint(0);
  std::string out = data_head(profile, options);
  if (!options.base) out += leaks_json(profile, options);
  append_packed(out, "tables", tables.str());
  return out;
}

// The preview's JSON (html.h), or "" for a page that has none.
std::string preview_json(const Profile& profile, const HtmlOptions& options, const PageFrames& page,
                         const std::vector<const Stack*>& stacks) {
  if (options.base || !profile.timeline.empty() || profile.total() == 0) return "";
  std::string out = data_head(profile, options);
  append_packed(out, "preview", pack_preview(profile, page, stacks));
  return out;
}

}  // namespace

std::string html_data_json(const Profile& profile, const HtmlOptions& options) {
  PageFrames page = page_frames(profile, options.base);
  return data_json(profile, options, page, page_order(profile, page.ids));
}

namespace {

constexpr std::string_view kDataOpen = R"(<script id="ember-data" type="application/json">)";

// Strings as StringPool::pack writes them.
std::expected<std::vector<std::string>, std::string> read_strings(protobuf::Reader& in) {
  uint64_t count = in.varint();
  std::string_view bytes = in.bytes();
  if (!in.ok() || count > bytes.size()) return std::unexpected("a string table cut short");
  std::vector<std::string> out;
  out.reserve(count);
  size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    size_t end = bytes.find('\0', at);
    if (end == std::string_view::npos) return std::unexpected("a string table cut short");
    out.emplace_back(bytes.substr(at, end - at));
    at = end + 1;
  }
  if (at != bytes.size()) return std::unexpected("a string table longer than its count");
  return out;
}

// Stacks as pack_stacks writes them, into `profile` (or only checked, when
// null: a differential page's BASE). Frames are interned as stacks use them:
// a differential page also holds BASE's frames. Returns each written
// stack's index in the profile.
std::expected<std::vector<uint32_t>, std::string> read_stacks(protobuf::Reader& in, const std::vector<Frame>& frames,
                                                              Profile* profile) {
  uint64_t count = in.varint();
  std::vector<uint32_t> index;
  std::vector<FrameId> cur;
  std::vector<uint64_t> page_ids;
  for (uint64_t s = 0; s < count && in.ok(); ++s) {
    uint64_t prefix = in.varint(), n = in.varint();
    if (!in.ok() || prefix > page_ids.size()) return std::unexpected("a stack cut short");
    page_ids.resize(prefix);
    cur.resize(prefix);
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t id = in.varint();
      if (!in.ok()) return std::unexpected("a stack cut short");
      if (id >= frames.size()) return std::unexpected("a stack names a missing frame");
      page_ids.push_back(id);
      if (profile) cur.push_back(profile->intern(frames[id]));
    }
    uint64_t weight = in.varint();
    if (profile) index.push_back(profile->add(cur, weight));
  }
  if (!in.ok()) return std::unexpected("the stacks cut short");
  return index;
}

// The timeline as pack_timeline writes it; `index`: read_stacks's.
std::expected<void, std::string> read_timeline(protobuf::Reader& in, const std::vector<uint32_t>& index, Profile& p) {
  if (in.done()) return {};  // a page written before timelines
  uint64_t count = in.varint(), ms = 0, sum = 0;
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    uint64_t delta = in.varint(), stack = in.varint(), weight = in.varint();
    if (!in.ok()) break;
    if (stack >= index.size() || index[stack] == Profile::kNoStack || weight == 0)
      return std::unexpected("a time names a missing stack");
    ms += delta;
    sum += weight;
    p.timeline.push_back({ms * 1'000'000, weight, index[stack]});
  }
  if (!in.ok()) return std::unexpected("the timeline cut short");
  if (count && sum != p.total()) return std::unexpected("its timeline does not add up to its stacks");
  return {};
}

// The unpacked tables (names, modules, frames, stacks, base), into `p`:
// frames' kinds index `kinds`.
std::expected<void, std::string> read_tables(std::string_view tables, const std::vector<FrameKind>& kinds,
                                             Profile& p) {
  protobuf::Reader in(tables);
  auto names = read_strings(in);
  if (!names) return std::unexpected(names.error());
  auto modules = read_strings(in);
  if (!modules) return std::unexpected(modules.error());
  uint64_t frame_count = in.varint();
  if (!in.ok() || frame_count > tables.size()) return std::unexpected("a frame table cut short");
  std::vector<Frame> frames;
  frames.reserve(frame_count);
  for (uint64_t i = 0; i < frame_count; ++i) {
    uint64_t name = in.varint(), kind = in.varint(), module = in.varint();
    if (!in.ok()) return std::unexpected("a frame table cut short");
    if (name >= names->size() || kind >= kinds.size() || module >= modules->size())
      return std::unexpected("a frame names a missing name, kind or module");
    frames.push_back({(*names)[name], kinds[kind], (*modules)[module]});
  }
  auto index = read_stacks(in, frames, &p);
  if (!index) return std::unexpected(index.error());
  if (auto s = read_stacks(in, frames, nullptr); !s) return std::unexpected("BASE: " + s.error());
  if (auto t = read_timeline(in, *index, p); !t) return std::unexpected(t.error());
  if (!in.done()) return std::unexpected("its tables go on past their end");
  return {};
}

std::expected<HtmlReadResult, std::string> profile_of(const nlohmann::ordered_json& data) {
  if (data.value("version", 0) != 2)
    return std::unexpected("ember page data version " + data.value("version", nlohmann::ordered_json()).dump() +
                           ": this ember reads version 2; read it with the ember that wrote it");
  HtmlReadResult r;
  Profile& p = r.profile;
  p.event = data.at("event").get<std::string>();
  p.unit = data.at("unit").get<std::string>();
  p.period_ns = data.value("period_ns", uint64_t{0});
  p.start_unix_ns = data.value("start_unix_ns", uint64_t{0});
  p.duration_ns = data.value("duration_ns", uint64_t{0});
  if (uint64_t step = data.value("time_step_ms", uint64_t{0}); step > 1) p.time_step_ns = step * 1'000'000;
  const nlohmann::ordered_json info = data.value("info", nlohmann::ordered_json::object());
  for (const auto& [key, value] : info.items()) p.info.emplace_back(key, value.get<std::string>());
  // Kinds by name, so a page that orders them differently still reads.
  std::vector<FrameKind> kinds;
  for (const nlohmann::ordered_json& k : data.at("kinds")) {
    auto known = std::find(kFrameKindNames.begin(), kFrameKindNames.end(), k.get<std::string>());
    kinds.push_back(known == kFrameKindNames.end() ? FrameKind::Unknown
                                                   : static_cast<FrameKind>(known - kFrameKindNames.begin()));
  }
  auto packed = decode_base64(data.at("tables").get<std::string>());
  if (!packed) return std::unexpected("its tables are not base64");
  auto tables = gunzip(*packed);
  if (!tables) return std::unexpected("its tables: " + tables.error());
  if (auto read = read_tables(*tables, kinds, p); !read) return std::unexpected(read.error());
  if (data.contains("total") && data["total"].get<uint64_t>() != p.total())
    return std::unexpected("its stacks do not add up to its total");
  if (data.contains("base")) {
    r.differential = true;
    r.base_label = data["base"].value("label", "");
  }
  return r;
}

}  // namespace

std::expected<HtmlReadResult, std::string> read_html(std::string_view page) {
  size_t open = page.find(kDataOpen);
  if (open == std::string_view::npos)
    return std::unexpected("an HTML page that is not an ember flamegraph (no ember-data in it): "
                           "ember reads back its own pages, folded stacks and pprof");
  size_t begin = open + kDataOpen.size();
  size_t end = page.find("</script>", begin);
  if (end == std::string_view::npos) return std::unexpected("an ember flamegraph cut short: its data has no end");
  std::string_view text = page.substr(begin, end - begin);
  if (text == kPlaceholder) return std::unexpected("ember's page template, without a profile in it");
  nlohmann::ordered_json data = nlohmann::ordered_json::parse(text, nullptr, false);
  if (data.is_discarded() || !data.is_object())
    return std::unexpected("an ember flamegraph whose data is not valid JSON (damaged?)");
  try {
    auto r = profile_of(data);
    if (!r) return std::unexpected("an ember flamegraph with damaged data: " + r.error());
    return r;
  } catch (const nlohmann::ordered_json::exception& e) {
    return std::unexpected(std::string("an ember flamegraph with damaged data: a field is missing or of the wrong type (") +
                           e.what() + ")");
  }
}

std::expected<Profile, std::string> read_page_tables(std::string_view tables) {
  std::vector<FrameKind> kinds;
  for (size_t i = 0; i < kFrameKindNames.size(); ++i) kinds.push_back(static_cast<FrameKind>(i));
  Profile p;
  if (auto read = read_tables(tables, kinds, p); !read) return std::unexpected(read.error());
  return p;
}

void write_html(const Profile& profile, const HtmlOptions& options, std::ostream& out) {
  std::string_view page(ember_flamegraph_html, ember_flamegraph_html_end - ember_flamegraph_html);
  size_t preview_at = page.find(kPreviewPlaceholder), data_at = page.find(kPlaceholder);
  // A template without either is a build defect caught by tests.
  if (preview_at == std::string_view::npos || data_at == std::string_view::npos || data_at < preview_at) return;
  PageFrames frames = page_frames(profile, options.base);
  std::vector<const Stack*> stacks = page_order(profile, frames.ids);
  out << page.substr(0, preview_at) << preview_json(profile, options, frames, stacks);
  size_t after_preview = preview_at + kPreviewPlaceholder.size();
  out << page.substr(after_preview, data_at - after_preview) << data_json(profile, options, frames, stacks);
  out << page.substr(data_at + kPlaceholder.size());
}

}  // namespace ember::flamegraph
