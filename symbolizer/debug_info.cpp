#include "symbolizer/debug_info.h"

#include <elfutils/debuginfod.h>
#include <fcntl.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace ember::symbolizer {
namespace {

std::string dirname_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Budget bookkeeping for one debuginfod query, reached from its progress callback.
struct DebuginfodDeadline {
  std::chrono::steady_clock::time_point until;
};

int debuginfod_progress(debuginfod_client* client, long, long) {
  auto* deadline = static_cast<DebuginfodDeadline*>(debuginfod_get_user_data(client));
  return deadline && std::chrono::steady_clock::now() > deadline->until;  // non-zero aborts the query
}

}  // namespace

DebugFile::DebugFile(DebugFile&& o) noexcept
    : fd(std::exchange(o.fd, -1)), path(std::move(o.path)), found_by(std::move(o.found_by)), elf(std::move(o.elf)) {}

DebugFile& DebugFile::operator=(DebugFile&& o) noexcept {
  // What this held goes to `o`, to be released with it.
  std::swap(fd, o.fd);
  std::swap(path, o.path);
  std::swap(found_by, o.found_by);
  std::swap(elf, o.elf);
  return *this;
}

DebugFile::~DebugFile() {
  elf.reset();  // before its file
  if (fd >= 0) close(fd);
}

DebugFinder::DebugFinder(DebugSearch search) : search_(std::move(search)) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  debuginfod_off_ = !urls || !*urls;
  // debuginfod's own timeout, in whole seconds, bounds the whole run's
  // queries too: a user who wants a stalled server given up on sooner says so.
  if (const char* timeout = std::getenv("DEBUGINFOD_TIMEOUT")) {
    unsigned seconds = 0;
    std::string_view text(timeout);
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (ec == std::errc() && end == text.data() + text.size() && seconds > 0)
      search_.debuginfod_budget = std::chrono::seconds(seconds);
  }
}

DebugFinder::~DebugFinder() {
  if (debuginfod_) debuginfod_end(static_cast<debuginfod_client*>(debuginfod_));
}

std::optional<uint32_t> file_crc32(int fd) {
  uLong crc = crc32(0, nullptr, 0);
  char buf[1 << 16];
  for (off_t at = 0;;) {
    ssize_t n = pread(fd, buf, sizeof buf, at);
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buf), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

std::optional<DebugFile> DebugFinder::open_matching(const std::string& path, const ElfSymbols& binary,
                                                    const char* found_by) {
  DebugFile file;
  file.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return std::nullopt;
  auto elf = ElfSymbols::read(file.fd, path);
  if (!elf) return std::nullopt;
  // Same build-id, or (files without one) the CRC the debuglink recorded.
  if (!binary.build_id().empty()) {
    if ((*elf)->build_id() != binary.build_id()) return std::nullopt;
  } else if (binary.debuglink().empty() || file_crc32(file.fd) != binary.debuglink_crc()) {
    return std::nullopt;
  }
  file.path = path;
  file.found_by = found_by;
  file.elf = std::move(*elf);
  return file;
}

std::optional<DebugFile> DebugFinder::find(const ElfSymbols& binary, const std::string& path,
                                           const std::string& root, std::vector<std::string>& warnings) {
  // Debug files inside a container first (they match its binaries), then the host's.
  std::vector<std::string> roots;
  if (!root.empty()) roots.push_back(root);
  roots.push_back("");
  const std::string& id = binary.build_id();
  if (id.size() > 2) {
    for (const std::string& r : roots)
      for (const std::string& dir : search_.debug_dirs)
        if (auto f = open_matching(r + dir + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug", binary,
                                   "build-id"))
          return f;
  }
  if (!binary.debuglink().empty() && binary.debuglink().find('/') == std::string::npos) {
    std::string dir = dirname_of(path);
    for (const std::string& r : roots) {
      std::vector<std::string> candidates = {r + dir + "/" + binary.debuglink(),
                                             r + dir + "/.debug/" + binary.debuglink()};
      for (const std::string& debug_dir : search_.debug_dirs)
        candidates.push_back(r + debug_dir + dir + "/" + binary.debuglink());
      for (const std::string& candidate : candidates) {
        if (candidate == r + path) continue;  // a debuglink naming the binary itself
        if (auto f = open_matching(candidate, binary, "debuglink")) return f;
      }
    }
  }
  if (!id.empty()) return from_debuginfod(binary, path, warnings);
  return std::nullopt;
}

std::optional<DebugFile> DebugFinder::from_debuginfod(const ElfSymbols& binary, const std::string& name,
                                                      std::vector<std::string>& warnings) {
  if (debuginfod_off_) return std::nullopt;
  if (!debuginfod_) {
    debuginfod_ = debuginfod_begin();
    if (!debuginfod_) {
      debuginfod_off_ = true;
      warnings.push_back("debuginfod: cannot start a client; DEBUGINFOD_URLS is ignored");
      return std::nullopt;
    }
    debuginfod_set_progressfn(static_cast<debuginfod_client*>(debuginfod_), debuginfod_progress);
  }
  auto* client = static_cast<debuginfod_client*>(debuginfod_);
  auto start = std::chrono::steady_clock::now();
  DebuginfodDeadline deadline{start + (search_.debuginfod_budget - debuginfod_spent_)};
  debuginfod_set_user_data(client, &deadline);
  char* found = nullptr;
  // A build-id length of 0 means: the id is given as a hex string.
  int fd = debuginfod_find_debuginfo(client, reinterpret_cast<const unsigned char*>(binary.build_id().c_str()), 0,
                                     &found);
  debuginfod_set_user_data(client, nullptr);
  debuginfod_spent_ += std::chrono::steady_clock::now() - start;
  if (debuginfod_spent_ >= search_.debuginfod_budget) {
    debuginfod_off_ = true;
    warnings.push_back("debuginfod: stopped asking after " +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(debuginfod_spent_).count()) +
                       " ms (the time budget; the server at DEBUGINFOD_URLS is slow or unreachable); frames of " +
                       name + " and later binaries use local debug info only");
  }
  if (fd < 0) {
    std::free(found);
    return std::nullopt;
  }
  std::string path = found ? found : name + " (debuginfod)";
  std::free(found);
  auto elf = ElfSymbols::read(fd, path);
  if (!elf || (*elf)->build_id() != binary.build_id()) {
    close(fd);
    return std::nullopt;
  }
  DebugFile file;
  file.fd = fd;
  file.path = path;
  file.found_by = "debuginfod";
  file.elf = std::move(*elf);
  return file;
}

std::unique_ptr<ElfSymbols> DebugFinder::minidebuginfo(const ElfSymbols& binary, const std::string& name,
                                                       std::vector<std::string>& warnings) {
  std::string_view xz = binary.minidebuginfo();
  if (xz.empty()) return nullptr;
  // The image is a small ELF (symbols only); cap it so a corrupt header
  // cannot make us allocate without bound.
  constexpr uint64_t kMaxImage = 256u << 20;
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, kMaxImage, 0) != LZMA_OK) return nullptr;
  std::string image;
  strm.next_in = reinterpret_cast<const uint8_t*>(xz.data());
  strm.avail_in = xz.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    size_t have = image.size();
    if (have >= kMaxImage) break;
    image.resize(have + (1 << 16));
    strm.next_out = reinterpret_cast<uint8_t*>(image.data() + have);
    strm.avail_out = 1 << 16;
    ret = lzma_code(&strm, LZMA_FINISH);
    image.resize(image.size() - strm.avail_out);
  }
  lzma_end(&strm);
  if (ret != LZMA_STREAM_END) {
    warnings.push_back(name + ": .gnu_debugdata (MiniDebugInfo) does not decompress (xz error " +
                       std::to_string(ret) + "); using its other symbols");
    return nullptr;
  }
  auto elf = ElfSymbols::read_memory(std::move(image), name + " (.gnu_debugdata)");
  if (!elf) {
    warnings.push_back(elf.error());
    return nullptr;
  }
  return std::move(*elf);
}

}  // namespace ember::symbolizer
