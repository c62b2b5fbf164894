#include "symbolizer/profile_frames.h"

#include <cinttypes>
#include <cstdio>

namespace ember {
namespace {

using flamegraph::FrameKind;
using symbolizer::Unknown;

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

FrameKind kind_of(symbolizer::FrameKind kind) {
  switch (kind) {
    case symbolizer::FrameKind::Kernel: return FrameKind::Kernel;
    case symbolizer::FrameKind::Native: return FrameKind::Native;
    case symbolizer::FrameKind::Cpp: return FrameKind::Cpp;
    case symbolizer::FrameKind::Inlined: return FrameKind::Inlined;
    case symbolizer::FrameKind::Jit: return FrameKind::Jit;
    case symbolizer::FrameKind::Interpreted: return FrameKind::Interpreted;
  }
  return FrameKind::Unknown;
}

flamegraph::Frame placeholder(const symbolizer::Symbol& s) {
  switch (*s.unknown) {
    case Unknown::KernelHidden:
    case Unknown::KernelUnavailable:
    case Unknown::KernelNoSymbol:
      return {"[unknown]", FrameKind::Kernel, "[kernel]"};
    case Unknown::Anonymous:
    case Unknown::SpecialMapping:
      return {s.module, FrameKind::Unknown, s.module};
    default:
      // The module and offset say more than a bare [unknown].
      if (s.module.empty()) return {"[unknown]", FrameKind::Unknown, {}};
      return {basename_of(s.module) + "+" + hex(s.offset), FrameKind::Unknown, s.module};
  }
}

}  // namespace

flamegraph::Frame profile_frame(const symbolizer::Frame& f) {
  std::string name = f.name;
  if (f.line != 0) name += " (" + basename_of(f.file) + ":" + std::to_string(f.line) + ")";
  return {std::move(name), kind_of(f.kind), f.module};
}

std::vector<flamegraph::Frame> profile_frames(const symbolizer::Symbol& s) {
  if (!s.known()) return {placeholder(s)};
  std::vector<flamegraph::Frame> out;
  out.reserve(s.frames.size());
  for (const symbolizer::Frame& f : s.frames) out.push_back(profile_frame(f));
  return out;
}

}  // namespace ember
