#include "user/events/kernel_part.h"

#include <bpf/libbpf.h>

#include <cstddef>
#include <cstring>

#include <linux/types.h>  // __u32 and friends for profile.h
extern "C" {
#include "profile.h"
}

namespace ember {

KernelPart::~KernelPart() { KernelPart::detach(); }

void KernelPart::detach() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
  links_.clear();
}

bool KernelPart::keep(bpf_link* link) {
  if (!link) return false;
  links_.push_back(link);
  return true;
}

uint64_t records_bytes(uint64_t per_second, int cpus) {
  constexpr uint64_t kFullRecord = offsetof(ember_sample, ips) + 2 * EMBER_MAX_STACK_DEPTH * sizeof(__u64);
  return per_second * static_cast<uint64_t>(cpus) * kFullRecord / 2;
}

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace ember
