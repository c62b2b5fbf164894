#include "flamegraph/html.h"

#include <charconv>
#include <ostream>
#include <string_view>

extern "C" const char ember_flamegraph_html[];
extern "C" const char ember_flamegraph_html_end[];

namespace ember::flamegraph {
namespace {

constexpr std::string_view kPlaceholder = "@EMBER_DATA@";

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

// Interns strings into a JSON array, returning indices.
class StringPool {
 public:
  uint32_t add(const std::string& s) {
    auto [it, inserted] = index_.try_emplace(s, static_cast<uint32_t>(order_.size()));
    if (inserted) order_.push_back(&it->first);
    return it->second;
  }
  void append_json(std::string& out) const {
    out += '[';
    for (size_t i = 0; i < order_.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, *order_[i]);
    }
    out += ']';
  }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<const std::string*> order_;
};

// Stacks delta-coded against the previous one: prefix, n, n ids, weight.
// `ids` maps the profile's frame ids to the page's.
void append_stacks(std::string& out, const Profile& profile, const std::vector<uint32_t>& ids) {
  out += '[';
  std::vector<uint32_t> prev, cur;
  bool first = true;
  for (const Stack* s : profile.sorted_stacks()) {
    cur.clear();
    for (FrameId f : s->frames) cur.push_back(ids[f]);
    size_t prefix = 0;
    while (prefix < prev.size() && prefix < cur.size() && prev[prefix] == cur[prefix]) ++prefix;
    if (!first) out += ',';
    first = false;
    append_uint(out, prefix);
    out += ',';
    append_uint(out, cur.size() - prefix);
    for (size_t i = prefix; i < cur.size(); ++i) {
      out += ',';
      append_uint(out, cur[i]);
    }
    out += ',';
    append_uint(out, s->weight);
    prev.swap(cur);
  }
  out += ']';
}

}  // namespace

std::string html_data_json(const Profile& profile, const HtmlOptions& options) {
  std::string title = options.title.empty() ? "ember — " + profile.event : options.title;
  StringPool names, modules;
  modules.add("");
  std::string frames;
  auto add_frame = [&](const Frame& f) {
    if (!frames.empty()) frames += ',';
    append_uint(frames, names.add(f.name));
    frames += ',';
    append_uint(frames, static_cast<uint64_t>(f.kind));
    frames += ',';
    append_uint(frames, modules.add(f.module));
  };
  // The page's frame ids: the profile's, then the base's frames it lacks.
  std::vector<uint32_t> ids, base_ids;
  for (const Frame& f : profile.frames()) {
    ids.push_back(static_cast<uint32_t>(ids.size()));
    add_frame(f);
  }
  if (options.base) {
    std::unordered_map<std::string, uint32_t> known;  // folded spelling + module -> page id
    auto key = [](const Frame& f) { return f.name + '\0' + std::to_string(static_cast<int>(f.kind)) + '\0' + f.module; };
    for (size_t i = 0; i < profile.frames().size(); ++i) known.emplace(key(profile.frames()[i]), i);
    uint32_t next = static_cast<uint32_t>(ids.size());
    for (const Frame& f : options.base->frames()) {
      auto [it, inserted] = known.try_emplace(key(f), next);
      if (inserted) {
        ++next;
        add_frame(f);
      }
      base_ids.push_back(it->second);
    }
  }

  std::string out;
  out.reserve(frames.size() * 2 + profile.stacks().size() * 32);
  out += "{\"version\":1,\"title\":";
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
  out += "],\"names\":";
  names.append_json(out);
  out += ",\"modules\":";
  modules.append_json(out);
  out += ",\"frames\":[";
  out += frames;
  out += "],\"stacks\":";
  append_stacks(out, profile, ids);
  out += ",\"total\":";
  append_uint(out, profile.total());
  if (options.base) {
    out += ",\"label\":";
    append_json_string(out, options.label);
    out += ",\"base\":{\"stacks\":";
    append_stacks(out, *options.base, base_ids);
    out += ",\"total\":";
    append_uint(out, options.base->total());
    out += ",\"label\":";
    append_json_string(out, options.base_label);
    out += '}';
  }
  if (!options.view.empty()) {
    out += ",\"view\":";
    append_json_string(out, options.view);
  }
  out += ",\"info\":{";
  for (size_t i = 0; i < profile.info.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, profile.info[i].first);
    out += ':';
    append_json_string(out, profile.info[i].second);
  }
  out += "}}";
  return out;
}

void write_html(const Profile& profile, const HtmlOptions& options, std::ostream& out) {
  std::string_view page(ember_flamegraph_html, ember_flamegraph_html_end - ember_flamegraph_html);
  size_t at = page.find(kPlaceholder);
  out << page.substr(0, at);
  if (at == std::string_view::npos) return;  // a template without data is a build defect caught by tests
  out << html_data_json(profile, options);
  out << page.substr(at + kPlaceholder.size());
}

}  // namespace ember::flamegraph
