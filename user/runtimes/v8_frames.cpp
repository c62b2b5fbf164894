#include "user/runtimes/v8_frames.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "flamegraph/utf8.h"

namespace ember::runtimes {
namespace {

// Names longer than this many characters are cut: a frame name, not a text.
constexpr uint32_t kMaxChars = 512;
// Strings made of strings (cons strings, slices) followed this deep at most.
constexpr int kMaxDepth = 8;
// ScopeInfo slots looked through for the function's name.
constexpr size_t kScopeSlots = 16;
// A string's characters are read this many at a time.
constexpr uint32_t kUnitsPerRead = 64 * 1024;
// Sources longer than this many characters have their lines counted only
// where V8 keeps their line ends.
constexpr uint32_t kMaxSourceUnits = 64 << 20;
// Source position tables and inlining tables read at most.
constexpr int64_t kMaxTableBytes = 1 << 20;
// Functions inlined into one another followed this deep at most.
constexpr size_t kMaxInlined = 64;

constexpr uint64_t kTagMask = 3, kHeapObjectTag = 1;
// An external string's instance type bit for one that does not keep where
// its characters are (V8's kUncachedExternalStringMask).
constexpr uint16_t kUncachedExternalMask = 0x10;

bool is_heap_object(uint64_t v) { return (v & kTagMask) == kHeapObjectTag; }
bool is_small_integer(uint64_t v) { return (v & 1) == 0; }

class Reader {
 public:
  Reader(const V8Layout& l, const ReadMemory& read) : l_(l), read_(read) {}

  // The tagged pointer at field `offset` of object `object` (tagged); 0 if unreadable.
  uint64_t field(uint64_t object, uint64_t offset) const {
    uint64_t v = 0;
    return read_(object - kHeapObjectTag + offset, &v, sizeof v) ? v : 0;
  }

  // The instance type of heap object `object`; none if it is not one.
  std::optional<uint16_t> type(uint64_t object) const {
    if (!is_heap_object(object)) return std::nullopt;
    uint64_t map = field(object, l_.heap_object_map);
    uint16_t t = 0;
    if (!is_heap_object(map) || !read_(map - kHeapObjectTag + l_.map_instance_type, &t, sizeof t)) return std::nullopt;
    return t;
  }

  bool is_string(uint64_t object) const {
    auto t = type(object);
    return t && *t < l_.first_nonstring;
  }

  // Visits code units [from, from + count) of string `object` in order,
  // as runs of bytes (`width` 1 or 2 per unit) given to `visit`.
  template <typename Visit>
  bool units(uint64_t object, uint32_t from, uint32_t count, Visit&& visit, int depth = 0) const {
    auto t = type(object);
    if (!t || *t >= l_.first_nonstring || depth > kMaxDepth) return false;
    int32_t length = 0;
    if (!read_(object - kHeapObjectTag + l_.string_length, &length, sizeof length) || length < 0) return false;
    count = std::min(count, static_cast<uint32_t>(length) > from ? static_cast<uint32_t>(length) - from : 0u);
    uint16_t representation = *t & l_.representation_mask;
    bool one_byte = (*t & l_.encoding_mask) == l_.one_byte_tag;
    auto chars = [&](uint64_t at) {  // the units lie in one run from `at`
      size_t width = one_byte ? 1 : 2;
      std::vector<uint8_t> bytes;
      for (uint32_t done = 0; done < count;) {
        uint32_t n = std::min(count - done, kUnitsPerRead);
        bytes.resize(n * width);
        if (!read_(at + (from + done) * width, bytes.data(), bytes.size())) return false;
        visit(bytes.data(), n, width);
        done += n;
      }
      return true;
    };
    if (representation == l_.seq_tag)
      return chars(object - kHeapObjectTag + (one_byte ? l_.seq_one_byte_chars : l_.seq_two_byte_chars));
    if (representation == l_.external_tag) {
      // Outside the heap (node's own modules' sources, in its binary):
      // the string keeps where, past its resource, unless it is an
      // uncached one (a short string).
      uint64_t data = 0;
      if ((*t & kUncachedExternalMask) ||
          !read_(object - kHeapObjectTag + l_.external_resource + 8, &data, sizeof data))
        return false;
      return chars(data);
    }
    if (representation == l_.cons_tag) {
      uint64_t first = field(object, l_.cons_first), second = field(object, l_.cons_second);
      int32_t first_length = 0;
      if (!read_(first - kHeapObjectTag + l_.string_length, &first_length, sizeof first_length) || first_length < 0)
        return false;
      uint32_t split = static_cast<uint32_t>(first_length);
      if (from < split && !units(first, from, std::min(count, split - from), visit, depth + 1)) return false;
      if (from + count > split)
        return units(second, from > split ? from - split : 0, from + count - std::max(from, split), visit, depth + 1);
      return true;
    }
    if (representation == l_.thin_tag) return units(field(object, l_.thin_actual), from, count, visit, depth + 1);
    if (representation == l_.sliced_tag) {
      uint64_t offset = field(object, l_.sliced_offset);
      if (!is_small_integer(offset)) return false;
      return units(field(object, l_.sliced_parent), from + static_cast<uint32_t>(offset >> l_.smi_shift), count, visit,
                   depth + 1);
    }
    return false;
  }

  // The bytecodes of BytecodeArray `array`.
  std::optional<std::vector<uint8_t>> bytecodes(uint64_t array) const {
    uint64_t length = field(array, l_.array_length);
    if (!is_small_integer(length)) return std::nullopt;
    auto n = static_cast<int64_t>(length) >> l_.smi_shift;
    if (n < 0 || n > kMaxTableBytes) return std::nullopt;
    std::vector<uint8_t> out(static_cast<size_t>(n));
    if (n && !read_(array + l_.bytecode_start, out.data(), out.size())) return std::nullopt;
    return out;
  }

  // Element `i` of FixedArray `array` (any FixedArrayBase of tagged values).
  uint64_t element(uint64_t array, uint64_t i) const { return field(array, l_.array_data + 8 * i); }

  // The bytes of ByteArray `array`.
  std::optional<std::vector<uint8_t>> bytes(uint64_t array) const {
    if (type(array) != l_.byte_array_type) return std::nullopt;
    uint64_t length = field(array, l_.array_length);
    if (!is_small_integer(length)) return std::nullopt;
    auto n = static_cast<int64_t>(length) >> l_.smi_shift;
    if (n < 0 || n > kMaxTableBytes) return std::nullopt;
    std::vector<uint8_t> out(static_cast<size_t>(n));
    if (n && !read_(array - kHeapObjectTag + l_.array_data, out.data(), out.size())) return std::nullopt;
    return out;
  }

  std::optional<std::string> string(uint64_t object) const {
    std::string out;
    auto append = [&](const uint8_t* bytes, uint32_t n, size_t width) {
      for (uint32_t i = 0; i < n; ++i)
        flamegraph::append_utf8(out,
                                width == 1 ? bytes[i] : static_cast<uint32_t>(bytes[2 * i] | bytes[2 * i + 1] << 8));
    };
    if (!units(object, 0, kMaxChars, append)) return std::nullopt;
    return out;
  }

  // The function name a ScopeInfo holds. Past its context locals' names
  // and infos come, each only where flags (whose bits V8 does not
  // publish) say: the function's own name and its slot, the name V8
  // inferred for an anonymous function (Module._load), then the
  // function's start and end positions, two small integers. The first
  // non-empty string before those is the name.
  std::string scope_info_name(uint64_t scope_info) const {
    std::array<uint64_t, kScopeSlots> slots{};
    if (!read_(scope_info - kHeapObjectTag + l_.heap_object_map + 8, slots.data(), sizeof slots)) return {};
    uint64_t locals = slots[l_.scope_info_context_locals % kScopeSlots];
    if (!is_small_integer(locals)) return {};
    for (uint64_t i = l_.scope_info_first_vars + 2 * (locals >> l_.smi_shift); i + 1 < kScopeSlots; ++i) {
      if (is_small_integer(slots[i]) && is_small_integer(slots[i + 1])) break;  // the positions: no name
      if (is_string(slots[i]))
        if (std::string name = string(slots[i]).value_or(""); !name.empty()) return name;
    }
    return {};
  }

 private:
  const V8Layout& l_;
  const ReadMemory& read_;
};

// "node:internal/timers" stays whole; a path becomes its file name.
std::string script_display(const std::string& script) {
  if (script.find(':') != std::string::npos && script.find('/') != 0) return script;
  size_t slash = script.rfind('/');
  return slash == std::string::npos ? script : script.substr(slash + 1);
}

// The unsigned VLQ number at `at` of `bytes` (7 bits a byte, low first,
// the top bit set on all but the last), `at` moved past it.
std::optional<uint64_t> read_vlq(const std::vector<uint8_t>& bytes, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < bytes.size() && shift < 64; shift += 7) {
    uint8_t byte = bytes[at++];
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
  return std::nullopt;
}

// The offset of the bytecode whose baseline machine code holds
// `pc_offset` (-1: the prologue), by the code's bytecode offset table
// (unsigned VLQ sizes of machine code: the prologue's, then each
// bytecode's in order) and the bytecodes themselves, walked by `sizes`
// (V8's kBytecodeSizes: by operand scale, then bytecode).
std::optional<int64_t> baseline_bytecode_offset(const std::vector<uint8_t>& pcs, const std::vector<uint8_t>& bytecodes,
                                                const std::vector<uint8_t>& sizes, int64_t pc_offset) {
  size_t count = sizes.size() / 3, at = 0;
  auto next = [&](int64_t& out) {
    auto v = read_vlq(pcs, at);
    out = static_cast<int64_t>(v.value_or(0));
    return v.has_value();
  };
  int64_t end = 0, size = 0;
  if (!count || !next(end)) return std::nullopt;
  if (pc_offset < end) return -1;
  for (size_t offset = 0; offset < bytecodes.size();) {
    if (!next(size)) return std::nullopt;
    end += size;
    // Wide, ExtraWide and their debug-break forms come first: a prefix
    // scales the operands of the bytecode after it (by 2, then 4).
    size_t scale = 0, bytecode = bytecodes[offset], length = 0;
    if (bytecode < 4) {
      scale = bytecode % 2 == 0 ? 1 : 2;
      if (offset + 1 >= bytecodes.size()) return std::nullopt;
      bytecode = bytecodes[offset + 1];
      length = 1;
    }
    if (bytecode >= count || !sizes[scale * count + bytecode]) return std::nullopt;
    if (pc_offset < end) return static_cast<int64_t>(offset);
    offset += length + sizes[scale * count + bytecode];
  }
  return std::nullopt;
}

// A source position (V8's SourcePosition): bit 0 set for one outside any
// script; then the script offset + 1 (30 bits) and the inlining id + 1
// (16 bits: 0 for code of the frame's own function).
int64_t script_offset(uint64_t position) {
  return position & 1 ? -1 : static_cast<int64_t>(position >> 1 & ((1u << 30) - 1)) - 1;
}
uint32_t inlining_id(uint64_t position) { return position >> 31 & 0xffff; }

// The source position of `code_offset` in a source position table: the
// last entry at or before it. Entries are pairs of zigzag VLQ numbers, each
// a difference from the entry before: the code offset (negated, minus
// one, for an expression rather than a statement), then the position. The
// first counts from offset -1 (V8's kFunctionEntryBytecodeOffset, where a
// bytecode table puts its function's entry).
std::optional<uint64_t> table_position(const std::vector<uint8_t>& table, int64_t code_offset) {
  size_t at = 0;
  auto next = [&](int64_t& out) {  // zigzag: the sign in the lowest bit
    auto v = read_vlq(table, at);
    out = static_cast<int64_t>(v.value_or(0) >> 1) ^ -static_cast<int64_t>(v.value_or(0) & 1);
    return v.has_value();
  };
  int64_t offset = -1, position = 0, delta = 0;
  std::optional<uint64_t> found;
  while (at < table.size()) {
    if (!next(delta)) break;
    offset += delta >= 0 ? delta : -(delta + 1);
    if (!next(delta)) break;
    position += delta;
    if (offset > code_offset) break;
    found = static_cast<uint64_t>(position);
  }
  return found;
}

}  // namespace

std::expected<V8Function, std::string> read_v8_function(const V8Layout& l, uint64_t shared, const ReadMemory& read) {
  Reader r(l, read);
  if (r.type(shared) != l.shared_function_info_type) return std::unexpected("not a function (moved or freed)");
  V8Function f;
  uint64_t name = r.field(shared, l.sfi_name_or_scope_info);
  if (auto t = r.type(name); t && *t < l.first_nonstring)
    f.name = r.string(name).value_or("");
  else if (t == l.scope_info_type)
    f.name = r.scope_info_name(name);
  uint64_t script = r.field(shared, l.sfi_script_or_debug_info);
  if (r.type(script) == l.script_type) {
    f.script = r.string(r.field(script, l.script_name)).value_or("");
    f.script_object = script;
  }
  // A script's top level: where a function's ScopeInfo holds its name,
  // its holds the script's.
  if (f.name == f.script) f.name.clear();
  return f;
}

namespace {

using Places = std::expected<std::vector<V8Place>, std::string>;

// Slots of a FeedbackVector looked through for code optimized on stack replacement.
constexpr size_t kFeedbackSlots = 128;

// The place of a frame of function `shared` (a SharedFunctionInfo): at
// `offset` of its bytecode if `kind` is EMBER_FRAME_V8_BYTECODE, at pc
// offset `offset` of its baseline code if EMBER_FRAME_V8_PC.
Places function_place(const Reader& r, const V8Layout& l, uint64_t shared, uint64_t kind, int64_t offset,
                      const ReadMemory& read) {
  if (r.type(shared) != l.shared_function_info_type) return std::unexpected("function moved or freed");
  if (kind != EMBER_FRAME_V8_BYTECODE && kind != EMBER_FRAME_V8_PC) return Places{{{shared, -1}}};
  uint64_t bytecode = r.field(shared, l.sfi_function_data);
  if (is_small_integer(bytecode)) return Places{{{shared, -1}}};  // a builtin's id: no source
  uint64_t baseline = 0;
  if (r.type(bytecode) == l.code_type) {
    baseline = bytecode;
    bytecode = r.field(baseline, l.code_deoptimization_data);  // a baseline Code's: its bytecode
  }
  if (r.type(bytecode) != l.bytecode_array_type) return std::unexpected("bytecode flushed");
  if (kind == EMBER_FRAME_V8_PC) {
    // Baseline code: the bytecode whose machine code holds the pc.
    uint32_t flags = 0;
    if (!baseline || !read(baseline - kHeapObjectTag + l.code_flags, &flags, sizeof flags) ||
        (flags >> l.code_kind_shift & l.code_kind_mask) != l.code_kind_baseline)
      return std::unexpected("baseline code flushed");
    auto pcs = r.bytes(r.field(baseline, l.code_source_positions));
    auto bytecodes = r.bytecodes(bytecode);
    auto at = pcs && bytecodes ? baseline_bytecode_offset(*pcs, *bytecodes, l.bytecode_sizes, offset) : std::nullopt;
    if (!at) return std::unexpected("baseline code's pc not found among its bytecodes");
    offset = *at;
  }
  auto table = r.bytes(r.field(bytecode, l.bytecode_source_positions));
  if (!table) return std::unexpected("no position table (V8 keeps them lazily)");
  auto at = table_position(*table, offset);
  return Places{{{shared, at ? script_offset(*at) : -1}}};
}

// The places of a frame of optimized Code `code` at pc offset `pc_offset`
// (-1: unknown). The function is its DeoptimizationData's; a position in
// a function inlined into it names that function (by its index among the
// data's literals) and the position of its call, which may be in another
// inlined function.
Places optimized_places(const Reader& r, const V8Layout& l, uint64_t code, int64_t pc_offset) {
  if (r.type(code) != l.code_type) return std::unexpected("code moved or freed");
  uint64_t data = r.field(code, l.code_deoptimization_data);
  if (r.type(data) != l.fixed_array_type) return std::unexpected("optimized code without its deoptimization data");
  uint64_t shared = r.element(data, l.deopt_function);
  if (r.type(shared) != l.shared_function_info_type) return std::unexpected("optimized code's function unreadable");
  if (pc_offset < 0) return Places{{{shared, -1}}};
  auto table = r.bytes(r.field(code, l.code_source_positions));
  auto at = table ? table_position(*table, pc_offset) : std::nullopt;
  if (!at) return std::unexpected("no position for the pc in its code's table");
  std::vector<V8Place> places;
  std::optional<std::vector<uint8_t>> inlinings;
  uint64_t literals = r.element(data, l.deopt_literals);
  for (uint64_t p = *at; places.size() < kMaxInlined;) {
    uint32_t id = inlining_id(p);
    if (id == 0) {
      places.push_back({shared, script_offset(p)});
      return places;
    }
    if (!inlinings) inlinings = r.bytes(r.element(data, l.deopt_inlining_positions));
    // InliningPosition: its call's SourcePosition, then the inlined
    // function's index among the literals (an int), 16 bytes in all.
    size_t entry = (id - 1) * 16;
    if (!inlinings || entry + 12 > inlinings->size()) return std::unexpected("inlining table unreadable");
    uint64_t call = 0;
    int32_t function = 0;
    std::memcpy(&call, inlinings->data() + entry, sizeof call);
    std::memcpy(&function, inlinings->data() + entry + 8, sizeof function);
    uint64_t inlined = r.element(literals, static_cast<uint32_t>(function)) & ~uint64_t{2};  // a weak reference's bit
    if (function < 0 || r.type(inlined) != l.shared_function_info_type)
      return std::unexpected("inlined function unreadable");
    places.push_back({inlined, script_offset(p)});
    p = call;
  }
  return std::unexpected("inlined deeper than ember reads");
}

// The places of a frame of JSFunction `function` at `pc`, in code optimized
// on stack replacement: among the weak references of its FeedbackVector,
// the optimized Code that holds the pc and is the function's.
Places osr_places(const Reader& r, const V8Layout& l, uint64_t function, uint64_t pc, const ReadMemory& read) {
  if (!l.feedback_vector_type)
    return std::unexpected("code optimized on stack replacement (not looked for in this V8)");
  uint64_t shared = r.field(function, l.jsfunction_shared);
  uint64_t vector = r.field(r.field(function, l.jsfunction_feedback_cell), l.feedback_cell_value);
  std::array<uint64_t, kFeedbackSlots> slots{};
  if (r.type(shared) != l.shared_function_info_type || r.type(vector) != l.feedback_vector_type ||
      !read(vector - kHeapObjectTag, slots.data(), sizeof slots))
    return std::unexpected("function moved or freed");
  for (uint64_t slot : slots) {
    uint64_t code = slot & ~uint64_t{2};  // a weak reference's bit
    if ((slot & kTagMask) != 3 || r.type(code) != l.code_type) continue;
    uint32_t flags = 0, size = 0;
    uint64_t start = code - kHeapObjectTag + l.code_instruction_start;
    if (!read(code - kHeapObjectTag + l.code_flags, &flags, sizeof flags) ||
        !read(code - kHeapObjectTag + l.code_instruction_size, &size, sizeof size) ||
        (!l.instructions_inline && !read(start, &start, sizeof start)))
      continue;
    if ((flags >> l.code_kind_shift & l.code_kind_mask) <= l.code_kind_baseline || pc < start || pc - start >= size)
      continue;
    auto places = optimized_places(r, l, code, static_cast<int64_t>(pc - start));
    if (places && !places->empty() && places->back().shared == shared) return places;
  }
  return std::unexpected("code optimized on stack replacement not found");
}

}  // namespace

std::expected<std::vector<V8Place>, std::string> read_v8_places(const V8Layout& l, uint64_t word, uint64_t position,
                                                                const ReadMemory& read) {
  Reader r(l, read);
  uint64_t object = word & EMBER_FRAME_V8_MASK, kind = position & ~EMBER_FRAME_V8_MASK;
  auto offset = static_cast<int64_t>(position & EMBER_FRAME_V8_MASK);
  if (object & EMBER_V8_FUNCTION) return osr_places(r, l, object & ~EMBER_V8_FUNCTION, offset, read);
  if (object & EMBER_V8_CODE)
    return optimized_places(r, l, object & ~EMBER_V8_CODE, kind == EMBER_FRAME_V8_PC ? offset : -1);
  return function_place(r, l, object, kind, offset, read);
}

std::expected<std::vector<uint32_t>, std::string> read_v8_line_ends(const V8Layout& l, uint64_t script,
                                                                    const ReadMemory& read) {
  Reader r(l, read);
  std::vector<uint32_t> ends;
  uint64_t kept = r.field(script, l.script_line_ends);
  if (r.type(kept) == l.fixed_array_type) {
    uint64_t length = r.field(kept, l.array_length);
    auto n = static_cast<int64_t>(length) >> l.smi_shift;
    if (!is_small_integer(length) || n < 0 || n > kMaxTableBytes) return std::unexpected("line ends unreadable");
    std::vector<uint64_t> words(static_cast<size_t>(n));
    if (n && !read(kept - kHeapObjectTag + l.array_data, words.data(), words.size() * 8))
      return std::unexpected("line ends unreadable");
    for (uint64_t w : words) ends.push_back(static_cast<uint32_t>(w >> l.smi_shift));
    return ends;
  }
  uint32_t at = 0;
  auto newlines = [&](const uint8_t* bytes, uint32_t n, size_t width) {
    for (uint32_t i = 0; i < n; ++i, ++at)
      if (bytes[i * width] == '\n' && (width == 1 || bytes[i * width + 1] == 0)) ends.push_back(at);
  };
  if (!r.units(r.field(script, l.script_source), 0, kMaxSourceUnits, newlines))
    return std::unexpected("script source unreadable");
  return ends;
}

int v8_line(const std::vector<uint32_t>& line_ends, int64_t script_offset) {
  if (script_offset < 0) return 0;
  return 1 + static_cast<int>(std::lower_bound(line_ends.begin(), line_ends.end(), script_offset) - line_ends.begin());
}

void V8Frames::add_process(uint32_t pid) {
  if (processes_table_.closed()) return;
  auto found = find_v8(static_cast<pid_t>(pid));
  if (!found) {
    stats_.refused[pid] = found.error();
    return;
  }
  if (!*found) return;
  V8Process& v8 = **found;
  v8.frames.lines = lines_ && v8.layout.positions;
  if (lines_ && !v8.layout.positions) stats_.unpositioned[pid] = v8.no_positions;
  bool known = processes_.contains(pid);
  if (!processes_table_.put(pid, &v8.frames)) {
    stats_.refused[pid] = "the walker's table of processes is full";
    return;
  }
  processes_[pid].v8 = std::move(v8);
  if (!known) ++stats_.processes;
}

void V8Frames::remove_process(uint32_t pid) {
  if (processes_.erase(pid)) processes_table_.erase(pid);
  stats_.refused.erase(pid);
  stats_.unpositioned.erase(pid);
}

std::optional<flamegraph::Frame> V8Frames::function_frame(uint32_t pid, Process& p, uint64_t shared,
                                                          int64_t script_offset, bool positioned) {
  ReadMemory read = process_reader(static_cast<pid_t>(pid));
  auto [cached, added] = p.functions.try_emplace(shared);
  if (added)
    if (auto f = read_v8_function(p.v8.layout, shared, read)) cached->second = std::move(*f);
  if (!cached->second) return std::nullopt;
  const V8Function& f = *cached->second;
  std::string where = script_display(f.script);
  if (positioned && f.script_object) {  // a builtin has no script, nor lines
    auto ends = p.line_ends.find(f.script_object);
    if (ends == p.line_ends.end())
      ends = p.line_ends.emplace(f.script_object, read_v8_line_ends(p.v8.layout, f.script_object, read)).first;
    if (!ends->second)
      ++stats_.unlined[ends->second.error()];
    else if (int line = v8_line(*ends->second, script_offset); line > 0 && !where.empty()) {
      where += ":" + std::to_string(line);
      ++stats_.lines;
    } else {
      ++stats_.unlined["position unknown"];
    }
  }
  std::string name = f.name.empty() ? "(anonymous)" : f.name;
  if (!where.empty()) name += " (" + where + ")";
  return flamegraph::Frame{std::move(name), flamegraph::FrameKind::JavaScript, f.script};
}

std::vector<flamegraph::Frame> V8Frames::frames(uint32_t pid, uint64_t word, uint64_t position) {
  auto process = processes_.find(pid);
  if (process == processes_.end()) {
    ++stats_.unnamed;
    return {{"[js: process not read]", flamegraph::FrameKind::JavaScript, {}}};
  }
  Process& p = process->second;
  bool positioned = p.v8.frames.lines;
  std::vector<V8Place> places{{word & EMBER_FRAME_V8_MASK, -1}};
  if (position || (word & EMBER_V8_CODE)) {
    auto read = read_v8_places(p.v8.layout, word, position, process_reader(static_cast<pid_t>(pid)));
    if (read) {
      places = std::move(*read);
    } else {
      if (positioned) ++stats_.unlined[read.error()];
      positioned = false;
      places.clear();
      if (word & EMBER_V8_FUNCTION) {  // its name, without a line
        ReadMemory memory = process_reader(static_cast<pid_t>(pid));
        uint64_t function = word & EMBER_FRAME_V8_MASK & ~EMBER_V8_FUNCTION, shared = 0;
        if (memory(function - 1 + p.v8.layout.jsfunction_shared, &shared, sizeof shared))
          places.push_back({shared, -1});
      } else if (!(word & EMBER_V8_CODE)) {
        places.push_back({word & EMBER_FRAME_V8_MASK, -1});
      }
    }
  } else if (positioned) {
    ++stats_.unlined["no position kept (an interpreted leaf whose offset V8 kept only in a register it reused, "
                     "code replaced since the frame began)"];
    positioned = false;
  }
  std::vector<flamegraph::Frame> out;
  for (const V8Place& place : places) {
    auto frame = function_frame(pid, p, place.shared, place.script_offset, positioned);
    if (!frame) break;
    out.push_back(std::move(*frame));
    ++stats_.frames;
  }
  if (out.empty()) {
    ++stats_.unnamed;
    return {{"[js: function unreadable]", flamegraph::FrameKind::JavaScript, {}}};
  }
  return out;
}

}  // namespace ember::runtimes
