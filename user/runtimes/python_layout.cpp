#include "user/runtimes/python_layout.h"

#include <array>
#include <cstring>

namespace ember::runtimes {
namespace {

// Offsets as CPython's headers of each version give them (3.12.1 and
// 3.13.0 for those; the debug offsets of a 3.13+ process override).
constexpr ember_python_layout k38 = {
    .version = 0x0308, .instr_kind = EMBER_PY_INSTR_LASTI_BYTES, .entry = EMBER_PY_ENTRY_EVERY,
    .shim_owner = 0, .code_tag_mask = 0, .ascii_data = 48, .compact_data = 72,
    .runtime_interpreters = 32, .interp_next = 0, .interp_threads = 8, .tstate_next = 8,
    .tstate_native_thread_id = -1, .tstate_thread_id = 176, .tstate_frame = 24, .cframe_current_frame = -1, .cframe_previous = -1,
    .frame_previous = 24, .frame_code = 32, .frame_instr = 104, .frame_owner = -1, .frame_is_entry = -1,
    .code_name = 112, .code_qualname = -1, .code_filename = 104, .code_firstlineno = 40, .code_linetable = 120,
    .code_adaptive = -1, .code_firsttraceable = -1};

constexpr ember_python_layout k310 = [] {
  ember_python_layout l = k38;
  l.version = 0x030a;
  l.instr_kind = EMBER_PY_INSTR_LASTI_UNITS;
  l.frame_instr = 96;  // f_lasti, now in code units
  return l;
}();

constexpr ember_python_layout k311 = {
    .version = 0x030b, .instr_kind = EMBER_PY_INSTR_PREV, .entry = EMBER_PY_ENTRY_FLAG,
    .shim_owner = 0, .code_tag_mask = 0, .ascii_data = 48, .compact_data = 72,
    .runtime_interpreters = 40, .interp_next = 0, .interp_threads = 16, .tstate_next = 8,
    .tstate_native_thread_id = 160, .tstate_thread_id = 152, .tstate_frame = 56, .cframe_current_frame = 8, .cframe_previous = 16,
    .frame_previous = 48, .frame_code = 32, .frame_instr = 56, .frame_owner = 69, .frame_is_entry = 68,
    .code_name = 120, .code_qualname = 128, .code_filename = 112, .code_firstlineno = 72, .code_linetable = 136,
    .code_adaptive = 184, .code_firsttraceable = 168};

constexpr ember_python_layout k312 = {
    .version = 0x030c, .instr_kind = EMBER_PY_INSTR_PREV, .entry = EMBER_PY_ENTRY_SHIM,
    .shim_owner = 3, .code_tag_mask = 0, .ascii_data = 40, .compact_data = 56,
    .runtime_interpreters = 40, .interp_next = 0, .interp_threads = 72, .tstate_next = 8,
    .tstate_native_thread_id = 144, .tstate_thread_id = 136, .tstate_frame = 56, .cframe_current_frame = 0, .cframe_previous = 8,
    .frame_previous = 8, .frame_code = 0, .frame_instr = 56, .frame_owner = 70, .frame_is_entry = -1,
    .code_name = 120, .code_qualname = 128, .code_filename = 112, .code_firstlineno = 68, .code_linetable = 136,
    .code_adaptive = 192, .code_firsttraceable = 176};

constexpr ember_python_layout k313 = {
    .version = 0x030d, .instr_kind = EMBER_PY_INSTR_NEXT, .entry = EMBER_PY_ENTRY_SHIM,
    .shim_owner = 3, .code_tag_mask = 0, .ascii_data = 40, .compact_data = 56,
    .runtime_interpreters = 632, .interp_next = 7264, .interp_threads = 7344, .tstate_next = 8,
    .tstate_native_thread_id = 160, .tstate_thread_id = 152, .tstate_frame = 72, .cframe_current_frame = -1, .cframe_previous = -1,
    .frame_previous = 8, .frame_code = 0, .frame_instr = 56, .frame_owner = 70, .frame_is_entry = -1,
    .code_name = 120, .code_qualname = 128, .code_filename = 112, .code_firstlineno = 68, .code_linetable = 136,
    .code_adaptive = 200, .code_firsttraceable = 184};

// 3.14: the shim's owner is FRAME_OWNED_BY_INTERPRETER (3, CSTACK moved to
// 4); f_executable is a stack reference whose low 2 bits are tags.
constexpr ember_python_layout k314 = [] {
  ember_python_layout l = k313;
  l.version = 0x030e;
  l.code_tag_mask = 3;
  l.runtime_interpreters = 808;
  l.interp_next = 7272;
  l.frame_owner = 74;
  l.code_adaptive = 208;
  l.code_firsttraceable = 192;
  return l;
}();

constexpr std::array kLayouts = {k38, [] {
                                   ember_python_layout l = k38;
                                   l.version = 0x0309;
                                   return l;
                                 }(),
                                 k310, k311, k312, k313, k314};

std::string version_text(uint16_t version) {
  return std::to_string(version >> 8) + "." + std::to_string(version & 0xff);
}

// Where _Py_DebugOffsets keeps each field (u64 values), by version: the
// struct grew in 3.14, and every field from interpreter_state.gc on moved.
struct DebugOffsetsPlaces {
  uint16_t interpreters_head, interp_next, interp_threads_head;
  uint16_t tstate_next, tstate_current_frame, tstate_thread_id, tstate_native_thread_id;
  uint16_t frame_previous, frame_executable, frame_instr_ptr, frame_owner;
  uint16_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_adaptive;
};
constexpr DebugOffsetsPlaces k313Places = {40, 64, 72, 168, 184, 192, 200, 232, 240, 248, 264, 280, 288, 296, 304, 312, 344};
constexpr DebugOffsetsPlaces k314Places = {40, 64, 72, 192, 208, 216, 224, 256, 264, 272, 288, 320, 328, 336, 344, 352, 384};
static_assert(k314Places.code_adaptive + 8 <= kDebugOffsetsBytes);

}  // namespace

std::expected<ember_python_layout, std::string> python_layout(uint16_t version) {
  for (const ember_python_layout& l : kLayouts)
    if (l.version == version) return l;
  return std::unexpected("CPython " + version_text(version) + " is not one ember knows (" +
                         version_text(kPythonOldest) + " to " + version_text(kPythonNewest) + ")");
}

std::expected<ember_python_layout, std::string> python_layout_from_debug_offsets(std::span<const uint8_t> head) {
  if (head.size() < kDebugOffsetsBytes) return std::unexpected("_Py_DebugOffsets cut short");
  if (std::memcmp(head.data(), "xdebugpy", 8) != 0) return std::unexpected("_PyRuntime does not start with _Py_DebugOffsets");
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, head.data() + at, sizeof v);
    return v;
  };
  uint64_t hex = u64(8);  // PY_VERSION_HEX
  uint16_t version = static_cast<uint16_t>(hex >> 16);
  if (u64(16) != 0) return std::unexpected("a free-threaded CPython " + version_text(version) + ": not supported");
  auto base = python_layout(version);
  if (!base) return base;
  if (version < 0x030d) return std::unexpected("_Py_DebugOffsets of CPython " + version_text(version) + " (3.13+ expected)");
  const DebugOffsetsPlaces& at = version == 0x030d ? k313Places : k314Places;
  ember_python_layout l = *base;
  bool fits = true;
  auto take = [&](int16_t& field, uint16_t place) {
    uint64_t v = u64(place);
    if (v > INT16_MAX) fits = false;
    field = static_cast<int16_t>(v);
  };
  take(l.runtime_interpreters, at.interpreters_head);
  take(l.interp_next, at.interp_next);
  take(l.interp_threads, at.interp_threads_head);
  take(l.tstate_next, at.tstate_next);
  take(l.tstate_frame, at.tstate_current_frame);
  take(l.tstate_thread_id, at.tstate_thread_id);
  take(l.tstate_native_thread_id, at.tstate_native_thread_id);
  take(l.frame_previous, at.frame_previous);
  take(l.frame_code, at.frame_executable);
  take(l.frame_instr, at.frame_instr_ptr);
  take(l.frame_owner, at.frame_owner);
  take(l.code_filename, at.code_filename);
  take(l.code_name, at.code_name);
  take(l.code_qualname, at.code_qualname);
  take(l.code_linetable, at.code_linetable);
  take(l.code_firstlineno, at.code_firstlineno);
  take(l.code_adaptive, at.code_adaptive);
  if (!fits) return std::unexpected("_Py_DebugOffsets of CPython " + version_text(version) + " hold offsets past 32 KiB");
  return l;
}

}  // namespace ember::runtimes
