#include "flamegraph/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

std::expected<void, std::string> open_temp(const std::string& path, TempFile& tmp) {
  std::string pattern = path + ".tmp.XXXXXX";
  tmp.fd = mkstemp(pattern.data());
  if (tmp.fd < 0) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
  tmp.name = pattern;
  return {};
}

// Complete or absent: written to a temporary name in the same directory, then renamed.
std::expected<void, std::string> write_atomically(const std::string& path, const std::string& data) {
  TempFile tmp;
  if (auto r = open_temp(path, tmp); !r) return r;
  mode_t mask = umask(0);
  umask(mask);
  fchmod(tmp.fd, 0666 & ~mask);
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(tmp.fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected("cannot write " + path + ": " + errno_text(errno));
    done += static_cast<size_t>(n);
  }
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

}  // namespace

std::expected<Format, std::string> format_for_path(const std::string& path) {
  auto ends = [&](std::string_view ext) { return path.size() > ext.size() && path.ends_with(ext); };
  if (ends(".html")) return Format::Html;
  if (ends(".folded") || ends(".txt") || ends(".collapsed")) return Format::Folded;
  if (ends(".pb.gz") || ends(".pprof")) return Format::Pprof;
  return std::unexpected("cannot tell the output format of '" + path +
                         "': use an extension .html (flamegraph), .folded/.txt (folded stacks) or .pb.gz (pprof)");
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
