#include "user/host/host.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

namespace ember {
namespace {

// Defined by linux/capability.h from 5.8 on; spelled out for older headers.
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

uint32_t read_uint(const std::string& path, uint32_t fallback) {
  std::ifstream in(path);
  uint64_t v = 0;
  return (in >> v) ? static_cast<uint32_t>(v) : fallback;
}

bool has_capability(const __user_cap_data_struct (&data)[2], int cap) {
  return data[cap / 32].effective & (1u << (cap % 32));
}

}  // namespace

HostFacts read_host_facts(const std::string& root) {
  HostFacts f;
  f.has_btf = std::ifstream(root + "/sys/kernel/btf/vmlinux").good();
  f.max_sample_rate = read_uint(root + "/proc/sys/kernel/perf_event_max_sample_rate", 0);
  f.max_stack = read_uint(root + "/proc/sys/kernel/perf_event_max_stack", 127);

  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) == 0) {
    bool admin = has_capability(data, CAP_SYS_ADMIN);
    f.can_bpf = admin || has_capability(data, kCapBpf);
    f.can_perfmon = admin || has_capability(data, kCapPerfmon);
  }
  return f;
}

std::expected<void, std::string> check_frequency(uint64_t hz, const HostFacts& f) {
  if (hz >= 1 && (!f.max_sample_rate || hz <= f.max_sample_rate)) return {};
  std::string range = f.max_sample_rate ? "between 1 and " + std::to_string(f.max_sample_rate) +
                                              " Hz (kernel.perf_event_max_sample_rate)"
                                        : "of at least 1 Hz";
  return std::unexpected("frequency " + std::to_string(hz) + " Hz is out of range: use a frequency " + range);
}

std::expected<void, std::string> check_can_record(const HostFacts& f) {
  if (!f.can_bpf || !f.can_perfmon)
    return std::unexpected(
        std::string("profiling needs root, or the capabilities ") +
        (!f.can_bpf && !f.can_perfmon ? "CAP_BPF and CAP_PERFMON" : !f.can_bpf ? "CAP_BPF" : "CAP_PERFMON") +
        " (Linux 5.8+): run it with sudo, or `setcap cap_bpf,cap_perfmon+ep ember`");
  if (!f.has_btf)
    return std::unexpected(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing), which ember's CO-RE programs need: "
        "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (the default in Debian, Ubuntu, Fedora and RHEL kernels)");
  return {};
}

void raise_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

pid_t thread_group_of(uint32_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  std::string key;
  pid_t tgid = 0;
  while (in >> key)
    if (key == "Tgid:") {
      in >> tgid;
      break;
    }
  return tgid;
}

}  // namespace ember
