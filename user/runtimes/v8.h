// V8 (Node.js) in a process: the file that holds it (node, or Debian's
// libnode.so), found by the postmortem metadata V8's build exports for
// debuggers (v8dbg_* symbols: offsets, type numbers, tags), and what that
// metadata says, for the BPF walker of JavaScript frames (bpf/v8.h) and
// the names of their functions (v8_frames.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <linux/types.h>  // __u16 and friends for v8.h

#include "bpf/v8.h"

namespace ember::runtimes {

// Offsets are of fields from an object's untagged address.
struct V8Layout {
  uint16_t heap_object_map = 0;
  uint16_t map_instance_type = 0;
  uint16_t sfi_name_or_scope_info = 0;
  uint16_t sfi_script_or_debug_info = 0;
  uint16_t script_name = 0;
  uint16_t string_length = 0;
  uint16_t seq_one_byte_chars = 0, seq_two_byte_chars = 0;
  uint16_t cons_first = 0, cons_second = 0, thin_actual = 0, sliced_parent = 0, sliced_offset = 0;
  // An instance type below first_nonstring is a string's: its low bits
  // say how it is kept (representation) and its width (encoding).
  uint16_t first_nonstring = 0;
  uint16_t representation_mask = 0, seq_tag = 0, cons_tag = 0, sliced_tag = 0, thin_tag = 0, external_tag = 0;
  uint16_t external_resource = 0;  // an external string's resource; then where its characters are
  uint16_t encoding_mask = 0, one_byte_tag = 0;
  uint16_t shared_function_info_type = 0, scope_info_type = 0, script_type = 0;
  // ScopeInfo's slots after its map: where the count of context locals
  // is, and where their names (then as many infos) begin.
  uint16_t scope_info_context_locals = 0, scope_info_first_vars = 0;
  uint8_t smi_shift = 32;  // a small integer's value is the word shifted right by this

  // Positions (--lines). A frame's position maps to an offset in its
  // script by a source position table (a ByteArray): a BytecodeArray's
  // for a bytecode offset, a Code's for a pc offset. An optimized Code's
  // DeoptimizationData (a FixedArray) holds its function, the functions
  // inlined into it (a literal array) and where each was inlined.
  bool positions = false;  // the rest is known
  uint16_t sfi_function_data = 0;  // a BytecodeArray, or a baseline Code holding one
  uint16_t script_source = 0, script_line_ends = 0;
  uint16_t bytecode_array_type = 0, byte_array_type = 0, fixed_array_type = 0, code_type = 0;
  uint16_t array_length = 0, array_data = 0;  // FixedArrayBase's: a small integer, then the elements
  uint16_t bytecode_source_positions = 0, bytecode_start = 0;
  uint16_t code_source_positions = 0, code_deoptimization_data = 0;  // a baseline Code's holds its bytecode
  uint16_t deopt_function = 0, deopt_literals = 0, deopt_inlining_positions = 0;  // element indexes
  // Baseline code: its kind, and where its bytecode offset table is (in
  // place of a position table: each bytecode's size of machine code, in
  // order, after the prologue's). The sizes of bytecodes, by operand scale
  // (1, 2, 4) then bytecode, walk the bytecode along; empty: not exported.
  uint16_t code_flags = 0;
  uint8_t code_kind_shift = 0, code_kind_mask = 0, code_kind_baseline = 0;
  // Where a Code's instructions lie (ember_v8_process's fields alike), and
  // the way from a JSFunction to the code optimized on stack replacement
  // its FeedbackVector keeps (weak references among its slots).
  uint16_t code_instruction_start = 0, code_instruction_size = 0;
  bool instructions_inline = false;
  uint16_t jsfunction_shared = 0, jsfunction_feedback_cell = 0, feedback_cell_value = 0, feedback_vector_type = 0;
  std::vector<uint8_t> bytecode_sizes;
};

// V8's version, as the process runs it (major.minor.build).
struct V8Version {
  int major = 0, minor = 0, build = 0;
  auto operator<=>(const V8Version&) const = default;
};

struct V8Process {
  std::string binary;  // the file holding V8, as the process maps it
  V8Version version;
  ember_v8_process frames{};
  V8Layout layout;
  std::string no_positions;  // why frames cannot carry their position, if they cannot
};

// The layout v8dbg constants (name without "v8dbg_" -> value) of V8
// `version` give, or what is missing or contradicts ember's reading
// (pointer compression). Some fields that positions need are not among
// the constants: V8's sources per version give them.
std::expected<V8Process, std::string> v8_layout(const std::map<std::string, int64_t>& constants, V8Version version);

// The V8 process `pid` runs, none if it runs none (or is gone), or why it
// cannot be read.
std::expected<std::optional<V8Process>, std::string> find_v8(pid_t pid);

}  // namespace ember::runtimes
