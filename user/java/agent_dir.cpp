#include "user/java/agent_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <regex>
#include <string_view>

namespace ember {
namespace {

constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
constexpr size_t kSuffix = 8;

// "ember-<pid>-<suffix>": ours, and only ours, in a shared /tmp.
bool is_agent_dir_name(const char* name) {
  static const std::regex pattern("ember-[0-9]+-[a-z0-9]{8}");
  return std::regex_match(name, pattern);
}

std::string random_suffix() {
  unsigned char bytes[kSuffix];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) return {};
  std::string s;
  for (unsigned char b : bytes) s += kAlphabet[b % (sizeof kAlphabet - 1)];
  return s;
}

// The entries of directory `fd` (which stays open).
std::vector<std::string> entries(int fd) {
  std::vector<std::string> out;
  int copy = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = copy >= 0 ? fdopendir(copy) : nullptr;
  if (!dir) {
    if (copy >= 0) close(copy);
    return out;
  }
  while (dirent* e = readdir(dir))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
  closedir(dir);
  return out;
}

// Empties directory `fd` and removes it as `name` in `parent_fd`. unlinkat
// removes links, never what they point to.
void remove_dir(int parent_fd, int fd, const std::string& name) {
  for (const std::string& e : entries(fd))
    if (unlinkat(fd, e.c_str(), 0) != 0 && errno == EISDIR) unlinkat(fd, e.c_str(), AT_REMOVEDIR);
  unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR);
}

std::string errno_text() { return std::strerror(errno); }

// ROOT/tmp, opened, if others cannot move what ember puts there: the
// sticky bit (or nobody else may write to it).
std::expected<int, std::string> open_tmp(const std::string& root) {
  std::string tmp = root + "/tmp";
  int fd = open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::unexpected("cannot open " + tmp + ": " + errno_text());
  struct stat st{};
  if (fstat(fd, &st) != 0 || ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))) {
    close(fd);
    return std::unexpected(tmp + " is writable by every user without the sticky bit: anyone could replace what "
                           "ember puts there (chmod 1777 it)");
  }
  return fd;
}

// Whether NAME in `dir_fd` is a copy of `bytes` that only ember's user can
// have written.
bool is_trusted_copy(int dir_fd, const std::string& name, const std::string& bytes) {
  int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  bool trusted = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                 !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_size == static_cast<off_t>(bytes.size());
  std::string found(trusted ? bytes.size() : 0, '\0');
  trusted = trusted && pread(fd, found.data(), found.size(), 0) == static_cast<ssize_t>(found.size()) && found == bytes;
  close(fd);
  return trusted;
}

// Writes `bytes` to NAME in `dir_fd` if nothing is there: through a new
// temporary file, mode 0644, renamed without replacing.
bool write_new_copy(int dir_fd, const std::string& name, const std::string& bytes) {
  std::string temporary = name + "." + random_suffix();
  int fd = openat(dir_fd, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool written = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && fchmod(fd, 0644) == 0;
  close(fd);
  if (written && renameat2(dir_fd, temporary.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE) == 0) return true;
  unlinkat(dir_fd, temporary.c_str(), 0);
  return false;
}

}  // namespace

std::expected<AgentDir, std::string> AgentDir::create(const std::string& root, uid_t uid, gid_t gid) {
  AgentDir d;
  std::string tmp = root + "/tmp";
  auto tmp_fd = open_tmp(root);
  if (!tmp_fd) return std::unexpected(tmp_fd.error());
  d.tmp_fd_ = *tmp_fd;
  for (int attempt = 0; attempt < 16 && d.fd_ < 0; ++attempt) {
    std::string suffix = random_suffix();
    if (suffix.empty()) return std::unexpected("getrandom: " + errno_text());
    d.name_ = "ember-" + std::to_string(getpid()) + "-" + suffix;
    if (mkdirat(d.tmp_fd_, d.name_.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return std::unexpected("cannot create a directory in " + tmp + ": " + errno_text());
    }
    d.fd_ = openat(d.tmp_fd_, d.name_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d.fd_ < 0) return std::unexpected("cannot open the directory just made in " + tmp + ": " + errno_text());
  }
  if (d.fd_ < 0) return std::unexpected("cannot find a free name in " + tmp);
  d.path_ = "/tmp/" + d.name_;
  d.uid_ = uid;
  struct stat st{};
  if (flock(d.fd_, LOCK_SH) != 0 || fstat(d.fd_, &st) != 0 || st.st_uid != geteuid())
    return std::unexpected("cannot hold " + tmp + "/" + d.name_ + ": " + errno_text());
  if (fchown(d.fd_, uid, gid) != 0)
    return std::unexpected("cannot give " + tmp + "/" + d.name_ + " to user " + std::to_string(uid) + ": " +
                           errno_text());
  return d;
}

AgentDir::AgentDir(AgentDir&& other) noexcept
    : tmp_fd_(other.tmp_fd_), fd_(other.fd_), name_(std::move(other.name_)), path_(std::move(other.path_)),
      uid_(other.uid_) {
  other.tmp_fd_ = other.fd_ = -1;
}

AgentDir::~AgentDir() {
  if (fd_ >= 0 && tmp_fd_ >= 0) remove_dir(tmp_fd_, fd_, name_);
  if (fd_ >= 0) close(fd_);
  if (tmp_fd_ >= 0) close(tmp_fd_);
}

int AgentDir::open_file(const std::string& name) const {
  // O_NONBLOCK: a FIFO placed there must not hang the open.
  int fd = openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid_) {
    close(fd);
    return -1;
  }
  return fd;
}

std::vector<std::string> AgentDir::names() const { return entries(fd_); }

void AgentDir::remove_file(const std::string& name) const { unlinkat(fd_, name.c_str(), 0); }

std::expected<std::string, std::string> place_agent_library(const std::string& root, const std::string& agent) {
  std::ifstream in(agent, std::ios::binary);
  std::ostringstream copy;  // through rdbuf: a read error leaves it short, never throws
  copy << in.rdbuf();
  std::string bytes = std::move(copy).str();
  struct stat st{};
  if (!in || stat(agent.c_str(), &st) != 0) return std::unexpected("cannot read " + agent);
  auto tmp_fd = open_tmp(root);
  if (!tmp_fd) return std::unexpected(tmp_fd.error());
  std::string name = "libember-agent-" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtime) + ".so";
  bool placed = is_trusted_copy(*tmp_fd, name, bytes) || write_new_copy(*tmp_fd, name, bytes);
  if (!placed) {
    name = "libember-agent-" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtime) + "-" +
           random_suffix() + ".so";
    placed = write_new_copy(*tmp_fd, name, bytes);
  }
  int e = errno;
  close(*tmp_fd);
  if (!placed) return std::unexpected("cannot copy the agent into " + root + "/tmp: " + std::strerror(e));
  return "/tmp/" + name;
}

size_t sweep_agent_dirs(const std::string& root) {
  std::string tmp = root + "/tmp";
  int tmp_fd = open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tmp_fd < 0) return 0;
  size_t removed = 0;
  for (const std::string& name : entries(tmp_fd)) {
    if (!is_agent_dir_name(name.c_str())) continue;
    int fd = openat(tmp_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    // Held by a live ember, or by an agent cleaning it up itself: not stale.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      remove_dir(tmp_fd, fd, name);
      ++removed;
    }
    close(fd);
  }
  close(tmp_fd);
  return removed;
}

bool read_agent_stream(int& fd, std::string& file, const StreamFiles& files, symbolizer::JitMap& map,
                       java::JavaEvents* events) {
  char buf[1 << 16];
  while (fd >= 0) {
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      map.feed(std::string_view(buf, static_cast<size_t>(n)));
      if (events) events->feed(std::string_view(buf, static_cast<size_t>(n)));
    }
    const std::string& next = map.continued_in();
    if (next.empty() || next == file || !files) return true;
    close(fd);
    fd = files(file, next);
    file = next;
  }
  return fd >= 0;
}

}  // namespace ember
