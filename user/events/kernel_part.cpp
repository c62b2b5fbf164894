#include "user/events/kernel_part.h"

#include <bpf/libbpf.h>

#include <cstring>

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

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace ember
