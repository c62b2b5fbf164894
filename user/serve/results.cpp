#include "user/serve/results.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <regex>

#include "flamegraph/output.h"

namespace ember {
namespace {

const std::regex& name_scheme() {
  static const std::regex re(R"(^(\d{8}-\d{6}-([0-9a-f]{8})-[a-z]+-[a-z0-9]+)\.(html|folded|pb\.gz|log|json)$)");
  return re;
}

}  // namespace

nlohmann::json to_json(const ResultInfo& r) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [ext, size] : r.files) files[ext] = {{"name", r.base + "." + ext}, {"size", size}};
  return {{"id", r.id},         {"name", r.base},       {"created", r.created_ms},   {"event", r.event},
          {"target", r.target}, {"target_name", r.target_name}, {"status", r.status}, {"error", r.error},
          {"unit", r.unit},     {"total", r.total},     {"samples", r.samples},      {"seconds", r.seconds},
          {"files", files}};
}

std::optional<ResultInfo> result_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  ResultInfo r;
  try {
    r.id = j.at("id").get<std::string>();
    r.base = j.at("name").get<std::string>();
    r.created_ms = j.at("created").get<int64_t>();
    r.event = j.at("event").get<std::string>();
    r.target = j.at("target").get<std::string>();
    r.target_name = j.value("target_name", "");
    r.status = j.value("status", "ok");
    r.error = j.value("error", "");
    r.unit = j.value("unit", "samples");
    r.total = j.value("total", uint64_t{0});
    r.samples = j.value("samples", uint64_t{0});
    r.seconds = j.value("seconds", 0.0);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (!is_result_file_name(r.base + ".json")) return std::nullopt;
  return r;
}

bool is_result_file_name(std::string_view name) {
  return name.size() < 200 && std::regex_match(name.begin(), name.end(), name_scheme());
}

std::string result_base_name(int64_t created_ms, std::string_view id, std::string_view event,
                             std::string_view target) {
  time_t t = static_cast<time_t>(created_ms / 1000);
  struct tm tm {};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return std::string(stamp) + "-" + std::string(id) + "-" + std::string(event) + "-" + std::string(target);
}

std::expected<ResultStore, std::string> ResultStore::open(const std::string& dir) {
  std::error_code ec;
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  // Parents as usual; the directory itself private: results name every
  // function of every process on the host.
  if (std::filesystem::path parent = std::filesystem::path(path).parent_path(); !parent.empty())
    std::filesystem::create_directories(parent, ec);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return std::unexpected("cannot create " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::unexpected(path + " is not a directory");
  if (::access(path.c_str(), R_OK | W_OK | X_OK) != 0)
    return std::unexpected("cannot write in " + path + ": " + std::strerror(errno));
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return std::unexpected("cannot resolve " + path + ": " + std::strerror(errno));
  std::string resolved = real;
  free(real);
  return ResultStore(resolved);
}

std::string ResultStore::new_id() const {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::vector<std::string> taken = names();
  for (;;) {
    char id[9];
    std::snprintf(id, sizeof id, "%08x", static_cast<unsigned>(rng()));
    std::string marker = std::string("-") + id + "-";
    if (std::none_of(taken.begin(), taken.end(), [&](const std::string& n) { return n.find(marker) == 15; }))
      return id;
  }
}

std::expected<void, std::string> ResultStore::save(const ResultInfo& info) const {
  std::string final_path = path(info.base + ".json");
  nlohmann::json j = to_json(info);
  j.erase("files");  // sizes are read from the directory
  return flamegraph::write_atomically(final_path, j.dump(2) + "\n", flamegraph::FileFor::Ember);
}

std::vector<std::string> ResultStore::names() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (is_result_file_name(e->d_name)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

std::vector<ResultInfo> ResultStore::list() const {
  std::vector<std::string> all = names();
  std::map<std::string, ResultInfo> by_base;
  for (const std::string& name : all) {
    if (!name.ends_with(".json")) continue;
    auto fd = open_file(name);
    if (!fd) continue;
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(*fd, buf, sizeof buf)) > 0 && text.size() < 65536;) text.append(buf, n);
    ::close(*fd);
    auto j = nlohmann::json::parse(text, nullptr, false);
    auto info = result_from_json(j);
    // The description must be its own file's: a copy under another name
    // would let one result claim another's files.
    if (!info || info->base + ".json" != name) continue;
    by_base[info->base] = std::move(*info);
  }
  for (const std::string& name : all) {
    std::smatch m;
    std::regex_match(name, m, name_scheme());
    auto it = by_base.find(m[1].str());
    std::string ext = m[3].str();
    if (it == by_base.end() || ext == "json") continue;
    struct stat st {};
    if (::fstatat(AT_FDCWD, path(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      it->second.files[ext] = static_cast<uint64_t>(st.st_size);
  }
  std::vector<ResultInfo> out;
  for (auto& [base, info] : by_base) out.push_back(std::move(info));
  std::sort(out.begin(), out.end(), [](const ResultInfo& a, const ResultInfo& b) {
    return a.created_ms != b.created_ms ? a.created_ms > b.created_ms : a.id > b.id;
  });
  return out;
}

std::optional<ResultInfo> ResultStore::find(std::string_view id) const {
  for (ResultInfo& r : list())
    if (r.id == id) return std::move(r);
  return std::nullopt;
}

std::expected<int, int> ResultStore::open_file(std::string_view name) const {
  if (!is_result_file_name(name)) return std::unexpected(ENOENT);
  int fd = ::open(path(name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::unexpected(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // no FIFOs or devices either
    ::close(fd);
    return std::unexpected(ENOENT);
  }
  return fd;
}

size_t ResultStore::remove(std::string_view id) const {
  if (id.size() != 8) return 0;
  std::string marker = "-" + std::string(id) + "-";
  size_t removed = 0;
  for (const std::string& name : names())
    if (name.find(marker) == 15 && ::unlink(path(name).c_str()) == 0) ++removed;
  return removed;
}

}  // namespace ember
