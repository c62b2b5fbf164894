#include "user/runtimes/v8.h"

#include <fstream>
#include <regex>
#include <vector>

#include "symbolizer/elf_facts.h"
#include "symbolizer/proc_maps.h"

namespace ember::runtimes {
namespace {

constexpr std::string_view kPrefix = "v8dbg_";

// The value of the first constant named `name`, or starting with it (a
// field's name ends with its type, which V8 versions spell differently).
std::optional<int64_t> constant(const std::map<std::string, int64_t>& c, const std::string& name) {
  auto it = c.lower_bound(name);
  if (it != c.end() && it->first.starts_with(name)) return it->second;
  return std::nullopt;
}

// The v8dbg_ constants of an ELF file: 32-bit integers in its data.
std::expected<std::map<std::string, int64_t>, std::string> read_constants(const std::string& file) {
  auto exports = symbolizer::exported_symbols_starting(file, kPrefix);
  if (!exports) return std::unexpected(exports.error());
  std::map<std::string, int64_t> out;
  std::ifstream in(file, std::ios::binary);
  for (const auto& [name, s] : exports->symbols) {
    if (!s.file_offset || s.size != 4) continue;
    int32_t v = 0;
    in.seekg(static_cast<std::streamoff>(s.file_offset));
    if (in.read(reinterpret_cast<char*>(&v), sizeof v)) out[name.substr(kPrefix.size())] = v;
    in.clear();
  }
  return out;
}

}  // namespace

std::expected<V8Process, std::string> v8_layout(const std::map<std::string, int64_t>& c) {
  std::string missing;
  auto get = [&](const std::string& name) -> int64_t {
    auto v = constant(c, name);
    if (!v && missing.empty()) missing = name;
    return v.value_or(0);
  };
  if (auto tagged = constant(c, "TaggedSize"); tagged && *tagged != 8)
    return std::unexpected("V8 built with pointer compression (" + std::to_string(*tagged) +
                           "-byte tagged values), which ember does not read");
  V8Process p;
  ember_v8_process& f = p.frames;
  f.fp_function = static_cast<int16_t>(get("off_fp_function"));
  int64_t fp_marker = constant(c, "off_fp_context_or_frame_type").value_or(get("off_fp_context"));
  f.jsfunction_shared = static_cast<uint16_t>(get("class_JSFunction__shared__"));
  f.heap_object_map = static_cast<uint16_t>(constant(c, "class_HeapObject__map__").value_or(0));
  f.map_instance_type = static_cast<uint16_t>(get("class_Map__instance_type__"));
  f.shared_function_info_type = static_cast<uint16_t>(get("type_SharedFunctionInfo__"));
  V8Layout& l = p.layout;
  l.heap_object_map = f.heap_object_map;
  l.map_instance_type = f.map_instance_type;
  l.shared_function_info_type = f.shared_function_info_type;
  l.sfi_name_or_scope_info = static_cast<uint16_t>(get("class_SharedFunctionInfo__name_or_scope_info__"));
  l.sfi_script_or_debug_info = static_cast<uint16_t>(get("class_SharedFunctionInfo__script_or_debug_info__"));
  l.script_name = static_cast<uint16_t>(get("class_Script__name__"));
  l.string_length = static_cast<uint16_t>(get("class_String__length__"));
  l.seq_one_byte_chars = static_cast<uint16_t>(get("class_SeqOneByteString__chars__"));
  l.seq_two_byte_chars = static_cast<uint16_t>(get("class_SeqTwoByteString__chars__"));
  l.cons_first = static_cast<uint16_t>(get("class_ConsString__first__"));
  l.cons_second = static_cast<uint16_t>(get("class_ConsString__second__"));
  l.thin_actual = static_cast<uint16_t>(get("class_ThinString__actual__"));
  l.sliced_parent = static_cast<uint16_t>(get("class_SlicedString__parent__"));
  l.sliced_offset = static_cast<uint16_t>(get("class_SlicedString__offset__"));
  l.first_nonstring = static_cast<uint16_t>(get("FirstNonstringType"));
  l.representation_mask = static_cast<uint16_t>(get("StringRepresentationMask"));
  l.seq_tag = static_cast<uint16_t>(constant(c, "SeqStringTag").value_or(0));  // 0, unexported in 11.x
  l.cons_tag = static_cast<uint16_t>(get("ConsStringTag"));
  l.sliced_tag = static_cast<uint16_t>(get("SlicedStringTag"));
  l.thin_tag = static_cast<uint16_t>(get("ThinStringTag"));
  l.encoding_mask = static_cast<uint16_t>(get("StringEncodingMask"));
  l.one_byte_tag = static_cast<uint16_t>(get("OneByteStringTag"));
  l.scope_info_type = static_cast<uint16_t>(get("type_ScopeInfo__"));
  l.script_type = static_cast<uint16_t>(get("type_Script__"));
  l.scope_info_context_locals = static_cast<uint16_t>(get("scopeinfo_idx_ncontextlocals"));
  l.scope_info_first_vars = static_cast<uint16_t>(get("scopeinfo_idx_first_vars"));
  l.smi_shift = static_cast<uint8_t>(get("SmiShiftSize") + 1);
  if (!missing.empty()) return std::unexpected("its V8 metadata has no v8dbg_" + missing);
  if (f.fp_function >= 0 || fp_marker != f.fp_function + 8 || l.smi_shift != 32)
    return std::unexpected("its V8 metadata describes frames or small integers ember does not read");
  return p;
}

std::expected<std::optional<V8Process>, std::string> find_v8(pid_t pid) {
  static const std::regex name(R"((?:^|/)(?:node|nodejs|libnode\.so[.0-9]*)$)");
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return std::nullopt;  // gone: nothing to read
  std::string root = "/proc/" + std::to_string(pid) + "/root";
  for (const symbolizer::Mapping& m : symbolizer::parse_proc_maps(maps)) {
    if (m.offset != 0 || m.inode == 0 || !std::regex_search(m.path, name)) continue;
    auto constants = read_constants(root + m.path);
    if (!constants) return std::unexpected(constants.error());
    if (constants->empty()) continue;  // a launcher; V8 is in its libnode
    auto p = v8_layout(*constants);
    if (!p) return std::unexpected(m.path + ": " + p.error());
    p->binary = m.path;
    return *p;
  }
  return std::nullopt;
}

}  // namespace ember::runtimes
