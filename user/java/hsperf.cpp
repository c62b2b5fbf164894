#include "user/java/hsperf.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

namespace ember::hsperf {
namespace {

constexpr uint32_t kMagic = 0xcafec0c0;
constexpr int kMajorVersion = 2;
// The file is PerfDataMemorySize bytes (32 KiB by default in JDK 17, a
// flag); one past this bound is not an hsperfdata file, and is not read.
constexpr off_t kMaxFileSize = 64 << 20;

// Fixed-width loads in the image's byte order, from offsets the caller has
// bounds-checked.
class Reader {
 public:
  Reader(std::span<const std::byte> data, bool little)
      : data_(data), swap_(little != (std::endian::native == std::endian::little)) {}
  uint8_t u1(size_t at) const { return static_cast<uint8_t>(data_[at]); }
  int32_t s4(size_t at) const { return load<int32_t>(at); }
  int64_t s8(size_t at) const { return load<int64_t>(at); }

 private:
  template <typename T>
  T load(size_t at) const {
    T v;
    std::memcpy(&v, data_.data() + at, sizeof v);
    return swap_ ? std::byteswap(v) : v;
  }
  std::span<const std::byte> data_;
  bool swap_;
};

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Counter names are dotted ASCII identifiers ("sun.gc.collector.0.time").
bool plausible_name(std::string_view name) {
  if (name.empty() || name.size() > 1024) return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  return true;
}

}  // namespace

std::optional<int64_t> Snapshot::number(std::string_view name) const {
  auto it = counters.find(name);
  if (it == counters.end()) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&it->second.value)) return *v;
  return std::nullopt;
}

const std::string* Snapshot::text(std::string_view name) const {
  auto it = counters.find(name);
  return it == counters.end() ? nullptr : std::get_if<std::string>(&it->second.value);
}

std::expected<Snapshot, std::string> parse(std::span<const std::byte> data, std::string_view file) {
  auto bad = [&](const std::string& why) { return std::unexpected(std::string(file) + ": " + why); };
  if (data.size() < kPrologueSize)
    return bad("truncated: " + std::to_string(data.size()) + " bytes, shorter than the " +
               std::to_string(kPrologueSize) + "-byte PerfData prologue");
  // The magic's bytes are CA FE C0 C0 on every platform (perfMemory.cpp
  // stores 0xc0c0feca on little-endian ones); the next byte gives the order
  // of everything else.
  uint32_t magic = 0;
  for (size_t i = 0; i < 4; ++i) magic = magic << 8 | static_cast<uint8_t>(data[i]);
  if (magic != kMagic) return bad("not a HotSpot hsperfdata file (magic " + hex32(magic) + ", not 0xcafec0c0)");
  uint8_t order = static_cast<uint8_t>(data[4]);
  if (order > 1) return bad("damaged: byte order " + std::to_string(order) + " (0: big, 1: little endian)");
  Reader r(data, order == 1);
  if (r.u1(5) != kMajorVersion)
    return bad("PerfData version " + std::to_string(r.u1(5)) + "." + std::to_string(r.u1(6)) +
               ", ember reads version 2 (JDK 1.4.2 and later)");

  Snapshot snap;
  snap.accessible = r.u1(7) != 0;
  int64_t used = r.s4(8);
  snap.mod_time_stamp = r.s8(16);
  int64_t entry_offset = r.s4(24);
  int64_t num_entries = r.s4(28);
  int64_t size = static_cast<int64_t>(data.size());
  if (used < static_cast<int64_t>(kPrologueSize) || used > size)
    return bad(used > size
                   ? "truncated: " + std::to_string(size) + " bytes of the " + std::to_string(used) + " the JVM wrote"
                   : "damaged: it says " + std::to_string(used) + " bytes are in use");
  if (entry_offset < static_cast<int64_t>(kPrologueSize) || entry_offset > used)
    return bad("damaged: its first entry would be at offset " + std::to_string(entry_offset) + ", outside its " +
               std::to_string(used) + " bytes in use");
  if (num_entries < 0 || num_entries > (used - entry_offset) / static_cast<int64_t>(kEntryHeaderSize))
    return bad("damaged: " + std::to_string(num_entries) + " entries cannot fit in its " + std::to_string(used) +
               " bytes in use");

  int64_t at = entry_offset;
  for (int64_t i = 0; i < num_entries; ++i) {
    std::string where = "entry " + std::to_string(i) + " (offset " + std::to_string(at) + ")";
    if (at + static_cast<int64_t>(kEntryHeaderSize) > used)
      return bad("truncated: " + where + " ends past the data in use");
    int64_t length = r.s4(static_cast<size_t>(at));
    int64_t name_offset = r.s4(static_cast<size_t>(at + 4));
    int64_t vector_length = r.s4(static_cast<size_t>(at + 8));
    uint8_t type = r.u1(static_cast<size_t>(at + 12));
    uint8_t units = r.u1(static_cast<size_t>(at + 14));
    uint8_t variability = r.u1(static_cast<size_t>(at + 15));
    int64_t data_offset = r.s4(static_cast<size_t>(at + 16));
    if (length < static_cast<int64_t>(kEntryHeaderSize) || length > used - at)
      return bad("damaged: " + where + " has length " + std::to_string(length));
    if (name_offset < static_cast<int64_t>(kEntryHeaderSize) || name_offset >= length)
      return bad("damaged: " + where + " has its name at " + std::to_string(name_offset) + ", outside its " +
                 std::to_string(length) + " bytes");
    const char* entry = reinterpret_cast<const char*>(data.data()) + at;
    std::string_view rest(entry + name_offset, static_cast<size_t>(length - name_offset));
    size_t nul = rest.find('\0');
    if (nul == rest.npos) return bad("damaged: " + where + " has a name without its terminating NUL");
    std::string_view name = rest.substr(0, nul);
    if (!plausible_name(name)) return bad("damaged: " + where + " has a name that is not a counter name");
    if (vector_length < 0) return bad("damaged: " + where + " (" + std::string(name) + ") has a negative length");

    Counter counter;
    counter.units = units;
    counter.variability = variability;
    bool data_fits = data_offset >= static_cast<int64_t>(kEntryHeaderSize) && data_offset <= length;
    if (type == 'J' && vector_length == 0) {
      if (!data_fits || length - data_offset < 8)
        return bad("damaged: " + where + " (" + std::string(name) + ") has its value outside the entry");
      counter.value = r.s8(static_cast<size_t>(at + data_offset));
    } else if (type == 'B' && vector_length > 0) {
      if (!data_fits || length - data_offset < vector_length)
        return bad("damaged: " + where + " (" + std::string(name) + ") has its bytes outside the entry");
      std::string_view bytes(entry + data_offset, static_cast<size_t>(vector_length));
      counter.value = std::string(bytes.substr(0, bytes.find('\0')));
    } else {
      ++snap.skipped;  // other types: none in HotSpot to date
      at += length;
      continue;
    }
    snap.counters.emplace(std::string(name), std::move(counter));  // the first of a name wins
    at += length;
  }
  return snap;
}

std::expected<std::string, std::string> find_file(const java::JvmProcess& jvm) {
  std::string tmp = jvm.root + "/tmp";
  DIR* dir = opendir(tmp.c_str());
  if (!dir) {
    int err = errno;
    if (err == EACCES || err == EPERM)
      return std::unexpected("cannot look into " + tmp + ": " + std::strerror(err) + "; JVM " +
                             std::to_string(jvm.pid) + " runs as uid " + std::to_string(jvm.uid) +
                             ": run ember as that user or as root");
    return std::unexpected("cannot look into " + tmp + ": " + std::strerror(err));
  }
  struct Candidate {
    std::string path;
    uid_t uid;
    struct timespec mtime;
  };
  std::vector<Candidate> found;
  std::string leaf = "/" + std::to_string(jvm.ns_pid);
  while (dirent* e = readdir(dir)) {
    if (!std::string_view(e->d_name).starts_with("hsperfdata_")) continue;
    std::string path = tmp + "/" + e->d_name + leaf;
    struct stat sb {};
    // lstat: HotSpot writes a regular file and refuses symlinks itself.
    if (lstat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode)) found.push_back({path, sb.st_uid, sb.st_mtim});
  }
  closedir(dir);
  if (found.empty())
    return std::unexpected("no hsperfdata file for JVM " + std::to_string(jvm.pid) + " (looked for " + tmp +
                           "/hsperfdata_*" + leaf + ")");
  // A file of another user with the same pid is left over from a JVM of a
  // pid namespace since gone; the newest file of the JVM's own user wins.
  const Candidate* best = nullptr;
  for (const Candidate& c : found) {
    auto key = [&](const Candidate& x) { return std::make_tuple(x.uid == jvm.uid, x.mtime.tv_sec, x.mtime.tv_nsec); };
    if (!best || key(c) > key(*best)) best = &c;
  }
  return best->path;
}

std::expected<File, std::string> File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    std::string why = "cannot open " + path + ": " + std::strerror(err);
    if (err == EACCES || err == EPERM) {
      struct stat sb {};
      if (stat(path.c_str(), &sb) == 0)
        why += "; it belongs to uid " + std::to_string(sb.st_uid) + ": run ember as that user or as root";
    }
    return std::unexpected(why);
  }
  return File(fd, path);
}

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)), buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    buffer_ = std::move(other.buffer_);
    other.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) close(fd_);
}

std::expected<Snapshot, std::string> File::read() {
  struct stat sb {};
  if (fstat(fd_, &sb) != 0) return std::unexpected("cannot stat " + path_ + ": " + std::strerror(errno));
  if (sb.st_size > kMaxFileSize)
    return std::unexpected(path_ + ": " + std::to_string(sb.st_size) + " bytes, too large for an hsperfdata file");
  buffer_.resize(static_cast<size_t>(sb.st_size));
  size_t got = 0;
  while (got < buffer_.size()) {
    ssize_t n = pread(fd_, buffer_.data() + got, buffer_.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected("cannot read " + path_ + ": " + std::strerror(errno));
    if (n == 0) break;  // shrunk since fstat: parse() names what is missing
    got += static_cast<size_t>(n);
  }
  return parse(std::as_bytes(std::span(buffer_.data(), got)), path_);
}

}  // namespace ember::hsperf
