// Which service a process belongs to, for the fleet agent's series labels
// (`ember agent`): told by its cgroup v2 path (a systemd unit, a container,
// a Kubernetes pod), then by a JVM's command line, then by its executable.
// Everything is read from files (the agent may run in a container with
// the host's root mounted), never from a container runtime's API.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ember::fleet {

// What a cgroup v2 path tells about the process in it.
struct CgroupFacts {
  std::string systemd_unit;  // "nginx.service": a service unit (not a scope or slice)
  std::string container_id;  // the full id: Docker, containerd (CRI), CRI-O, podman
  std::string pod_uid;       // Kubernetes: the pod's uid, with its dashes
};

// Reads a path as /proc/PID/cgroup names it, for the layouts of systemd,
// Docker, podman, and kubelet's systemd and cgroupfs drivers:
//   /system.slice/nginx.service
//   /system.slice/docker-<id>.scope, /docker/<id>, /machine.slice/libpod-<id>.scope
//   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/
//     cri-containerd-<id>.scope (or crio-<id>.scope, docker-<id>.scope)
//   /kubepods/burstable/pod<uid>/<id>
CgroupFacts parse_cgroup_path(std::string_view path);

// A JVM's main class from its command line (NUL-separated, as
// /proc/PID/cmdline): "com.example.App", or a jar's name without ".jar"
// (-jar /srv/orders.jar: "orders"), or a module's main class (-m mod/cls);
// empty when `cmdline` is not a java command or names none.
std::string java_main_class(std::string_view cmdline);

// The service a Python command line (/proc/PID/cmdline) runs: its script's
// name (a package's __main__.py: the package's), the -m module, or the
// application module that gunicorn, uvicorn or hypercorn serves
// ("shop.wsgi:app" -> "shop.wsgi"). Empty for other commands and for -c.
std::string python_service(std::string_view cmdline);

// The script a node command line runs, as written there; empty for
// other commands and for -e, -p and the REPL.
std::string node_script(std::string_view cmdline);

// A Kubernetes container's names, from kubelet's log links
// (/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log).
struct PodNames {
  std::string namespace_name, pod, container;
};

// The labels of one process's series.
struct ServiceLabels {
  std::string service_name;
  std::string container_id;            // empty outside containers
  std::string namespace_name, pod, container;  // Kubernetes, when kubelet's logs name them
  std::string systemd_unit;
};

// Names the services of processes, caching what stays true for a
// process's life (its cgroup, command) and what many share (container
// names). `root`: where the host's file system is ("/", or "/host" when
// the agent runs in a container with it mounted there). `sources`: where
// a service's name comes from, the first that names the process winning:
// kubernetes (namespace/container), docker (the container's name), systemd
// (the unit), java (the main class or jar), python (the script, module or
// served application), node (the script's package, else the script), exe
// (the executable's name).
class ServiceNamer {
 public:
  explicit ServiceNamer(std::string root = "/", std::vector<std::string> sources = kAllSources);
  static inline const std::vector<std::string> kAllSources = {"kubernetes", "docker", "systemd", "java", "python",
                                                                   "node", "exe"};

  // The labels of process `pid`, named once per process. `comm`: the name
  // its records carried, the last resort (a process gone before it was
  // named, whose executable cannot be read).
  const ServiceLabels& labels(pid_t pid, std::string_view comm);
  // Forgets processes (they exited): their labels are not asked for again.
  void forget(pid_t pid) { by_pid_.erase(pid); }
  size_t size() const { return by_pid_.size(); }

 private:
  ServiceLabels name(pid_t pid, std::string_view comm);
  // Kubernetes names of a container; null if kubelet's logs do not name
  // it (read again on a miss: pods come and go).
  const PodNames* pod_names(const std::string& container_id);
  // A Docker container's name (its config.v2.json "Name"), or empty.
  const std::string& docker_name(const std::string& container_id);

  std::string root_;
  std::vector<std::string> sources_;
  std::map<pid_t, ServiceLabels> by_pid_;
  std::map<std::string, PodNames> pods_;             // by container id
  std::map<std::string, std::string> docker_names_;  // by container id
};

// The whole of file `path`; empty if it cannot be read (a /proc file of
// a process that has exited, for one).
std::string read_file(const std::string& path);

}  // namespace ember::fleet
