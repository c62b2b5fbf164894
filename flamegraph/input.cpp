#include "flamegraph/input.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "flamegraph/folded.h"
#include "flamegraph/gzip.h"
#include "flamegraph/html.h"
#include "flamegraph/otlp.h"
#include "flamegraph/pprof.h"

namespace ember::flamegraph {
namespace {

enum class Content { Gzip, Protobuf, Html, Markup, Binary, Text };

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// What the bytes are. Folded stacks are text: a NUL byte means binary
// data (an image, an archive, random bytes) that must not be read as
// lines. Uncompressed pprof and OTLP start with field 1 (pprof's
// sample_type, OTLP's resource_profiles; length-delimited: 0x0a), which is
// also a newline: so it is protobuf if the name says so or if NUL bytes
// follow.
Content content_of(std::string_view bytes, const std::string& path) {
  if (is_gzip(bytes)) return Content::Gzip;
  bool binary = bytes.substr(0, 64 << 10).find('\0') != std::string_view::npos;
  if (!bytes.empty() && bytes[0] == 0x0a && (binary || path.ends_with(".pb") || path.ends_with(".pprof") || path.ends_with(".otlp")))
    return Content::Protobuf;
  if (binary) return Content::Binary;
  std::string_view start = bytes.substr(0, 1024);
  if (start.starts_with("\xef\xbb\xbf")) start.remove_prefix(3);  // a UTF-8 byte order mark
  start.remove_prefix(std::min(start.size(), start.find_first_not_of(" \t\r\n")));
  if (starts_with_nocase(start, "<!doctype html") || starts_with_nocase(start, "<html")) return Content::Html;
  if (starts_with_nocase(start, "<?xml") || starts_with_nocase(start, "<svg") || starts_with_nocase(start, "<!doctype"))
    return Content::Markup;
  return Content::Text;
}

constexpr const char* kWhatWeRead =
    "ember reads folded stacks, pprof (.pb.gz), OpenTelemetry profiles (.otlp) and its own HTML flamegraphs";

}  // namespace

std::expected<ReadResult, std::string> read_profile(const std::string& path, const ReadOptions& options) {
  // A directory opens as a stream whose first read fails (EISDIR): said as
  // a "read error" alone, it told nothing.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::unexpected(path + " is a directory: " + kWhatWeRead);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected("cannot read " + path + ": " + std::strerror(errno));
  // What the file is, from its start (content_of reads at most 64 KiB).
  std::string bytes(64 << 10, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return std::unexpected("cannot read " + path + ": read error");
  if (bytes.empty()) return std::unexpected(path + " is empty: not a profile");
  Content content = content_of(bytes, path);
  // Folded text is read as a stream, from the start again where the file
  // can seek: a fleet's merged profile is gigabytes of text, and holding it
  // whole took as much memory again. Anything else is read whole.
  in.clear();
  bool stream = content == Content::Text && in.seekg(0);
  if (!stream) {
    in.clear();
    std::ostringstream rest;  // after the start read above
    rest << in.rdbuf();
    if (in.bad()) return std::unexpected("cannot read " + path + ": read error");
    bytes += std::move(rest).str();
  }

  auto one_graph = [&](const char* what) -> std::expected<void, std::string> {
    if (options.event.empty()) return {};
    return std::unexpected(path + " is " + what + ": one graph, no sample types to choose with --event");
  };
  switch (content) {
    case Content::Gzip:
    case Content::Protobuf: {
      if (content == Content::Gzip) {
        auto raw = gunzip(bytes);
        if (!raw) return std::unexpected(path + ": " + raw.error());
        bytes = std::move(*raw);
      }
      ReadResult r;
      std::expected<Profile, std::string> profile;
      if (is_otlp(bytes)) {
        profile = decode_otlp(bytes, options.event, &r.sample_types.names);
        if (profile)
          r.sample_types.read = static_cast<size_t>(
              std::find(r.sample_types.names.begin(), r.sample_types.names.end(), profile->event) -
              r.sample_types.names.begin());
      } else {
        profile = decode_pprof(bytes, options.event, &r.sample_types);
      }
      if (!profile) return std::unexpected(path + ": " + profile.error());
      r.profile = std::move(*profile);
      return r;
    }
    case Content::Html: {
      auto page = read_html(bytes);
      if (!page) return std::unexpected(path + ": " + page.error());
      if (auto e = one_graph("an HTML flamegraph"); !e) return std::unexpected(e.error());
      ReadResult r{std::move(page->profile), {}, {}};
      if (page->differential)
        r.warnings.push_back("a differential flamegraph: reading its NEW profile, not its base (" + page->base_label + ")");
      return r;
    }
    case Content::Markup:
      return std::unexpected(path + " is XML or SVG, not a profile: " + kWhatWeRead);
    case Content::Binary:
      return std::unexpected(path + " is binary data, neither gzip nor protobuf: not a profile; " + kWhatWeRead);
    case Content::Text: break;
  }
  if (auto e = one_graph("folded stacks"); !e) return std::unexpected(e.error());
  const bool regular = stream && std::filesystem::is_regular_file(path, ec);
  std::istringstream text(stream ? std::string() : std::move(bytes));
  auto folded = regular ? read_folded_file(path, std::filesystem::file_size(path, ec))
                        : read_folded(stream ? static_cast<std::istream&>(in) : text);
  if (stream && in.bad()) return std::unexpected("cannot read " + path + ": read error");
  if (!folded) return std::unexpected(path + ": " + folded.error());
  return ReadResult{std::move(folded->profile), std::move(folded->warnings), {}};
}

}  // namespace ember::flamegraph
