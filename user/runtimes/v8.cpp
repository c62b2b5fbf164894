#include "user/runtimes/v8.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <vector>

#include "symbolizer/elf_facts.h"
#include "symbolizer/proc_maps.h"
#include "user/runtimes/process_memory.h"

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

// What positions need, where the constants and the version give it: ""
// or why not. Fields the constants leave out are V8's own, per version
// (src/objects/*.tq, code.h), as checked on node 18 (V8 10.2) and node 20
// (V8 11.3) with %DebugPrint.
std::string read_positions_layout(const std::map<std::string, int64_t>& c, V8Version v, V8Process& p) {
  ember_v8_process& f = p.frames;
  V8Layout& l = p.layout;
  std::string missing;
  auto get = [&](const std::string& name) -> int64_t {
    auto value = constant(c, name);
    if (!value && missing.empty()) missing = name;
    return value.value_or(0);
  };
  int64_t shared = f.jsfunction_shared;
  // JSFunction's code follows its context and feedback cell; from 11.7.368
  // it precedes its SharedFunctionInfo.
  int64_t code =
      constant(c, "class_JSFunction__code__").value_or(v >= V8Version{11, 7, 368} ? shared - 8 : shared + 24);
  int64_t start, size, flags, positions = 0;
  bool inline_instructions = v < V8Version{11, 1, 0};
  if (auto s = constant(c, "class_Code__instruction_size__"), i = constant(c, "class_Code__instruction_start__"),
      fl = constant(c, "class_Code__flags__");
      s && i && fl) {
    size = *s, start = *i, flags = *fl;
    positions = constant(c, "class_Code__source_position_table__").value_or(size - 16);
  } else if (auto spt = constant(c, "class_Code__source_position_table__"); spt && v.major == 11) {
    // 11.x's Code (formerly CodeDataContainer) lost these constants: after
    // its position table and instruction stream come a pointer to its first
    // instruction, its flags, then (before 11.4.59) a builtin id and
    // kind-specific flags, and its instructions' size.
    positions = *spt;
    start = positions + 16;
    flags = start + 8;
    size = flags + (v < V8Version{11, 4, 59} ? 8 : 4);
  } else {
    return "V8 " + std::to_string(v.major) + "." + std::to_string(v.minor) +
           " does not say where a Code's instructions lie";
  }
  l.code_source_positions = static_cast<uint16_t>(positions);
  l.code_deoptimization_data =
      static_cast<uint16_t>(constant(c, "class_Code__deoptimization_data__").value_or(positions - 8));
  f.fp_bytecode_offset = static_cast<int16_t>(constant(c, "off_fp_bytecode_offset").value_or(f.fp_function - 24));
  l.bytecode_start = f.bytecode_start = static_cast<uint16_t>(get("class_BytecodeArray__data__") - 1);
  f.jsfunction_code = static_cast<uint16_t>(code);
  l.code_type = f.code_type = static_cast<uint16_t>(get("type_Code__"));
  l.code_flags = f.code_flags = static_cast<uint16_t>(flags);
  l.code_instruction_size = f.code_instruction_size = static_cast<uint16_t>(size);
  l.code_instruction_start = f.code_instruction_start = static_cast<uint16_t>(start);
  f.instructions_inline = inline_instructions;
  l.instructions_inline = inline_instructions;
  l.jsfunction_shared = f.jsfunction_shared;
  // Optional: without them, code optimized on stack replacement has no line.
  l.jsfunction_feedback_cell = static_cast<uint16_t>(constant(c, "class_JSFunction__raw_feedback_cell__").value_or(0));
  l.feedback_cell_value = static_cast<uint16_t>(constant(c, "class_FeedbackCell__value__").value_or(0));
  l.feedback_vector_type = static_cast<uint16_t>(constant(c, "type_FeedbackVector__").value_or(0));
  l.code_kind_mask = f.code_kind_mask = static_cast<uint8_t>(get("CodeKindFieldMask"));
  l.code_kind_shift = f.code_kind_shift = static_cast<uint8_t>(constant(c, "CodeKindFieldShift").value_or(0));
  l.code_kind_baseline = f.code_kind_baseline = static_cast<uint8_t>(get("CodeKindBaseline"));
  f.array_length = static_cast<uint8_t>(get("class_FixedArrayBase__length__"));
  // The interpreter's offset register, by V8's number for it: r9 on
  // x86-64, x19 on arm64 (what the kernel's walker reads).
#if defined(__aarch64__)
  constexpr int64_t kOffsetRegister = 19;
#else
  constexpr int64_t kOffsetRegister = 9;
#endif
  f.offset_in_register = constant(c, "InterpreterBytecodeOffsetRegister") == kOffsetRegister &&
                         constant(c, "off_fp_bytecode_array").value_or(f.fp_function - 16) == f.fp_bytecode_offset + 8;
  l.sfi_function_data = static_cast<uint16_t>(get("class_SharedFunctionInfo__function_data__"));
  l.script_source = static_cast<uint16_t>(get("class_Script__source__"));
  l.script_line_ends = static_cast<uint16_t>(get("class_Script__line_ends__"));
  l.bytecode_array_type = static_cast<uint16_t>(get("type_BytecodeArray__"));
  l.byte_array_type = static_cast<uint16_t>(get("type_ByteArray__"));
  l.fixed_array_type = static_cast<uint16_t>(get("type_FixedArray__"));
  l.array_length = static_cast<uint16_t>(get("class_FixedArrayBase__length__"));
  l.array_data = static_cast<uint16_t>(get("class_FixedArray__data__"));
  // BytecodeArray: after its length, its constant pool, handler table and
  // position table.
  l.bytecode_source_positions = static_cast<uint16_t>(l.array_length + 24);
  l.deopt_function = static_cast<uint16_t>(constant(c, "DeoptimizationDataSharedFunctionInfoIndex").value_or(6));
  l.deopt_literals = static_cast<uint16_t>(constant(c, "DeoptimizationDataLiteralArrayIndex").value_or(2));
  l.deopt_inlining_positions =
      static_cast<uint16_t>(constant(c, "DeoptimizationDataInliningPositionsIndex").value_or(l.deopt_function + 1));
  if (!missing.empty()) return "its V8 metadata has no v8dbg_" + missing;
  // What the kernel's walker reads of a Code header: its first 64 bytes.
  if (flags + 4 > 64 || size + 4 > 64 || (!inline_instructions && start + 8 > 64) ||
      f.code_kind_mask == 0)
    return "its V8 metadata describes frames or code ember does not read";
  l.positions = true;
  return {};
}

}  // namespace

std::expected<V8Process, std::string> v8_layout(const std::map<std::string, int64_t>& c, V8Version version) {
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
  l.external_tag = static_cast<uint16_t>(get("ExternalStringTag"));
  l.external_resource = static_cast<uint16_t>(get("class_ExternalString__resource__"));
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
  p.version = version;
  p.no_positions = read_positions_layout(c, version, p);
  return p;
}

namespace {

// What V8 exports beside its constants.
struct V8Exports {
  V8Version version;
  std::vector<uint8_t> bytecode_sizes;  // Bytecodes::kBytecodeSizes, if exported
};

// Those of the V8 that process `pid` maps from `file` at `m`: its
// Version::version_string_ ("11.3.244.8-node.38"), read from the process
// (a pointer the loader relocates), and the sizes of its bytecodes, read
// from the file.
std::expected<V8Exports, std::string> read_exports(pid_t pid, const std::string& file, const symbolizer::Mapping& m) {
  static const std::string kVersion = "_ZN2v88internal7Version15version_string_E";
  static const std::string kSizes = "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE";
  auto exports = symbolizer::exported_symbols(file, {kVersion, kSizes});
  if (!exports) return std::unexpected(exports.error());
  auto s = exports->symbols.find(kVersion);
  if (s == exports->symbols.end()) return std::unexpected("it exports no V8 version");
  ReadMemory read = process_reader(pid);
  uint64_t text = 0;
  char chars[32] = {};
  if (!read(m.start - exports->first_load_vaddr + s->second.vaddr, &text, sizeof text) ||
      !read(text, chars, sizeof chars - 1))
    return std::unexpected("its V8 version cannot be read");
  V8Exports out;
  V8Version& v = out.version;
  if (std::sscanf(chars, "%d.%d.%d", &v.major, &v.minor, &v.build) != 3)
    return std::unexpected("its V8 version is not one: '" + std::string(chars) + "'");
  // Three rows, by operand scale (1, 2, 4), of a size per bytecode.
  if (auto sizes = exports->symbols.find(kSizes);
      sizes != exports->symbols.end() && sizes->second.file_offset && sizes->second.size % 3 == 0 &&
      sizes->second.size <= 3 * 256) {
    std::ifstream in(file, std::ios::binary);
    out.bytecode_sizes.resize(sizes->second.size);
    in.seekg(static_cast<std::streamoff>(sizes->second.file_offset));
    if (!in.read(reinterpret_cast<char*>(out.bytecode_sizes.data()), static_cast<std::streamsize>(sizes->second.size)))
      out.bytecode_sizes.clear();
  }
  return out;
}

}  // namespace

std::expected<std::optional<V8Process>, std::string> find_v8(pid_t pid) {
  static const std::regex name(R"((?:^|/)(?:node|nodejs|libnode\.so[.0-9]*)$)");
  std::optional<std::vector<symbolizer::Mapping>> mappings = symbolizer::read_proc_maps("/proc/" + std::to_string(pid) + "/maps");
  if (!mappings) return std::nullopt;  // gone: nothing to read
  std::string root = "/proc/" + std::to_string(pid) + "/root";
  for (const symbolizer::Mapping& m : *mappings) {
    if (m.offset != 0 || m.inode == 0) continue;
    // Asked of every file a new process maps: most are ruled out without the regex.
    std::string_view base = std::string_view(m.path).substr(m.path.rfind('/') + 1);
    if ((!base.starts_with("node") && !base.starts_with("libnode")) || !std::regex_search(m.path, name)) continue;
    auto constants = read_constants(root + m.path);
    if (!constants) return std::unexpected(constants.error());
    if (constants->empty()) continue;  // a launcher; V8 is in its libnode
    auto exports = read_exports(pid, root + m.path, m);
    if (!exports) return std::unexpected(m.path + ": " + exports.error());
    auto p = v8_layout(*constants, exports->version);
    if (!p) return std::unexpected(m.path + ": " + p.error());
    p->binary = m.path;
    p->layout.bytecode_sizes = std::move(exports->bytecode_sizes);
    return *p;
  }
  return std::nullopt;
}

}  // namespace ember::runtimes
