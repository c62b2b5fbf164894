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
  uint16_t representation_mask = 0, seq_tag = 0, cons_tag = 0, sliced_tag = 0, thin_tag = 0;
  uint16_t encoding_mask = 0, one_byte_tag = 0;
  uint16_t shared_function_info_type = 0, scope_info_type = 0, script_type = 0;
  // ScopeInfo's slots after its map: where the count of context locals
  // is, and where their names (then as many infos) begin.
  uint16_t scope_info_context_locals = 0, scope_info_first_vars = 0;
  uint8_t smi_shift = 32;  // a small integer's value is the word shifted right by this
};

struct V8Process {
  std::string binary;  // the file holding V8, as the process maps it
  ember_v8_process frames{};
  V8Layout layout;
};

// The layout v8dbg constants (name without "v8dbg_" -> value) give, or
// what is missing or contradicts ember's reading (pointer compression).
std::expected<V8Process, std::string> v8_layout(const std::map<std::string, int64_t>& constants);

// The V8 process `pid` runs, none if it runs none (or is gone), or why it
// cannot be read.
std::expected<std::optional<V8Process>, std::string> find_v8(pid_t pid);

}  // namespace ember::runtimes
