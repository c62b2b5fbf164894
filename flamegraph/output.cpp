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
#include <sstream>

#include "flamegraph/folded.h"
#include "flamegraph/pprof.h"

namespace ember::flamegraph {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// A temporary file beside `path`, so the final rename stays on one file system.
struct TempFile {
  std::string name;
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

// A new file under a random name (O_EXCL): the directory may be one another
// user writes in, and a link planted at the name is not followed. Mode 0644
// less the umask: what cp makes (0666 less the umask) but never writable by
// others, whatever the umask. The kernel applies the umask, so none of
// ember's threads sees it changed.
std::expected<void, std::string> open_temp(const std::string& path, TempFile& tmp) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = path + ".tmp." + random_suffix();
    tmp.fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
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
std::expected<void, std::string> write_atomically(const std::string& path, std::string_view data) {
  TempFile tmp;
  if (auto r = open_temp(path, tmp); !r) return r;
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(tmp.fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
    done += static_cast<size_t>(n);
  }
  // Best effort: a file system without owners (vfat) refuses, and its
  // files already belong to whoever mounted it.
  if (auto owner = invoking_user()) (void)fchown(tmp.fd, owner->uid, owner->gid);
  if (fsync(tmp.fd) != 0 || close(tmp.fd) != 0) {
    tmp.fd = -1;
    return std::unexpected("cannot write " + path + ": " + errno_text(errno));
  }
  tmp.fd = -1;
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
  return open_temp(path, tmp);
}

std::expected<void, std::string> write_profile(const Profile& profile, const std::string& path,
                                               const HtmlOptions& html) {
  auto format = format_for_path(path);
  if (!format) return std::unexpected(format.error());
  std::string data;
  if (*format == Format::Pprof) {
    data = encode_pprof(profile);
  } else {
    std::ostringstream body;
    if (*format == Format::Html)
      write_html(profile, html, body);
    else
      write_folded(profile, body);
    data = std::move(body).str();
  }
  return write_atomically(path, data);
}

std::expected<void, std::string> write_pprof(std::span<const Profile* const> profiles, const std::string& path) {
  return write_atomically(path, encode_pprof(profiles));
}

}  // namespace ember::flamegraph
