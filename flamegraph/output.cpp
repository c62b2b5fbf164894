#include "flamegraph/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <utility>
#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/otlp.h"
#include "flamegraph/pprof.h"

namespace ember::flamegraph {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// A temporary file beside `path`, so the final rename stays on one file system.
struct TempFile {
  std::string name;  // empty while unnamed (O_TMPFILE)
  int fd = -1;
  ~TempFile() {
    if (fd >= 0) close(fd);
    if (!name.empty()) unlink(name.c_str());
  }
};

std::string random_suffix() {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;
  std::string out;
  for (int i = 0; i < 8; ++i) out += kChars[random() % (sizeof kChars - 1)];
  return out;
}

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Gives the temporary file a random name beside `path` (O_EXCL for a file of
// its own: linkat makes none). A directory another user writes in cannot
// plant a link there that is followed.
std::expected<void, std::string> name_temp(const std::string& path, TempFile& tmp) {
  std::string fd_path = "/proc/self/fd/" + std::to_string(tmp.fd);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = path + ".tmp." + random_suffix();
    if (linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      tmp.name = std::move(name);
      return {};
    }
    if (errno != EEXIST) break;
  }
  return std::unexpected("cannot write " + path + ": " + errno_text(errno));
}

// A new file for `path`: unnamed (O_TMPFILE) where the file system allows,
// so that a kill -9 while writing leaves nothing behind; otherwise a named
// one (O_EXCL, O_NOFOLLOW: a link planted at the name is not followed). The
// kernel applies the umask, so none of ember's threads sees it changed.
std::expected<void, std::string> open_temp(const std::string& path, mode_t mode, TempFile& tmp) {
  tmp.fd = open(directory_of(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
  if (tmp.fd >= 0) return {};
  // EOPNOTSUPP: a file system without O_TMPFILE; EISDIR: a kernel before 3.11.
  if (errno != EOPNOTSUPP && errno != EISDIR) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = path + ".tmp." + random_suffix();
    tmp.fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (tmp.fd >= 0) {
      tmp.name = std::move(name);
      return {};
    }
    if (errno != EEXIST) break;
  }
  return std::unexpected("cannot write " + path + ": " + errno_text(errno));
}

// A decimal id, as sudo writes it; nothing else.
std::optional<unsigned> parse_id(const char* text) {
  if (!text || !*text) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text, text + std::strlen(text), value);
  if (ec != std::errc() || *end != '\0' || value == static_cast<unsigned>(-1)) return std::nullopt;
  return value;
}

}  // namespace

// A rename replaces a link at `path` rather than writing through it.
std::expected<void, std::string> write_atomically(const std::string& path, std::string_view data, FileFor whom) {
  TempFile tmp;
  if (auto r = open_temp(path, whom == FileFor::User ? 0644 : 0600, tmp); !r) return r;
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(tmp.fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
    done += static_cast<size_t>(n);
  }
  // Best effort: a file system without owners (vfat) refuses, and its
  // files already belong to whoever mounted it.
  if (auto owner = invoking_user(); owner && whom == FileFor::User) {
    int ignored = fchown(tmp.fd, owner->uid, owner->gid);
    (void)ignored;
  }
  if (fsync(tmp.fd) != 0) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
  if (tmp.name.empty())
    if (auto r = name_temp(path, tmp); !r) return r;
  if (close(std::exchange(tmp.fd, -1)) != 0) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
  if (rename(tmp.name.c_str(), path.c_str()) != 0)
    return std::unexpected("cannot write " + path + ": " + errno_text(errno));
  tmp.name.clear();
  return {};
}

std::optional<FileOwner> invoking_user() {
  if (geteuid() != 0) return std::nullopt;
  auto uid = parse_id(std::getenv("SUDO_UID"));
  if (!uid) return std::nullopt;
  auto gid = parse_id(std::getenv("SUDO_GID"));
  return FileOwner{static_cast<uid_t>(*uid), gid ? static_cast<gid_t>(*gid) : static_cast<gid_t>(-1)};
}

std::string output_extensions_text() {
  std::string out;
  for (size_t i = 0; i < std::size(kOutputExtensions); ++i) {
    const OutputExtension& e = kOutputExtensions[i];
    bool first_of_format = i == 0 || kOutputExtensions[i - 1].format != e.format;
    bool last_of_format = i + 1 == std::size(kOutputExtensions) || kOutputExtensions[i + 1].format != e.format;
    if (i > 0) out += first_of_format || !last_of_format ? ", " : " or ";
    out += e.extension;
    if (last_of_format) out += " (" + std::string(e.what) + ")";
  }
  return out;
}

std::string with_part(const std::string& path, std::string_view part) {
  for (const OutputExtension& e : kOutputExtensions)
    if (path.size() > e.extension.size() && path.ends_with(e.extension))
      return path.substr(0, path.size() - e.extension.size()) + "." + std::string(part) + std::string(e.extension);
  return path + "." + std::string(part);
}

std::expected<Format, std::string> format_for_path(const std::string& path) {
  for (const OutputExtension& e : kOutputExtensions)
    if (path.size() > e.extension.size() && path.ends_with(e.extension)) return e.format;
  return std::unexpected("cannot tell the output format of '" + path + "': use an extension " +
                         output_extensions_text());
}

std::expected<void, std::string> check_writable(const std::string& path) {
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return std::unexpected("cannot write " + path + ": it is a directory");
  TempFile tmp;
  return open_temp(path, 0644, tmp);
}

std::expected<void, std::string> write_profile(const Profile& profile, const std::string& path,
                                               const HtmlOptions& html) {
  auto format = format_for_path(path);
  if (!format) return std::unexpected(format.error());
  if (holds_every_event(*format)) {
    const Profile* one[] = {&profile};
    return write_profiles(one, path);
  }
  std::ostringstream body;
  if (*format == Format::Html)
    write_html(profile, html, body);
  else
    write_folded(profile, body);
  return write_atomically(path, std::move(body).str());
}

std::expected<void, std::string> write_profiles(std::span<const Profile* const> profiles, const std::string& path) {
  auto format = format_for_path(path);
  if (!format) return std::unexpected(format.error());
  if (*format == Format::Pprof) return write_atomically(path, encode_pprof(profiles));
  if (*format != Format::Otlp) return std::unexpected("cannot write several profiles to one file of '" + path + "'");
  // A recording's resource: the host its facts name.
  OtlpResource recording;
  for (const auto& [key, value] : profiles.front()->info)
    if (key == "host") recording.attributes.push_back({"host.name", value});
  recording.profiles.assign(profiles.begin(), profiles.end());
  return write_atomically(path, encode_otlp(std::span(&recording, 1)));
}

}  // namespace ember::flamegraph
