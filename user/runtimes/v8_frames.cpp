#include "user/runtimes/v8_frames.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <array>
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

constexpr uint64_t kTagMask = 3, kHeapObjectTag = 1;

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

  // Characters [from, from + count) of string `object` appended to `out`.
  bool append_string(uint64_t object, uint32_t from, uint32_t count, std::string& out, int depth = 0) const {
    auto t = type(object);
    if (!t || *t >= l_.first_nonstring || depth > kMaxDepth) return false;
    int32_t length = 0;
    if (!read_(object - kHeapObjectTag + l_.string_length, &length, sizeof length) || length < 0) return false;
    count = std::min(count, static_cast<uint32_t>(length) > from ? static_cast<uint32_t>(length) - from : 0u);
    uint16_t representation = *t & l_.representation_mask;
    bool one_byte = (*t & l_.encoding_mask) == l_.one_byte_tag;
    if (representation == l_.seq_tag) {
      size_t width = one_byte ? 1 : 2;
      std::vector<uint8_t> bytes(count * width);
      uint64_t chars = object - kHeapObjectTag + (one_byte ? l_.seq_one_byte_chars : l_.seq_two_byte_chars);
      if (!bytes.empty() && !read_(chars + from * width, bytes.data(), bytes.size())) return false;
      for (uint32_t i = 0; i < count; ++i)
        flamegraph::append_utf8(out, one_byte ? bytes[i] : static_cast<uint32_t>(bytes[2 * i] | bytes[2 * i + 1] << 8));
      return true;
    }
    if (representation == l_.cons_tag) {
      uint64_t first = field(object, l_.cons_first), second = field(object, l_.cons_second);
      int32_t first_length = 0;
      if (!read_(first - kHeapObjectTag + l_.string_length, &first_length, sizeof first_length) || first_length < 0)
        return false;
      uint32_t split = static_cast<uint32_t>(first_length);
      if (from < split && !append_string(first, from, std::min(count, split - from), out, depth + 1)) return false;
      if (from + count > split)
        return append_string(second, from > split ? from - split : 0, from + count - std::max(from, split), out,
                             depth + 1);
      return true;
    }
    if (representation == l_.thin_tag) return append_string(field(object, l_.thin_actual), from, count, out, depth + 1);
    if (representation == l_.sliced_tag) {
      uint64_t offset = field(object, l_.sliced_offset);
      if (!is_small_integer(offset)) return false;
      return append_string(field(object, l_.sliced_parent), from + static_cast<uint32_t>(offset >> l_.smi_shift), count,
                           out, depth + 1);
    }
    return false;  // external: its characters lie outside V8's heap
  }

  std::optional<std::string> string(uint64_t object) const {
    std::string out;
    if (!append_string(object, 0, kMaxChars, out)) return std::nullopt;
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
  if (r.type(script) == l.script_type) f.script = r.string(r.field(script, l.script_name)).value_or("");
  // A script's top level: where a function's ScopeInfo holds its name,
  // its holds the script's.
  if (f.name == f.script) f.name.clear();
  return f;
}

void V8Frames::add_process(uint32_t pid) {
  auto found = find_v8(static_cast<pid_t>(pid));
  if (!found) {
    stats_.refused[pid] = found.error();
    return;
  }
  if (!*found) return;
  bool known = processes_.contains(pid);
  if (bpf_map_update_elem(processes_fd_, &pid, &(*found)->frames, BPF_ANY) != 0) {
    stats_.refused[pid] = "the walker's table of processes is full";
    return;
  }
  processes_[pid].v8 = std::move(**found);
  if (!known) ++stats_.processes;
}

void V8Frames::remove_process(uint32_t pid) {
  if (processes_.erase(pid)) bpf_map_delete_elem(processes_fd_, &pid);
  stats_.refused.erase(pid);
}

flamegraph::Frame V8Frames::frame(uint32_t pid, uint64_t word) {
  auto process = processes_.find(pid);
  if (process == processes_.end()) {
    ++stats_.unnamed;
    return {"[js: process not read]", flamegraph::FrameKind::JavaScript, {}};
  }
  auto [cached, added] = process->second.functions.try_emplace(word);
  if (added) {
    auto f = read_v8_function(process->second.v8.layout, word & EMBER_FRAME_V8_MASK,
                              process_reader(static_cast<pid_t>(pid)));
    if (f) {
      std::string name = f->name.empty() ? "(anonymous)" : f->name;
      if (!f->script.empty()) name += " (" + script_display(f->script) + ")";
      cached->second = flamegraph::Frame{std::move(name), flamegraph::FrameKind::JavaScript, f->script};
    }
  }
  if (!cached->second) {
    ++stats_.unnamed;
    return {"[js: function unreadable]", flamegraph::FrameKind::JavaScript, {}};
  }
  ++stats_.frames;
  return *cached->second;
}

}  // namespace ember::runtimes
