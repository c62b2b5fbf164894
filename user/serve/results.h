// The results directory of `ember serve`. One recording is a set of files
// named YYYYMMDD-HHMMSS-<id>-<event>-<target>.<ext>: the flamegraph (.html),
// folded stacks (.folded), pprof (.pb.gz), what `ember record` printed
// (.log), and a description (.json) that the listing reads. Files are
// reached only by names of that scheme, opened without following links, so
// nothing outside the directory can be served or removed through it.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember {

struct ResultInfo {
  std::string id;           // 8 hex digits, unique in the directory
  std::string base;         // the file name without its extension
  int64_t created_ms = 0;   // unix time the recording started
  std::string event;        // cpu, offcpu, wall, alloc, lock, malloc
  std::string target;       // "host" or "pid<N>", as in the file name
  std::string target_name;  // "whole host", or the process's name
  std::string status;       // "running", "ok", "failed"
  std::string error;        // with "failed": why, from ember record
  std::string unit;         // the profile's: samples, ns, bytes
  uint64_t total = 0;       // the profile's total weight
  uint64_t samples = 0;     // records ember record took
  double seconds = 0;       // how long it recorded
  std::map<std::string, uint64_t> files;  // extension ("html", "pb.gz"...) -> size in bytes
};

nlohmann::json to_json(const ResultInfo& info);
std::optional<ResultInfo> result_from_json(const nlohmann::json& j);

// A file name of the scheme (no directory, no "..", a known extension).
bool is_result_file_name(std::string_view name);
// "YYYYMMDD-HHMMSS-<id>-<event>-<target>" in local time.
std::string result_base_name(int64_t created_ms, std::string_view id, std::string_view event,
                             std::string_view target);

class ResultStore {
 public:
  // Creates the directory (mode 0700) when missing.
  static std::expected<ResultStore, std::string> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string path(std::string_view name) const { return dir_ + "/" + std::string(name); }

  // A fresh id with no files yet.
  std::string new_id() const;
  std::expected<void, std::string> save(const ResultInfo& info) const;
  // Every result, newest first; file sizes filled in from the directory.
  std::vector<ResultInfo> list() const;
  std::optional<ResultInfo> find(std::string_view id) const;
  // A read-only descriptor of a result file, or errno (ENOENT for any
  // name outside the scheme, ELOOP for a symbolic link).
  std::expected<int, int> open_file(std::string_view name) const;
  // Removes a result's files; how many went.
  size_t remove(std::string_view id) const;

 private:
  explicit ResultStore(std::string dir) : dir_(std::move(dir)) {}
  std::vector<std::string> names() const;  // the directory's result file names
  std::string dir_;
};

}  // namespace ember
