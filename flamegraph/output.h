// Writing a profile to a file whose format follows its extension. Files are
// complete or absent: written as a temporary file, then renamed. Under
// sudo they belong to the user who ran it (see invoking_user).
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "flamegraph/html.h"
#include "flamegraph/profile.h"

namespace ember::flamegraph {

enum class Format { Html, Folded, Pprof, Otlp };

// Whether a file of the format holds every event of a recording (a profile
// each), not one.
inline bool holds_every_event(Format f) { return f == Format::Pprof || f == Format::Otlp; }

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
    {".otlp", Format::Otlp, "OpenTelemetry profiles"},
};

// ".html (flamegraph), .folded, .txt or .collapsed (folded stacks), ...":
// kOutputExtensions for help texts and errors.
std::string output_extensions_text();

// `path` with ".PART" before its extension of kOutputExtensions
// (out.html -> out.PART.html), or after it if it has none.
std::string with_part(const std::string& path, std::string_view part);

// An extension of kOutputExtensions -> its format.
std::expected<Format, std::string> format_for_path(const std::string& path);

struct FileOwner {
  uid_t uid;
  gid_t gid;  // -1: left as it is
};

// Whom ember's outputs belong to: under sudo (root, with SUDO_UID and
// SUDO_GID set) the user who ran it, so `sudo ember record -o x.html`
// leaves x.html as theirs; otherwise nobody else than this process.
std::optional<FileOwner> invoking_user();

// Whom a file is for: an output (mode 0644 less the umask; under sudo, the
// user's), or ember's own state (0600, left to this process's user).
enum class FileFor { User, Ember };

// Writes `data` to `path` complete or not at all, as every file of ember's:
// a new temporary file beside it, unnamed while written where the file
// system allows (a kill -9 leaves nothing), then renamed over it. A full
// disk fails with the reason and leaves the previous file as it was.
std::expected<void, std::string> write_atomically(const std::string& path, std::string_view data,
                                                  FileFor whom = FileFor::User);

// Fails, with the reason, if `path` could not be created now (missing
// directory, no permission, read-only file system). Leaves nothing behind.
std::expected<void, std::string> check_writable(const std::string& path);

std::expected<void, std::string> write_profile(const Profile& profile, const std::string& path,
                                               const HtmlOptions& html = {});
// Several profiles of one recording in one file of a format that holds
// them all (holds_every_event): pprof, each with its own sample types (see
// encode_pprof); OTLP, a profile each.
std::expected<void, std::string> write_profiles(std::span<const Profile* const> profiles, const std::string& path);

}  // namespace ember::flamegraph
