#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "temp_dir.h"
#include "user/fleet/service.h"

using namespace ember::fleet;
namespace fs = std::filesystem;

namespace {

const std::string kId = "4f1c3a2b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";
const std::string kUid = "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d";

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A process under a fake root: its cgroup, its command line (NUL-separated
// words) and its executable (a symlink, as /proc/PID/exe).
void fake_process(const fs::path& root, int pid, const std::string& cgroup, const std::string& cmdline,
                  const std::string& exe) {
  fs::path proc = root / "proc" / std::to_string(pid);
  write(proc / "cgroup", "0::" + cgroup + "\n");
  write(proc / "cmdline", cmdline);
  fs::create_symlink(exe, proc / "exe");
}

// A /proc/PID/cmdline of these words.
std::string cmd(std::initializer_list<std::string_view> words) {
  std::string out;
  for (std::string_view w : words) out.append(w).push_back('\0');
  return out;
}

}  // namespace

TEST_CASE("service: cgroup paths of systemd, Docker, podman and kubelet") {
  CgroupFacts unit = parse_cgroup_path("/system.slice/nginx.service");
  CHECK(unit.systemd_unit == "nginx.service");
  CHECK(unit.container_id.empty());

  CHECK(parse_cgroup_path("/system.slice/docker-" + kId + ".scope").container_id == kId);
  CHECK(parse_cgroup_path("/docker/" + kId).container_id == kId);
  CHECK(parse_cgroup_path("/machine.slice/libpod-" + kId + ".scope").container_id == kId);
  // systemd inside a container: its units are not the host's services.
  CgroupFacts inside = parse_cgroup_path("/system.slice/docker-" + kId + ".scope/system.slice/cron.service");
  CHECK(inside.container_id == kId);
  CHECK(inside.systemd_unit.empty());

  std::string underscored = kUid;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  CgroupFacts systemd_driver = parse_cgroup_path("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                                                 underscored + ".slice/cri-containerd-" + kId + ".scope");
  CHECK(systemd_driver.pod_uid == kUid);
  CHECK(systemd_driver.container_id == kId);
  CgroupFacts cgroupfs_driver = parse_cgroup_path("/kubepods/besteffort/pod" + kUid + "/" + kId);
  CHECK(cgroupfs_driver.pod_uid == kUid);
  CHECK(cgroupfs_driver.container_id == kId);
  CHECK(parse_cgroup_path("/kubepods.slice/kubepods-pod" + underscored + ".slice/crio-" + kId + ".scope")
            .container_id == kId);

  CgroupFacts session = parse_cgroup_path("/user.slice/user-1000.slice/session-3.scope");
  CHECK(session.systemd_unit.empty());
  CHECK(session.container_id.empty());
  CHECK(parse_cgroup_path("/").container_id.empty());
}

TEST_CASE("service: a JVM's main class, jar or module from its command line") {
  using namespace std::string_literals;
  CHECK(java_main_class("/usr/bin/java\0-Xmx1g\0-cp\0/srv/a.jar:/srv/b.jar\0com.example.App\0--port\0080"s) ==
        "com.example.App");
  CHECK(java_main_class("java\0-XX:+UseG1GC\0-jar\0/srv/orders-2.1.jar\0serve"s) == "orders-2.1");
  CHECK(java_main_class("java\0--module-path\0/mods\0-m\0com.shop/com.shop.Main"s) == "com.shop.Main");
  CHECK(java_main_class("java\0-Dx=1\0-agentpath:/a.so=out=/tmp/x\0Main"s) == "Main");
  CHECK(java_main_class("java\0-version"s).empty());
  CHECK(java_main_class("/usr/bin/python3\0app.py"s).empty());
  CHECK(java_main_class("").empty());
}

TEST_CASE("service: names by Kubernetes, Docker, systemd, JVM, then executable") {
  using namespace std::string_literals;
  TempDir root;
  std::string underscored = kUid;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  std::string other = std::string(63, 'b') + "c";

  // 1: a Kubernetes container, named by kubelet's log link.
  fake_process(root.path, 1, "/kubepods.slice/kubepods-pod" + underscored + ".slice/cri-containerd-" + kId + ".scope",
               "/app/server"s, "/app/server");
  write(root.path / "var/log/containers" / ("checkout-7d9f_shop_api-" + kId + ".log"), "");
  // 2: a Docker container with a name; 3: one without a config (another runtime).
  fake_process(root.path, 2, "/system.slice/docker-" + other + ".scope", "redis-server\0*:6379"s,
               "/usr/local/bin/redis-server");
  write(root.path / "var/lib/docker/containers" / other / "config.v2.json",
        R"({"MountPoints":{"/data":{"Name":"vol1"}},"Name":"/cache","Driver":"overlay2"})");
  std::string third = std::string(63, 'd') + "e";
  fake_process(root.path, 3, "/machine.slice/libpod-" + third + ".scope", "sleep\0inf"s, "/usr/bin/sleep");
  // 4: a systemd service; 5: a JVM in a login session; 6: a plain binary, deleted.
  fake_process(root.path, 4, "/system.slice/nginx.service", "nginx: worker process"s, "/usr/sbin/nginx");
  fake_process(root.path, 5, "/user.slice/user-1000.slice/session-2.scope",
               "/usr/lib/jvm/java-17-openjdk-amd64/bin/java\0-cp\0app.jar\0com.example.Billing"s,
               "/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
  fake_process(root.path, 6, "/user.slice/user-1000.slice/session-2.scope", "./tool"s, "/home/u/tool (deleted)");

  ServiceNamer namer(root.path.string());
  const ServiceLabels& pod = namer.labels(1, "server");
  CHECK(pod.service_name == "shop/api");
  CHECK(pod.namespace_name == "shop");
  CHECK(pod.pod == "checkout-7d9f");
  CHECK(pod.container == "api");
  CHECK(pod.container_id == kId);
  CHECK(namer.labels(2, "redis-server").service_name == "cache");
  CHECK(namer.labels(3, "sleep").service_name == "container-dddddddddddd/sleep");
  CHECK(namer.labels(4, "nginx").service_name == "nginx");
  CHECK(namer.labels(4, "nginx").systemd_unit == "nginx.service");
  CHECK(namer.labels(5, "java").service_name == "com.example.Billing");
  CHECK(namer.labels(6, "tool").service_name == "tool");
  // Gone before it was named: the name its records carried.
  CHECK(namer.labels(7, "short-lived").service_name == "short-lived");
  CHECK(namer.size() == 7);
  namer.forget(7);
  CHECK(namer.size() == 6);
}

TEST_CASE("service: the sources' order is configurable; kernel threads and memfd executables get real names") {
  using namespace std::string_literals;
  TempDir root;
  // A JVM run by a systemd unit: systemd wins by default, java when put first.
  fake_process(root.path, 1, "/system.slice/billing.service",
               "/usr/bin/java\0-Xmx1g\0-jar\0/srv/billing-2.3.jar"s, "/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
  // A kernel thread: no executable, no command line.
  fs::create_directories(root.path / "proc/2");
  write(root.path / "proc/2/stat", "2 (kworker/0:1) I 2");
  write(root.path / "proc/2/cmdline", "");
  // Run from a memfd: its argv[0] names it.
  fake_process(root.path, 3, "/system.slice/x.scope", "line_io/backend\0--uid\0000"s, "/memfd:sealed-1234 (deleted)");

  CHECK(ServiceNamer(root.path.string()).labels(1, "java").service_name == "billing");
  ServiceNamer java_first(root.path.string(), {"java", "systemd", "exe"});
  CHECK(java_first.labels(1, "java").service_name == "billing-2.3");
  CHECK(java_first.labels(2, "kworker/0:1").service_name == "kernel");
  CHECK(java_first.labels(3, "memfd:sealed-12").service_name == "backend");
  // Without exe among the sources, a process nothing names keeps its comm.
  CHECK(ServiceNamer(root.path.string(), {"kubernetes"}).labels(3, "backend").service_name == "backend");
}

TEST_CASE("service: a Python command's script, module or served application") {
  CHECK(python_service(cmd({"/usr/bin/python3", "/srv/billing/worker.py", "--queue", "high"})) == "worker");
  CHECK(python_service(cmd({"python3.11", "-u", "-X", "dev", "-W", "ignore", "app.py"})) == "app");
  CHECK(python_service(cmd({"python3", "-m", "http.server", "8000"})) == "http.server");
  CHECK(python_service(cmd({"/usr/bin/python3", "/srv/tool/__main__.py"})) == "tool");
  // A console script run through its shebang: the interpreter, then the script.
  CHECK(python_service(cmd({"/usr/bin/python3", "/usr/bin/gunicorn", "-w", "4", "-b", ":8000", "shop.wsgi:application"})) == "shop.wsgi");
  CHECK(python_service(cmd({"/usr/local/bin/python3.12", "/usr/local/bin/uvicorn", "main:app", "--port", "8000"})) == "main");
  CHECK(python_service(cmd({"python3", "-m", "uvicorn", "api.asgi:app", "--host", "0.0.0.0"})) == "api.asgi");
  CHECK(python_service(cmd({"python3", "-m", "gunicorn", "--version"})) == "gunicorn");
  // The address it binds is no application.
  CHECK(python_service(cmd({"/usr/bin/python3", "/usr/bin/gunicorn", "-b", "0.0.0.0:8000", "shop.wsgi:app"})) == "shop.wsgi");
  CHECK(python_service(cmd({"/usr/bin/python3", "/usr/bin/gunicorn", "--bind", "localhost:8000", "-w", "2", "shop.wsgi:app"})) ==
        "shop.wsgi");
  CHECK(python_service(cmd({"python3", "/usr/bin/gunicorn", "--bind=unix:/run/shop.sock", "app:create_app()"})) == "app");
  CHECK(python_service(cmd({"python3", "/usr/bin/gunicorn", "-c", "conf.py"})) == "gunicorn");
  CHECK(python_service(cmd({"python3", "-c", "import time; time.sleep(9)"})).empty());
  CHECK(python_service(cmd({"python3"})).empty());
  CHECK(python_service(cmd({"/usr/bin/pythonista", "a.py"})).empty());
  CHECK(python_service(cmd({"java", "Main"})).empty());
}

TEST_CASE("service: a node command's script") {
  CHECK(node_script(cmd({"node", "server.js"})) == "server.js");
  CHECK(node_script(cmd({"/usr/bin/nodejs", "--max-old-space-size=512", "-r", "dotenv/config", "/srv/api/index.js", "--port", "3000"})) ==
        "/srv/api/index.js");
  CHECK(node_script(cmd({"node", "--", "app.mjs"})) == "app.mjs");
  CHECK(node_script(cmd({"node", "-e", "setTimeout(()=>{},1e6)"})).empty());
  CHECK(node_script(cmd({"node"})).empty());
  CHECK(node_script(cmd({"/usr/bin/python3", "server.js"})).empty());
}

TEST_CASE("service: a node process is named by its script's package, else by the script") {
  TempDir root;
  fs::path proc = root.path / "proc" / "7";
  // An absolute script inside a package, seen through the process's root.
  write(proc / "root/srv/api/package.json", R"({"name": "orders-api", "version": "1.0.0"})");
  write(proc / "root/srv/api/lib/server.js", "");
  fake_process(root.path, 7, "/user.slice/session-1.scope", cmd({"node", "/srv/api/lib/server.js"}), "/usr/bin/node");
  // A relative script, through its cwd, in a directory without a package.
  fake_process(root.path, 8, "/user.slice/session-1.scope", cmd({"node", "jobs/nightly.mjs"}), "/usr/bin/node");
  fs::create_directories(root.path / "work/jobs");
  fs::create_directory_symlink(root.path / "work", root.path / "proc/8/cwd");
  fs::create_directory_symlink("/", root.path / "proc/8/root");
  // A package.json without a name does not lend an outer package's.
  write(root.path / "work/package.json", R"({"name": "outer"})");
  write(root.path / "work/jobs/package.json", R"({"private": true})");
  ServiceNamer namer(root.path.string(), {"node", "exe"});
  CHECK(namer.labels(7, "node").service_name == "orders-api");
  CHECK(namer.labels(8, "node").service_name == "nightly");
}
