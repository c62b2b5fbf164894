#include "user/session/cgroup.h"

#include <linux/magic.h>
#include <linux/types.h>  // __u32 and friends for profile.h
#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern "C" {
#include "profile.h"
}

namespace ember {
namespace {

namespace fs = std::filesystem;

// The names of a path, "." and empty ones dropped and ".." applied;
// nothing if ".." climbs above its start.
std::optional<std::vector<std::string>> path_names(std::string_view path) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string_view name = path.substr(start, end - start);
    if (name == "..") {
      if (names.empty()) return std::nullopt;
      names.pop_back();
    } else if (!name.empty() && name != ".") {
      names.emplace_back(name);
    }
    start = end + 1;
  }
  return names;
}

std::string joined(const std::vector<std::string>& names, size_t from = 0) {
  std::string path;
  for (size_t i = from; i < names.size(); ++i) path += "/" + names[i];
  return path.empty() ? "/" : path;
}

// `root` (a cgroup's name) and a path below it, as one cgroup name.
std::string below(const std::string& root, const std::string& path) {
  if (root == "/") return path;
  return path == "/" ? root : root + path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string not_in_hierarchy(const std::string& path, const Cgroup2Mount& mount) {
  return "--cgroup '" + path + "' is not in the cgroup v2 hierarchy (mounted at " + mount.point +
         "): give a directory under it, or a path relative to it (system.slice/foo.service)";
}

}  // namespace

std::optional<Cgroup2Mount> find_cgroup2_mount(std::string_view mountinfo) {
  // "36 25 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw": the
  // root and the mount point are fields 4 and 5, the type follows " - ".
  std::istringstream lines{std::string(mountinfo)};
  std::string line;
  while (std::getline(lines, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3)), before(line.substr(0, dash));
    std::string type, id, parent, device, root, point;
    if (!(after >> type) || type != "cgroup2") continue;
    if (before >> id >> parent >> device >> root >> point) return Cgroup2Mount{point, root};
  }
  return std::nullopt;
}

std::optional<Cgroup2Mount> cgroup2_mount() { return find_cgroup2_mount(read_file("/proc/self/mountinfo")); }

std::expected<CgroupTarget, std::string> cgroup_target_of(const std::string& path, const Cgroup2Mount& mount) {
  if (path.empty())
    return std::unexpected(
        "--cgroup '': give a cgroup's directory (" + mount.point +
        "/system.slice/foo.service) or its path below the cgroup v2 mount (system.slice/foo.service)");
  auto names = path_names(path);
  auto point = path_names(mount.point);
  if (!names || !point) return std::unexpected(not_in_hierarchy(path, mount));
  size_t skip = 0;
  if (path.front() == '/') {
    // A directory: under the mount point, or not a cgroup v2 at all.
    if (names->size() < point->size() || !std::equal(point->begin(), point->end(), names->begin()))
      return std::unexpected(not_in_hierarchy(path, mount));
    skip = point->size();
  }
  std::string relative = joined(*names, skip);
  return CgroupTarget{relative == "/" ? mount.point : (mount.point == "/" ? "" : mount.point) + relative,
                      below(mount.root, relative)};
}

std::expected<std::vector<CgroupTarget>, std::string> resolve_cgroups(const std::vector<std::string>& paths) {
  if (paths.empty()) return std::vector<CgroupTarget>{};
  if (paths.size() > EMBER_MAX_CGROUPS)
    return std::unexpected("at most " + std::to_string(EMBER_MAX_CGROUPS) +
                           " cgroups (--cgroup): give their common parent instead");
  auto mount = cgroup2_mount();
  if (!mount)
    return std::unexpected(
        "--cgroup needs cgroup v2, and no cgroup2 file system is mounted: mount it (mount -t cgroup2 none "
        "/sys/fs/cgroup), or select processes with -p or --comm");
  std::vector<CgroupTarget> targets;
  for (const std::string& path : paths) {
    auto target = cgroup_target_of(path, *mount);
    if (!target) return std::unexpected(target.error());
    struct stat st{};
    struct statfs fsinfo{};
    if (stat(target->dir.c_str(), &st) != 0)
      return std::unexpected("no cgroup '" + path + "' (--cgroup): " + target->dir + ": " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode) || statfs(target->dir.c_str(), &fsinfo) != 0 || fsinfo.f_type != CGROUP2_SUPER_MAGIC)
      return std::unexpected("--cgroup '" + path + "': " + target->dir + " is not a cgroup v2 directory");
    targets.push_back(*target);
  }
  return targets;
}

std::optional<std::string> cgroup2_of(std::string_view proc_cgroup) {
  std::istringstream lines{std::string(proc_cgroup)};
  std::string line;
  while (std::getline(lines, line))
    if (line.starts_with("0::/")) return line.substr(3);
  return std::nullopt;
}

bool cgroup_within(std::string_view name, std::string_view ancestor) {
  if (ancestor == "/") return name.starts_with('/');
  return name.starts_with(ancestor) && (name.size() == ancestor.size() || name[ancestor.size()] == '/');
}

bool process_in_cgroups(pid_t pid, const std::vector<CgroupTarget>& targets) {
  auto name = cgroup2_of(read_file("/proc/" + std::to_string(pid) + "/cgroup"));
  return name && std::any_of(targets.begin(), targets.end(),
                             [&](const CgroupTarget& t) { return cgroup_within(*name, t.name); });
}

std::vector<pid_t> processes_in_cgroups(const std::vector<CgroupTarget>& targets) {
  std::vector<pid_t> pids;
  auto add_procs = [&](const fs::path& dir) {
    std::ifstream in(dir / "cgroup.procs");
    for (pid_t pid; in >> pid;) pids.push_back(pid);
  };
  for (const CgroupTarget& t : targets) {
    add_procs(t.dir);
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(t.dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec) && !it->is_symlink(ec)) add_procs(it->path());
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

std::optional<std::string> cgroup_path_of_id(uint64_t id, const std::string& root) {
  struct stat st{};
  if (stat(root.c_str(), &st) == 0 && st.st_ino == id) return "/";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    if (lstat(it->path().c_str(), &st) == 0 && st.st_ino == id)
      return "/" + it->path().lexically_relative(root).string();
  }
  return std::nullopt;
}

std::vector<std::string> CgroupTally::summary(const Cgroup2Mount& mount, size_t lines) const {
  std::vector<std::pair<uint64_t, uint64_t>> by_count(records_.begin(), records_.end());
  std::stable_sort(by_count.begin(), by_count.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::vector<std::string> out;
  for (size_t i = 0; i < by_count.size() && i < lines; ++i) {
    auto [id, records] = by_count[i];
    auto path = cgroup_path_of_id(id, mount.point);
    out.push_back(std::to_string(records) + " records in " +
                  (path ? below(mount.root, *path) : "cgroup " + std::to_string(id) + " (removed since)"));
  }
  if (by_count.size() > lines) out.push_back("and " + std::to_string(by_count.size() - lines) + " cgroups more");
  return out;
}

}  // namespace ember
