#include "user/fleet/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "flamegraph/output.h"

namespace ember::fleet {
namespace {

constexpr std::string_view kStates[] = {"pending", "sent", "rejected"};

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string Spool::file_name(const Entry& e) {
  char name[96];
  std::snprintf(name, sizeof name, "%020llu.%llu.%u.%s", static_cast<unsigned long long>(e.start_ns),
                static_cast<unsigned long long>(e.duration_ms), e.profiles,
                kStates[static_cast<size_t>(e.state)].data());
  return name;
}

std::optional<Spool::Entry> Spool::parse_name(std::string_view name) {
  Entry e;
  auto number = [&](auto& out) {
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), out);
    if (ec != std::errc() || end == name.data() || end == name.data() + name.size() || *end != '.') return false;
    name.remove_prefix(static_cast<size_t>(end - name.data()) + 1);
    return true;
  };
  if (!number(e.start_ns) || !number(e.duration_ms) || !number(e.profiles)) return std::nullopt;
  for (size_t i = 0; i < std::size(kStates); ++i)
    if (name == kStates[i]) {
      e.state = static_cast<State>(i);
      return e;
    }
  return std::nullopt;
}

std::expected<std::unique_ptr<Spool>, std::string> Spool::open(const std::string& dir, uint64_t max_bytes,
                                                               double max_age_s) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return std::unexpected("spool.dir: cannot create '" + dir + "': " + std::strerror(errno));
  DIR* d = opendir(dir.c_str());
  if (!d) return std::unexpected("spool.dir: cannot read '" + dir + "': " + std::strerror(errno));
  while (dirent* de = readdir(d))
    if (std::string_view(de->d_name).find(".tmp.") != std::string_view::npos)
      unlinkat(dirfd(d), de->d_name, 0);  // a write cut short by a crash (write_atomically's name)
  closedir(d);
  auto entries = list(dir);
  if (!entries) return std::unexpected("spool.dir: " + entries.error());
  std::unique_ptr<Spool> spool(new Spool(dir, max_bytes, max_age_s));
  for (Entry& e : *entries) spool->entries_[e.start_ns] = std::move(e);
  std::lock_guard lock(spool->mutex_);
  spool->apply_caps();
  return spool;
}

std::expected<std::vector<Spool::Entry>, std::string> Spool::list(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return std::unexpected("cannot read '" + dir + "': " + std::strerror(errno));
  std::vector<Entry> out;
  while (dirent* de = readdir(d)) {
    auto e = parse_name(de->d_name);
    struct stat st;
    if (!e || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    e->bytes = static_cast<uint64_t>(st.st_size);
    e->name = de->d_name;
    out.push_back(std::move(*e));
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.start_ns < b.start_ns; });
  return out;
}

std::expected<void, std::string> Spool::add(uint64_t start_ns, uint64_t duration_ms, uint32_t profiles,
                                            std::string_view body, State state) {
  std::lock_guard lock(mutex_);
  while (entries_.count(start_ns)) ++start_ns;  // two cuts within a ns: keep both, in order
  Entry e{start_ns, duration_ms, profiles, state, body.size(), {}};
  e.name = file_name(e);
  auto written = flamegraph::write_atomically(dir_ + "/" + e.name, body, flamegraph::FileFor::Ember);
  // A full disk: the oldest periods make room, as the size cap would.
  while (!written && !entries_.empty() && lacks_room(body.size())) {
    remove(oldest_to_free());
    ++counts_.full_disk_removals;
    written = flamegraph::write_atomically(dir_ + "/" + e.name, body, flamegraph::FileFor::Ember);
  }
  if (written) {
    entries_[start_ns] = e;
    apply_caps();
    return {};
  }
  ++counts_.write_failures;
  counts_.dropped_profiles += profiles;
  return std::unexpected(written.error());
}

bool Spool::lacks_room(uint64_t bytes) const {
  struct statvfs fs {};
  // A page for the file's own blocks and the directory's.
  return statvfs(dir_.c_str(), &fs) == 0 && fs.f_bavail * fs.f_frsize < bytes + 2 * 4096;
}

std::map<uint64_t, Spool::Entry>::iterator Spool::oldest_to_free() {
  // Sent and refused periods cost nothing to lose: they go first.
  auto it = std::find_if(entries_.begin(), entries_.end(), [](const auto& kv) { return kv.second.state != State::Pending; });
  return it != entries_.end() ? it : entries_.begin();
}

std::optional<Spool::Entry> Spool::oldest_pending() {
  std::lock_guard lock(mutex_);
  for (const auto& [start, e] : entries_)
    if (e.state == State::Pending) return e;
  return std::nullopt;
}

std::expected<std::optional<std::string>, std::string> Spool::read(const std::string& dir, const Entry& e) {
  std::string path = dir + "/" + e.name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  for (size_t i = 0; fd < 0 && errno == ENOENT && i < std::size(kStates); ++i) {
    Entry renamed = e;
    renamed.state = static_cast<State>(i);
    fd = ::open((dir + "/" + file_name(renamed)).c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0 && errno == ENOENT) return std::nullopt;
  if (fd < 0) return std::unexpected("cannot read " + path + ": " + std::strerror(errno));
  std::string body;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) body.append(buf, static_cast<size_t>(n));
  int saved = errno;
  close(fd);
  if (n < 0) return std::unexpected("cannot read " + path + ": " + std::strerror(saved));
  return body;
}

void Spool::mark(const Entry& e, State state) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(e.start_ns);
  if (it == entries_.end() || it->second.name != e.name) {
    // A cap removed it while it was sent, counting it as dropped: it was
    // not lost, the send's outcome counts it.
    counts_.dropped_profiles -= e.profiles;
    return;
  }
  Entry next = it->second;
  next.state = state;
  next.name = file_name(next);
  if (rename((dir_ + "/" + it->second.name).c_str(), (dir_ + "/" + next.name).c_str()) == 0) it->second = next;
}

void Spool::set_caps(uint64_t max_bytes, double max_age_s) {
  std::lock_guard lock(mutex_);
  max_bytes_ = max_bytes;
  max_age_s_ = max_age_s;
  apply_caps();
}

Spool::Counts Spool::counts() {
  std::lock_guard lock(mutex_);
  Counts c = counts_;
  for (const auto& [start, e] : entries_) {
    c.bytes += e.bytes;
    if (e.state == State::Pending) {
      ++c.pending_files;
      c.pending_profiles += e.profiles;
    }
  }
  return c;
}

void Spool::remove(std::map<uint64_t, Entry>::iterator it) {
  unlink((dir_ + "/" + it->second.name).c_str());
  (it->second.state == State::Pending ? counts_.dropped_profiles : counts_.expired_profiles) += it->second.profiles;
  entries_.erase(it);
}

void Spool::apply_caps() {
  uint64_t oldest_kept = now_ns() - static_cast<uint64_t>(max_age_s_ * 1e9);
  while (!entries_.empty() && entries_.begin()->first < oldest_kept) remove(entries_.begin());
  uint64_t total = 0;
  for (const auto& [start, e] : entries_) total += e.bytes;
  while (total > max_bytes_ && !entries_.empty()) {
    total -= entries_.begin()->second.bytes;
    remove(entries_.begin());
  }
}

}  // namespace ember::fleet
