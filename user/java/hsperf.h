// HotSpot's performance counters, read from the file a JVM shares them in
// (hsperfdata: what jps and jstat read). No attach, no agent: the JVM keeps
// the file up to date itself, in shared memory.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "user/java/java_attach.h"

namespace ember::hsperf {

// The layout (hotspot/share/runtime/perfMemory.hpp, PerfData major version 2,
// JDK 1.4.2 to 25): a 32-byte prologue
//   u4 magic (bytes CA FE C0 C0 on every platform), u1 byte_order (0 big,
//   1 little endian), u1 major, u1 minor, u1 accessible, s4 used,
//   s4 overflow, s8 mod_time_stamp, s4 entry_offset, s4 num_entries
// then num_entries entries from entry_offset, each
//   s4 entry_length, s4 name_offset, s4 vector_length, u1 data_type,
//   u1 flags, u1 data_units, u1 data_variability, s4 data_offset
// with the NUL-terminated name and the data at those offsets from the
// entry's start. HotSpot writes scalars of type 'J' (jlong) and byte
// vectors of type 'B' (NUL-terminated strings).
constexpr size_t kPrologueSize = 32;
constexpr size_t kEntryHeaderSize = 20;

// perfData.hpp's PerfData::Units and ::Variability.
enum class Units : uint8_t { none = 1, bytes = 2, ticks = 3, events = 4, string = 5, hertz = 6 };
enum class Variability : uint8_t { constant = 1, monotonic = 2, variable = 3 };

struct Counter {
  std::variant<int64_t, std::string> value;
  uint8_t units = 0;        // a Units value, kept raw: newer JDKs may add some
  uint8_t variability = 0;  // a Variability value, kept raw
};

struct Snapshot {
  std::map<std::string, Counter, std::less<>> counters;
  bool accessible = false;     // the JVM has finished creating its counters
  int64_t mod_time_stamp = 0;  // ticks of the last added counter
  size_t skipped = 0;          // entries of types other than 'J' and 'B'

  // The value of a 'J' counter, or nothing if absent or a string.
  std::optional<int64_t> number(std::string_view name) const;
  // The value of a 'B' counter, or nothing if absent or a number.
  const std::string* text(std::string_view name) const;
};

// Parses a PerfData image. Every offset is checked against `data`: a
// truncated or garbage image is an error that names `file`, never a read
// out of bounds. The JVM writes the file while it is read; a counter torn
// by that is a stale or new value, not a parse error.
std::expected<Snapshot, std::string> parse(std::span<const std::byte> data, std::string_view file);

// Where a JVM's hsperfdata file is, as ember sees it: HotSpot names it
// /tmp/hsperfdata_<user>/<pid> after the pid in its own pid namespace
// (jvm.ns_pid), in its own /tmp, which ember reaches through jvm.root (a
// container's, a systemd PrivateTmp's, or the host's). Like jps, every
// hsperfdata_* directory is looked in: the user name is the JVM's, from its
// /etc/passwd. Among several candidates the file owned by jvm.uid is taken.
std::expected<std::string, std::string> find_file(const java::JvmProcess& jvm);

// An open hsperfdata file, read whole at each read(): with pread into a
// buffer, not mmap, so that a file truncated under ember is an error, not a
// SIGBUS. It stays readable after the JVM exits (the JVM unlinks it), so
// callers check the process too.
class File {
 public:
  static std::expected<File, std::string> open(const std::string& path);
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  std::expected<Snapshot, std::string> read();
  const std::string& path() const { return path_; }

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
};

}  // namespace ember::hsperf
