// What the host allows: privileges, BTF and the perf sysctls, read once
// before recording so every refusal can name its cause and its fix.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <string>

namespace ember {

struct HostFacts {
  bool has_btf = false;           // /sys/kernel/btf/vmlinux
  bool can_bpf = false;           // CAP_BPF or CAP_SYS_ADMIN
  bool can_perfmon = false;       // CAP_PERFMON or CAP_SYS_ADMIN
  uint32_t max_sample_rate = 0;   // kernel.perf_event_max_sample_rate, 0 if unknown
  uint32_t max_stack = 127;       // kernel.perf_event_max_stack
};

// `root` prefixes /sys and /proc paths (tests point it at a fake tree).
HostFacts read_host_facts(const std::string& root = "");

// The first reason this host cannot record, with the fix; nothing if it can.
std::expected<void, std::string> check_can_record(const HostFacts& facts);

// Whether the kernel samples at `hz` per CPU: 1 to kernel.perf_event_max_sample_rate.
// The one rule for record's -F and serve's frequency.
std::expected<void, std::string> check_frequency(uint64_t hz, const HostFacts& facts);

// This host's name.
std::string host_name();

// The process a thread belongs to (Tgid in /proc/TID/status; threads
// resolve there though unlisted), or 0 if there is no such thread.
pid_t thread_group_of(uint32_t tid);

// Raises RLIMIT_NOFILE to its hard limit: the symbolizer keeps one open file
// per distinct mapped binary.
void raise_file_limit();

}  // namespace ember
