// Targets by cgroup (v2), for `record --cgroup PATH`: naming a cgroup,
// telling whether a process lies in one, and naming a sample's cgroup id.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on hosts that keep v1 controllers beside it).
struct Cgroup2Mount {
  std::string point;        // the mount point
  std::string root = "/";   // the cgroup mounted there, as /proc/PID/cgroup names cgroups
};

// The first cgroup2 mount in /proc/self/mountinfo text; nothing if none.
std::optional<Cgroup2Mount> find_cgroup2_mount(std::string_view mountinfo);
// This host's, from /proc/self/mountinfo.
std::optional<Cgroup2Mount> cgroup2_mount();

// A cgroup `record --cgroup` targets.
struct CgroupTarget {
  std::string dir;   // its directory: /sys/fs/cgroup/system.slice/foo.service
  std::string name;  // as /proc/PID/cgroup names it: /system.slice/foo.service
};

// --cgroup PATH: a directory under the mount, or a path relative to it
// (system.slice/foo.service), without looking at the file system; an
// error that says which when it is neither.
std::expected<CgroupTarget, std::string> cgroup_target_of(const std::string& path, const Cgroup2Mount& mount);

// Every --cgroup PATH, checked: cgroup v2 mounted, each PATH an existing
// directory of it, no more than the programs take.
std::expected<std::vector<CgroupTarget>, std::string> resolve_cgroups(const std::vector<std::string>& paths);

// The cgroup v2 of a process from its /proc/PID/cgroup text (the "0::"
// line); nothing if it has none.
std::optional<std::string> cgroup2_of(std::string_view proc_cgroup);

// Whether cgroup `name` is `ancestor` or lies below it.
bool cgroup_within(std::string_view name, std::string_view ancestor);

// Whether process `pid` lies in one of `targets` (or below); false if it is gone.
bool process_in_cgroups(pid_t pid, const std::vector<CgroupTarget>& targets);

// The processes in `targets` and their descendants now.
std::vector<pid_t> processes_in_cgroups(const std::vector<CgroupTarget>& targets);

// The cgroup whose id is `id`, as a path below the directory `root` ("/"
// for root itself, "/a/b" for root/a/b); nothing if no directory there has
// it. A cgroup's id is its kernfs node id, which 64-bit kernels give as
// the directory's inode number.
std::optional<std::string> cgroup_path_of_id(uint64_t id, const std::string& root);

// Records per cgroup id, for the summary of a recording by cgroup.
class CgroupTally {
 public:
  void add(uint64_t cgroup_id) { ++records_[cgroup_id]; }
  // One line per cgroup, most records first: "N records in /a/b" (a cgroup
  // gone since: its id); at most `lines`, then how many more.
  std::vector<std::string> summary(const Cgroup2Mount& mount, size_t lines) const;

 private:
  std::map<uint64_t, uint64_t> records_;
};

}  // namespace ember
