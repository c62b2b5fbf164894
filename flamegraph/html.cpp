#include "flamegraph/html.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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

namespace {

constexpr std::string_view kDataOpen = R"(<script id="ember-data" type="application/json">)";

// Stacks as append_stacks writes them, into `profile`. Frames are interned
// as stacks use them: a differential page also holds BASE's frames.
std::expected<void, std::string> read_stacks(const nlohmann::ordered_json& stacks, const std::vector<Frame>& frames,
                                             Profile& profile) {
  if (!stacks.is_array()) return std::unexpected("no stacks");
  std::vector<FrameId> cur;
  auto number = [&](size_t i) { return stacks[i].get<uint64_t>(); };
  for (size_t i = 0; i < stacks.size();) {
    if (i + 2 > stacks.size()) return std::unexpected("a stack cut short");
    uint64_t prefix = number(i), n = number(i + 1);
    if (prefix > cur.size() || n > stacks.size() - i - 2 || i + 2 + n >= stacks.size())
      return std::unexpected("a stack cut short or longer than its array");
    cur.resize(prefix);
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t id = number(i + 2 + k);
      if (id >= frames.size()) return std::unexpected("a stack names a missing frame");
      cur.push_back(profile.intern(frames[id]));
    }
    uint64_t weight = number(i + 2 + n);
    if (weight) profile.add(cur, weight);
    i += 3 + n;
  }
  return {};
}

std::expected<HtmlReadResult, std::string> profile_of(const nlohmann::ordered_json& data) {
  if (data.value("version", 0) != 1)
    return std::unexpected("ember page data version " + data.value("version", nlohmann::ordered_json()).dump() +
                           ": this ember reads version 1; read it with the ember that wrote it");
  HtmlReadResult r;
  Profile& p = r.profile;
  p.event = data.at("event").get<std::string>();
  p.unit = data.at("unit").get<std::string>();
  p.period_ns = data.value("period_ns", uint64_t{0});
  p.start_unix_ns = data.value("start_unix_ns", uint64_t{0});
  p.duration_ns = data.value("duration_ns", uint64_t{0});
  const nlohmann::ordered_json info = data.value("info", nlohmann::ordered_json::object());
  for (const auto& [key, value] : info.items()) p.info.emplace_back(key, value.get<std::string>());
  // Kinds by name, so a page that orders them differently still reads.
  std::vector<FrameKind> kinds;
  for (const nlohmann::ordered_json& k : data.at("kinds")) {
    auto known = std::find(kFrameKindNames.begin(), kFrameKindNames.end(), k.get<std::string>());
    kinds.push_back(known == kFrameKindNames.end() ? FrameKind::Unknown
                                                   : static_cast<FrameKind>(known - kFrameKindNames.begin()));
  }
  const nlohmann::ordered_json& names = data.at("names");
  const nlohmann::ordered_json& modules = data.at("modules");
  const nlohmann::ordered_json& table = data.at("frames");
  if (table.size() % 3) return std::unexpected("a frame table cut short");
  std::vector<Frame> frames;
  for (size_t i = 0; i < table.size(); i += 3) {
    uint64_t name = table[i].get<uint64_t>(), kind = table[i + 1].get<uint64_t>(), module = table[i + 2].get<uint64_t>();
    if (name >= names.size() || kind >= kinds.size() || module >= modules.size())
      return std::unexpected("a frame names a missing name, kind or module");
    frames.push_back({names[name].get<std::string>(), kinds[kind], modules[module].get<std::string>()});
  }
  if (auto s = read_stacks(data.at("stacks"), frames, p); !s) return std::unexpected(s.error());
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

void write_html(const Profile& profile, const HtmlOptions& options, std::ostream& out) {
  std::string_view page(ember_flamegraph_html, ember_flamegraph_html_end - ember_flamegraph_html);
  size_t at = page.find(kPlaceholder);
  out << page.substr(0, at);
  if (at == std::string_view::npos) return;  // a template without data is a build defect caught by tests
  out << html_data_json(profile, options);
  out << page.substr(at + kPlaceholder.size());
}

}  // namespace ember::flamegraph
