// Writing a profile to a file whose format follows its extension. Files are
// complete or absent: written under a temporary name, then renamed.
#pragma once

#include <expected>
#include <span>
#include <string>

#include "flamegraph/html.h"
#include "flamegraph/profile.h"

namespace ember::flamegraph {

enum class Format { Html, Folded, Pprof };

// .html -> Html; .folded, .txt, .collapsed -> Folded; .pb.gz, .pprof -> Pprof.
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
