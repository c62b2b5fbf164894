#include "user/runtimes/python_frames.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "flamegraph/utf8.h"

namespace ember::runtimes {
namespace {

// Names longer than this many characters are cut: a frame name, not a text.
constexpr uint64_t kMaxChars = 1024;
// Line tables read at most: a module's <module> of tens of thousands of lines.
constexpr uint64_t kMaxLineTable = 1 << 20;

// PyUnicodeObject's state bits (all versions 3.8 to 3.14).
constexpr uint32_t kKindMask = 0x1c, kKindShift = 2, kCompact = 0x20, kAscii = 0x40;
constexpr size_t kStringLength = 16, kStringState = 32;
// PyBytesObject: ob_size, then the bytes.
constexpr size_t kBytesSize = 16, kBytesData = 32;
constexpr size_t kObjectType = 8;  // ob_type

template <typename T>
bool read_value(const ReadMemory& read, uint64_t address, T& out) {
  return read(address, &out, sizeof out);
}

// A str object's text, as UTF-8.
std::expected<std::string, std::string> read_string(const ember_python_layout& l, uint64_t address,
                                                    const ReadMemory& read) {
  uint64_t length = 0;
  uint32_t state = 0;
  if (!address || !read_value(read, address + kStringLength, length) || !read_value(read, address + kStringState, state))
    return std::unexpected("a name is unreadable");
  if (!(state & kCompact)) return std::unexpected("a name is not a compact string");
  uint32_t width = (state & kKindMask) >> kKindShift;
  if (width != 1 && width != 2 && width != 4) return std::unexpected("a name has no known character width");
  length = std::min(length, kMaxChars);
  std::vector<uint8_t> data(length * width);
  uint64_t at = address + static_cast<uint64_t>((state & kAscii) ? l.ascii_data : l.compact_data);
  if (!data.empty() && !read(at, data.data(), data.size())) return std::unexpected("a name's characters are unreadable");
  std::string out;
  out.reserve(length);
  for (uint64_t i = 0; i < length; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, data.data() + i * width, width);  // little-endian
    flamegraph::append_utf8(out, std::min<uint32_t>(c, 0x10ffff));
  }
  return out;
}

// CPython's variable-length integers in 3.11+ location tables: 6 bits a
// byte, low first, 0x40 set on all but the last.
struct TableReader {
  std::string_view t;
  size_t at = 0;
  bool more() const { return at < t.size(); }
  uint8_t byte() { return more() ? static_cast<uint8_t>(t[at++]) : 0; }
  uint64_t varint() {
    uint8_t b = byte();
    uint64_t v = b & 63;
    for (unsigned shift = 6; (b & 64) && more() && shift < 60; shift += 6) {
      b = byte();
      v |= uint64_t{b & 63u} << shift;
    }
    return v;
  }
  int64_t svarint() {
    uint64_t v = varint();
    return (v & 1) ? -static_cast<int64_t>(v >> 1) : static_cast<int64_t>(v >> 1);
  }
};

// 3.8, 3.9: co_lnotab, pairs (bytecode bytes, line delta) from line first.
int line_lnotab(std::string_view t, int line, int64_t offset) {
  int64_t address = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    address += static_cast<uint8_t>(t[i]);
    if (address > offset) break;
    line += static_cast<int8_t>(t[i + 1]);
  }
  return line;
}

// 3.10: co_linetable, pairs (bytes the range covers, line delta; -128: no line).
int line_310(std::string_view t, int line, int64_t offset) {
  int64_t start = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    int64_t end = start + static_cast<uint8_t>(t[i]);
    auto delta = static_cast<int8_t>(t[i + 1]);
    if (delta != -128) line += delta;
    if (offset >= start && offset < end) return delta == -128 ? 0 : line;
    start = end;
  }
  return 0;
}

// 3.11+: the location table, an entry per run of instructions.
int line_311(std::string_view t, int line, int64_t index) {
  TableReader r{t};
  int64_t start = 0;
  while (r.more()) {
    uint8_t first = r.byte();
    if (!(first & 0x80)) return 0;  // not at an entry's start: a table ember does not know
    int code = first >> 3 & 15;
    int64_t end = start + (first & 7) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      line += static_cast<int>(r.svarint());
      r.varint();  // end line, column and end column
      r.varint();
      r.varint();
    } else if (code == 13) {
      line += static_cast<int>(r.svarint());
    } else if (code >= 10) {
      line += code - 10;
      r.byte();  // column and end column
      r.byte();
    } else {
      r.byte();  // the column
    }
    if (index >= start && index < end) return has_line ? line : 0;
    start = end;
  }
  return 0;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::expected<PythonCode, std::string> read_python_code(const ember_python_layout& l, uint64_t code_type,
                                                        uint64_t address, const ReadMemory& read, bool lines) {
  int16_t fields[] = {l.code_name, l.code_qualname, l.code_filename, l.code_firstlineno, l.code_linetable,
                      l.code_firsttraceable};
  int16_t last = *std::max_element(std::begin(fields), std::end(fields));
  if (!address || last < 0) return std::unexpected("no code object");
  std::vector<uint8_t> code(static_cast<size_t>(last) + 8);
  if (!read(address, code.data(), code.size())) return std::unexpected("its code object is unreadable (freed?)");
  auto pointer = [&](int16_t at) {
    uint64_t v = 0;
    std::memcpy(&v, code.data() + at, sizeof v);
    return v;
  };
  auto integer = [&](int16_t at) {
    int32_t v = 0;
    std::memcpy(&v, code.data() + at, sizeof v);
    return v;
  };
  if (pointer(kObjectType) != code_type) return std::unexpected("it is not a code object (freed and reused?)");
  PythonCode c;
  auto name = read_string(l, pointer(l.code_qualname >= 0 ? l.code_qualname : l.code_name), read);
  if (!name) return std::unexpected(name.error());
  auto file = read_string(l, pointer(l.code_filename), read);
  if (!file) return std::unexpected(file.error());
  c.qualname = std::move(*name);
  c.file = std::move(*file);
  c.first_line = integer(l.code_firstlineno);
  if (l.code_firsttraceable >= 0) c.first_traceable = integer(l.code_firsttraceable);
  if (lines) {
    uint64_t table = pointer(l.code_linetable), size = 0;
    if (table && read_value(read, table + kBytesSize, size) && size <= kMaxLineTable) {
      c.line_table.resize(size);
      if (size && !read(table + kBytesData, c.line_table.data(), size)) c.line_table.clear();
    }
  }
  return c;
}

int python_line(uint16_t version, std::string_view table, int first_line, int64_t index) {
  if (index < 0) return 0;
  if (version < 0x030a) return line_lnotab(table, first_line, index * 2);
  if (version == 0x030a) return line_310(table, first_line, index * 2);
  return line_311(table, first_line, index);
}

void PythonFrames::add_process(uint32_t pid) {
  if (processes_table_.closed()) return;
  bool known = processes_.contains(pid);
  remove_process(pid);  // an exec: another image, maybe another interpreter
  auto found = find_python(static_cast<pid_t>(pid));
  if (!found) {
    stats_.refused[pid] = found.error();
    return;
  }
  if (!*found) return;
  ember_python_process entry{};
  entry.layout = (*found)->layout;
  const ember_python_layout& l = entry.layout;
  // The walker reads a frame in one read: up to the last field it uses.
  int last = std::max({l.frame_previous + 8, l.frame_code + 8, l.frame_instr + 8, l.frame_owner + 1, l.frame_is_entry + 1});
  entry.frame_bytes = static_cast<uint16_t>((last + 7) / 8 * 8);
  entry.runtime = (*found)->runtime;
  entry.eval_start = (*found)->eval_start;
  entry.eval_end = (*found)->eval_end;
  entry.thread_pointer_offset = (*found)->thread_pointer_offset;
  if (entry.frame_bytes > 128 || !processes_table_.put(pid, &entry)) {
    stats_.refused[pid] = entry.frame_bytes > 128 ? "a frame layout past 128 bytes" : "the walker's table of processes is full";
    return;
  }
  processes_[pid].python = std::move(**found);
  if (!known) ++stats_.processes;
}

void PythonFrames::remove_process(uint32_t pid) {
  if (processes_.erase(pid)) processes_table_.erase(pid);
  stats_.refused.erase(pid);
}

std::optional<flamegraph::Frame> PythonFrames::frame(uint32_t pid, uint64_t word) {
  auto process = processes_.find(pid);
  uint64_t address = (word & EMBER_PY_CODE_MASK) << 3;
  auto unnamed = [&](const std::string& why) {
    ++stats_.unnamed;
    return flamegraph::Frame{"[python: " + why + "]", flamegraph::FrameKind::Python, {}};
  };
  if (process == processes_.end()) return unnamed("process not read");
  Process& p = process->second;
  auto [cached, added] = p.code.try_emplace(address);
  if (added) {
    auto code = read_python_code(p.python.layout, p.python.code_type, address, process_reader(static_cast<pid_t>(pid)),
                                 lines_);
    if (code) cached->second = std::move(*code);
  }
  if (!cached->second) return unnamed("code object unreadable");
  const PythonCode& code = *cached->second;
  uint64_t field = word >> EMBER_PY_INSTR_SHIFT & EMBER_PY_INSTR_UNKNOWN;
  int64_t index = field == EMBER_PY_INSTR_UNKNOWN ? -1 : static_cast<int64_t>(field) - 1;
  // CPython hides a frame that has not run its first instruction yet
  // (_PyFrame_IsIncomplete): a generator's is whole from its creation.
  if (field != EMBER_PY_INSTR_UNKNOWN && !(word & EMBER_PY_FRAME_GENERATOR) && index < code.first_traceable)
    return std::nullopt;
  ++stats_.frames;
  std::string where = basename_of(code.file);
  if (lines_) {
    int line = python_line(p.python.layout.version, code.line_table, code.first_line, index);
    if (line > 0) where += ":" + std::to_string(line);
  }
  return flamegraph::Frame{code.qualname + " (" + where + ")", flamegraph::FrameKind::Python, code.file};
}

}  // namespace ember::runtimes
