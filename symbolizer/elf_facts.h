// Facts read from an ELF file's headers and dynamic symbols, for the parts
// of ember that probe a binary rather than name its addresses (the sampler
// placing uprobes, the malloc event checking a command).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

// Symbols of `names` that the file at `path` exports (.dynsym, defined),
// of any type (exported_function_place is one of these): their virtual addresses and sizes, and where their bytes lie
// in the file (0 for those without, such as .bss). Also the lowest PT_LOAD
// virtual address, page-aligned: a process maps the file's offset 0 there,
// plus its load bias.
struct ExportedSymbol {
  uint64_t vaddr = 0, size = 0, file_offset = 0;
  // A function's: the executable PT_LOAD segment holding it (size 0: none).
  uint64_t code_segment_vaddr = 0, code_segment_size = 0;
};
struct Exports {
  std::unordered_map<std::string, ExportedSymbol> symbols;
  uint64_t first_load_vaddr = 0;
};
std::expected<Exports, std::string> exported_symbols(const std::string& path, const std::vector<std::string>& names);
// Those whose names start with `prefix` (V8's v8dbg_ constants).
std::expected<Exports, std::string> exported_symbols_starting(const std::string& path, std::string_view prefix);

}  // namespace ember::symbolizer
