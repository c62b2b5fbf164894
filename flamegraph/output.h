// Writing a profile to a file whose format follows its extension. Files are
// complete or absent: written under a temporary name, then renamed.
#pragma once

#include <expected>
#include <iterator>
#include <span>
#include <string>
#include <string_view>

#include "flamegraph/html.h"
#include "flamegraph/profile.h"

namespace ember::flamegraph {

enum class Format { Html, Folded, Pprof };

// The extensions ember writes, in the order help texts list them: the one
// list that format_for_path accepts and that --help prints.
struct OutputExtension {
  std::string_view extension;
  Format format;
  std::string_view what;  // the format, as help texts name it
};
inline constexpr OutputExtension kOutputExtensions[] = {
    {".html", Format::Html, "flamegraph"},       {".folded", Format::Folded, "folded stacks"},
    {".txt", Format::Folded, "folded stacks"},   {".collapsed", Format::Folded, "folded stacks"},
    {".pb.gz", Format::Pprof, "pprof"},          {".pprof", Format::Pprof, "pprof"},
};

// ".html (flamegraph), .folded, .txt or .collapsed (folded stacks), ...":
// kOutputExtensions for help texts and errors.
inline std::string output_extensions_text() {
  std::string out;
  for (size_t i = 0; i < std::size(kOutputExtensions); ++i) {
    const OutputExtension& e = kOutputExtensions[i];
    bool last_of_format = i + 1 == std::size(kOutputExtensions) || kOutputExtensions[i + 1].format != e.format;
    bool first_of_format = i == 0 || kOutputExtensions[i - 1].format != e.format;
    if (!first_of_format) out += last_of_format ? " or " : ", ";
    else if (i > 0) out += ", ";
    out += e.extension;
    if (last_of_format) out += " (" + std::string(e.what) + ")";
  }
  return out;
}

// An extension of kOutputExtensions -> its format.
std::expected<Format, std::string> format_for_path(const std::string& path);

// Fails, with the reason, if `path` could not be created now (missing
// directory, no permission, read-only file system). Leaves nothing behind.
std::expected<void, std::string> check_writable(const std::string& path);

std::expected<void, std::string> write_profile(const Profile& profile, const std::string& path,
                                               const HtmlOptions& html = {});
// Several profiles of one recording in one pprof file, each with its own
// sample types (see encode_pprof).
std::expected<void, std::string> write_pprof(std::span<const Profile* const> profiles, const std::string& path);

}  // namespace ember::flamegraph
