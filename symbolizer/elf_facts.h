// Facts read from an ELF file's headers and dynamic symbols, for the parts
// of ember that probe a binary rather than name its addresses (the sampler
// placing uprobes, the malloc event checking a command).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace ember::symbolizer {

// Whether the 64-bit ELF executable at `path` is statically linked (no
// program interpreter); nothing when it is not such a file (a script, a
// 32-bit binary) or cannot be read.
std::optional<bool> is_static_executable(const std::string& path);

// Where the exported function `name` (.dynsym) lies in the executable
// PT_LOAD segment holding it: its offset there and the segment's size.
struct SegmentPlace {
  uint64_t offset = 0;
  uint64_t segment_size = 0;
};
std::expected<SegmentPlace, std::string> exported_function_place(const std::string& path, std::string_view name);

}  // namespace ember::symbolizer
