// The fleet agent's spool: every period's profiles, as the push request
// that carries them, in one file per period in a directory, kept whether
// sent or not until a size or an age cap removes the oldest. A backend
// outage loses nothing within the cap: the sender takes the oldest unsent
// file first, so periods arrive in order with their own timestamps, and a
// restarted agent resumes from the directory.
//
// Files: START_NS.DURATION_MS.PROFILES.STATE, START_NS zero-padded so the
// names sort by time; STATE is pending (not sent yet), sent, or rejected
// (the server refused it with a 4xx: kept, never retried). Files being
// written end in .tmp and are removed at open.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::fleet {

class Spool {
 public:
  enum class State { Pending, Sent, Rejected };
  struct Entry {
    uint64_t start_ns = 0;     // the period's start (Unix time)
    uint64_t duration_ms = 0;  // its length
    uint32_t profiles = 0;     // series in the request
    State state = State::Pending;
    uint64_t bytes = 0;
    std::string name;  // the file's
  };
  struct Counts {
    uint64_t bytes = 0;              // in the directory now
    uint64_t pending_profiles = 0;   // not sent yet
    uint64_t pending_files = 0;
    uint64_t dropped_profiles = 0;   // removed by a cap before they were sent (lost)
    uint64_t expired_profiles = 0;   // removed by a cap after they were sent or rejected
    uint64_t write_failures = 0;     // periods that could not be written
    uint64_t full_disk_removals = 0;  // periods removed to make room on a full disk
  };

  // Opens (creates) `dir` and reads what an earlier run left.
  static std::expected<std::unique_ptr<Spool>, std::string> open(const std::string& dir, uint64_t max_bytes,
                                                                  double max_age_s);
  // Keeps a period's request, then applies the caps. On a full disk the
  // oldest periods make room (sent ones first). Fails (and counts) when the
  // file cannot be written. `state`: Sent when there is no server to send to.
  std::expected<void, std::string> add(uint64_t start_ns, uint64_t duration_ms, uint32_t profiles,
                                       std::string_view body, State state = State::Pending);
  // The oldest unsent period, if any.
  std::optional<Entry> oldest_pending();
  // A period's request, from the spool in `dir` (this one's, or another's
  // read back while its agent runs: a period sent since it was listed is
  // followed to its new name). Null when a cap removed it meanwhile.
  static std::expected<std::optional<std::string>, std::string> read(const std::string& dir, const Entry& e);
  // A pending period sent, or refused for good: its caller counts it as
  // pushed or refused, so one a cap removed meanwhile is no longer counted
  // as dropped.
  void mark(const Entry& e, State state);
  // Caps may change at a reload; applied at once.
  void set_caps(uint64_t max_bytes, double max_age_s);
  Counts counts();
  const std::string& dir() const { return dir_; }

  // The periods in `dir`, oldest first.
  static std::expected<std::vector<Entry>, std::string> list(const std::string& dir);
  static std::string file_name(const Entry& e);
  static std::optional<Entry> parse_name(std::string_view name);

 private:
  Spool(std::string dir, uint64_t max_bytes, double max_age_s) : dir_(std::move(dir)), max_bytes_(max_bytes), max_age_s_(max_age_s) {}
  void apply_caps();  // under mutex_
  void remove(std::map<uint64_t, Entry>::iterator it);
  bool lacks_room(uint64_t bytes) const;  // the disk's free space is less than `bytes`
  std::map<uint64_t, Entry>::iterator oldest_to_free();  // under mutex_, entries_ not empty

  std::string dir_;
  std::mutex mutex_;
  uint64_t max_bytes_;
  double max_age_s_;
  std::map<uint64_t, Entry> entries_;  // by start: oldest first
  Counts counts_;
};

}  // namespace ember::fleet
