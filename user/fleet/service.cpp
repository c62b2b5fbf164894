#include "user/fleet/service.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <sstream>

#include <nlohmann/json.hpp>

#include "user/session/cgroup.h"

namespace ember::fleet {
namespace {

// Docker names cached at most (one per container seen since the last clear).
constexpr size_t kMaxContainers = 4096;

bool is_hex_id(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "docker-<id>.scope" -> id, for the runtimes' scope prefixes.
std::string scope_container_id(std::string_view part) {
  if (!part.ends_with(".scope")) return {};
  part.remove_suffix(6);
  for (std::string_view prefix : {"docker-", "cri-containerd-", "crio-", "libpod-"})
    if (part.starts_with(prefix) && is_hex_id(part.substr(prefix.size()))) return std::string(part.substr(prefix.size()));
  return {};
}

// "kubepods-burstable-pod1a2b_3c4d.slice" or "pod1a2b-3c4d" -> "1a2b-3c4d".
std::string pod_uid_of(std::string_view part) {
  if (part.ends_with(".slice")) part.remove_suffix(6);
  size_t at = part.rfind("pod");
  if (at == std::string_view::npos || (at != 0 && part[at - 1] != '-')) return {};
  std::string uid(part.substr(at + 3));
  if (uid.size() < 32) return {};
  std::replace(uid.begin(), uid.end(), '_', '-');
  return uid;
}


std::string basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string_view directory_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash);
}

// A /proc/PID/cmdline's words.
std::vector<std::string_view> split_args(std::string_view cmdline) {
  std::vector<std::string_view> args;
  for (size_t from = 0; from < cmdline.size();) {
    size_t end = cmdline.find('\0', from);
    if (end == std::string_view::npos) end = cmdline.size();
    args.push_back(cmdline.substr(from, end - from));
    from = end + 1;
  }
  return args;
}

// "python", "python3", "python3.11".
bool is_python(std::string_view exe) {
  if (!exe.starts_with("python")) return false;
  exe.remove_prefix(6);
  return std::all_of(exe.begin(), exe.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

bool is_node(std::string_view exe) { return exe == "node" || exe == "nodejs"; }

// "server.js" -> "server".
std::string script_name(std::string_view script) {
  std::string name = basename_of(script);
  for (std::string_view ext : {".js", ".mjs", ".cjs"})
    if (name.ends_with(ext) && name.size() > ext.size()) return name.substr(0, name.size() - ext.size());
  return name;
}

// "shop.wsgi": dotted Python identifiers.
bool is_module_name(std::string_view s) {
  for (size_t from = 0;;) {
    size_t dot = s.find('.', from);
    std::string_view part = s.substr(from, dot == std::string_view::npos ? dot : dot - from);
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    if (part.empty() || std::isdigit(static_cast<unsigned char>(part[0])) || !std::all_of(part.begin(), part.end(), word))
      return false;
    if (dot == std::string_view::npos) return true;
    from = dot + 1;
  }
}

// The module of an application named as `module:attribute` (gunicorn's
// APP_MODULE, uvicorn's and hypercorn's APP): "shop.wsgi:application" ->
// "shop.wsgi". The address of -b/--bind (localhost:8000) is no application.
std::string app_module(std::span<const std::string_view> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-b" || a == "--bind") {
      ++i;
      continue;
    }
    size_t colon = a.find(':');
    if (colon != std::string_view::npos && is_module_name(a.substr(0, colon))) return std::string(a.substr(0, colon));
  }
  return {};
}

// Python's servers of WSGI and ASGI applications: the service is the application.
bool is_app_server(std::string_view name) { return name == "gunicorn" || name == "uvicorn" || name == "hypercorn"; }

// The service of node process `proc` (/proc/PID) running `cmdline`: the
// name in the package.json nearest its script (through the process's root
// and cwd), else the script's name.
std::string node_service(const std::string& proc, const std::string& cmdline) {
  std::string script = node_script(cmdline);
  if (script.empty()) return {};
  if (!script.starts_with("/")) {
    char cwd[4096];
    ssize_t n = readlink((proc + "/cwd").c_str(), cwd, sizeof cwd);
    if (n <= 0 || n == sizeof cwd) return script_name(script);
    script = std::string(cwd, static_cast<size_t>(n)) + "/" + script;
  }
  // The package the script belongs to: the nearest package.json at or
  // above it, seen from the process's root.
  const std::string root = proc + "/root";
  std::string path = root + script;
  for (std::string_view dir = directory_of(path); dir.size() >= root.size(); dir = directory_of(dir)) {
    std::string text = read_file(std::string(dir) + "/package.json");
    if (text.empty()) continue;
    nlohmann::json package = nlohmann::json::parse(text, nullptr, false);
    if (package.is_object() && package.contains("name") && package["name"].is_string() &&
        !package["name"].get<std::string>().empty())
      return package["name"].get<std::string>();
    break;  // the script's own package has no name: an outer one is not its
  }
  return script_name(script);
}

}  // namespace

// Copied through rdbuf, which turns a read error into an empty result: an
// istreambuf_iterator lets libstdc++'s exception for it escape (read() of
// /proc/PID/cmdline fails with ESRCH once the process has exited), and an
// agent died of it (std::terminate) naming a process that had just ended.
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

CgroupFacts parse_cgroup_path(std::string_view path) {
  CgroupFacts facts;
  bool kube = false;
  for (size_t from = 0; from < path.size();) {
    size_t end = path.find('/', from);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(from, end - from);
    from = end + 1;
    if (part.empty()) continue;
    if (part.starts_with("kubepods")) kube = true;
    if (kube && facts.pod_uid.empty())
      if (std::string uid = pod_uid_of(part); !uid.empty()) {
        facts.pod_uid = uid;
        continue;
      }
    if (std::string id = scope_container_id(part); !id.empty()) {
      facts.container_id = id;
    } else if (is_hex_id(part)) {
      facts.container_id = std::string(part);  // /docker/<id>, /kubepods/.../<id>
    } else if (part.ends_with(".service") && facts.container_id.empty()) {
      facts.systemd_unit = std::string(part);
    }
  }
  // A container's own units (systemd inside it) are not the host's service.
  if (!facts.container_id.empty()) facts.systemd_unit.clear();
  return facts;
}

std::string java_main_class(std::string_view cmdline) {
  std::vector<std::string_view> args = split_args(cmdline);
  if (args.empty() || basename_of(args[0]) != "java") return {};
  // The launcher's options that take the next argument as their value.
  static constexpr std::string_view kWithValue[] = {"-cp", "-classpath", "--class-path", "-p", "--module-path",
                                                    "--upgrade-module-path", "--add-modules", "--enable-native-access",
                                                    "--add-opens", "--add-exports", "--add-reads", "--patch-module",
                                                    "--limit-modules"};
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-jar" && i + 1 < args.size()) {
      std::string jar = basename_of(args[i + 1]);
      return jar.ends_with(".jar") ? jar.substr(0, jar.size() - 4) : jar;
    }
    if ((a == "-m" || a == "--module") && i + 1 < args.size()) {
      std::string_view module = args[i + 1];
      size_t slash = module.find('/');
      return std::string(slash == std::string_view::npos ? module : module.substr(slash + 1));
    }
    if (std::find(std::begin(kWithValue), std::end(kWithValue), a) != std::end(kWithValue)) {
      ++i;
      continue;
    }
    if (a.starts_with("-")) continue;
    return std::string(a);
  }
  return {};
}

std::string python_service(std::string_view cmdline) {
  std::vector<std::string_view> args = split_args(cmdline);
  if (args.empty() || !is_python(basename_of(args[0]))) return {};
  std::span<const std::string_view> all(args);
  // An application server's application, else the server.
  auto served = [&](std::string name, size_t next) {
    std::string app = is_app_server(name) ? app_module(all.subspan(next)) : "";
    return app.empty() ? name : app;
  };
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-c") return {};  // a command, not a program: nothing to name it by
    if (a == "-m" && i + 1 < args.size()) return served(std::string(args[i + 1]), i + 2);
    // The interpreter's options that take the next word as their value.
    if (a == "-W" || a == "-X" || a == "--check-hash-based-pycs") {
      ++i;
      continue;
    }
    if (a.starts_with("-")) continue;
    std::string script = basename_of(a);
    if (script.ends_with(".py")) script.resize(script.size() - 3);
    // A package or a zip run as a program: its directory's name.
    if (script == "__main__") script = basename_of(directory_of(a));
    return served(script, i + 1);
  }
  return {};
}

std::string node_script(std::string_view cmdline) {
  std::vector<std::string_view> args = split_args(cmdline);
  if (args.empty() || !is_node(basename_of(args[0]))) return {};
  static constexpr std::string_view kWithValue[] = {"-r", "--require", "--import", "--loader",
                                                    "--experimental-loader", "--conditions", "-C",
                                                    "--title", "--env-file", "--input-type"};
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-e" || a == "--eval" || a == "-p" || a == "--print" || a == "-") return {};
    if (a == "--") return i + 1 < args.size() ? std::string(args[i + 1]) : std::string();
    if (std::find(std::begin(kWithValue), std::end(kWithValue), a) != std::end(kWithValue)) {
      ++i;
      continue;
    }
    if (a.starts_with("-")) continue;
    return std::string(a);
  }
  return {};
}

ServiceNamer::ServiceNamer(std::string root, std::vector<std::string> sources)
    : root_(root == "/" ? "" : std::move(root)), sources_(std::move(sources)) {}

const ServiceLabels& ServiceNamer::labels(pid_t pid, std::string_view comm) {
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) it = by_pid_.emplace(pid, name(pid, comm)).first;
  return it->second;
}

ServiceLabels ServiceNamer::name(pid_t pid, std::string_view comm) {
  std::string proc = root_ + "/proc/" + std::to_string(pid);
  ServiceLabels l;
  CgroupFacts facts;
  if (auto cgroup = cgroup2_of(read_file(proc + "/cgroup"))) facts = parse_cgroup_path(*cgroup);
  l.container_id = facts.container_id;
  l.systemd_unit = facts.systemd_unit;
  // Its command line, read once if a source asks.
  std::optional<std::string> cmdline_read;
  auto cmdline = [&]() -> const std::string& {
    if (!cmdline_read) cmdline_read = read_file(proc + "/cmdline");
    return *cmdline_read;
  };
  for (const std::string& source : sources_) {
    if (source == "kubernetes" && !facts.pod_uid.empty() && !facts.container_id.empty()) {
      if (const PodNames* pod = pod_names(facts.container_id)) {
        l.namespace_name = pod->namespace_name;
        l.pod = pod->pod;
        l.container = pod->container;
        // Grafana's convention for Kubernetes: namespace/container.
        l.service_name = pod->namespace_name + "/" + pod->container;
      }
    } else if (source == "docker" && !facts.container_id.empty()) {
      l.service_name = docker_name(facts.container_id);
    } else if (source == "systemd" && !facts.systemd_unit.empty()) {
      l.service_name = facts.systemd_unit.substr(0, facts.systemd_unit.size() - std::string_view(".service").size());
    } else if (source == "java") {
      l.service_name = java_main_class(cmdline());
    } else if (source == "python") {
      l.service_name = python_service(cmdline());
    } else if (source == "node") {
      l.service_name = node_service(proc, cmdline());
    } else if (source == "exe") {
      char exe[4096];
      ssize_t n = readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
      if (n > 0) {
        std::string_view path(exe, static_cast<size_t>(n));
        if (path.ends_with(" (deleted)")) path.remove_suffix(10);
        l.service_name = basename_of(path);
        // Run from memory (memfd_create + fexecve): its own argv[0] names it.
        if (path.starts_with("/memfd:")) l.service_name = basename_of(cmdline().substr(0, cmdline().find('\0')));
      }
      // A kernel thread has no executable and no command line: one
      // service, not one per kworker's name.
      if (n <= 0 && access((proc + "/stat").c_str(), F_OK) == 0 && cmdline().empty())
        l.service_name = "kernel";
      if (l.service_name.empty()) l.service_name = comm.empty() ? "pid-" + std::to_string(pid) : std::string(comm);
      // Inside a container the executable is the container's, not a
      // service: its short id says which one.
      if (!facts.container_id.empty())
        l.service_name = "container-" + facts.container_id.substr(0, 12) + "/" + l.service_name;
    }
    if (!l.service_name.empty()) return l;
  }
  // The sources named nothing (exe left out of them): the name the records carried.
  l.service_name = comm.empty() ? "pid-" + std::to_string(pid) : std::string(comm);
  return l;
}

const PodNames* ServiceNamer::pod_names(const std::string& container_id) {
  if (auto it = pods_.find(container_id); it != pods_.end()) return &it->second;
  // kubelet links each container's log as POD_NAMESPACE_CONTAINER-ID.log;
  // the three names cannot hold '_' (DNS labels and subdomains).
  // Read whole each time, so that containers gone are forgotten.
  DIR* dir = opendir((root_ + "/var/log/containers").c_str());
  if (!dir) return nullptr;
  pods_.clear();
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;
    if (!name.ends_with(".log") || name.size() < 4 + 65) continue;
    name.remove_suffix(4);
    std::string_view id = name.substr(name.size() - 64);
    if (!is_hex_id(id) || name[name.size() - 65] != '-') continue;
    std::string_view names = name.substr(0, name.size() - 65);
    size_t a = names.find('_'), b = a == std::string_view::npos ? a : names.find('_', a + 1);
    if (b == std::string_view::npos) continue;
    pods_[std::string(id)] = {std::string(names.substr(a + 1, b - a - 1)), std::string(names.substr(0, a)),
                              std::string(names.substr(b + 1))};
  }
  closedir(dir);
  auto it = pods_.find(container_id);
  return it == pods_.end() ? nullptr : &it->second;
}

const std::string& ServiceNamer::docker_name(const std::string& container_id) {
  if (docker_names_.size() >= kMaxContainers) docker_names_.clear();  // most are gone by then
  auto [it, added] = docker_names_.try_emplace(container_id);
  if (!added) return it->second;
  // config.v2.json holds "Name":"/web" (the leading slash is Docker's).
  std::string config = read_file(root_ + "/var/lib/docker/containers/" + container_id + "/config.v2.json");
  constexpr std::string_view kKey = "\"Name\":\"/";
  if (size_t at = config.find(kKey); at != std::string::npos) {
    size_t from = at + kKey.size(), end = config.find('"', from);
    if (end != std::string::npos) it->second = config.substr(from, end - from);
  }
  return it->second;
}

}  // namespace ember::fleet
