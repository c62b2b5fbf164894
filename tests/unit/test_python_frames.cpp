// Python frame naming: each version's line table read as CPython reads it
// (tests/fixtures/python/lines-3.X.txt: json.decoder's code objects and
// the line CPython gives each of their instructions, written by each
// interpreter with make_lines.py), and code objects read from a process's
// memory, including what a freed or garbled one looks like.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "user/runtimes/python_frames.h"
#include "user/runtimes/python_layout.h"
#include "fake_memory.h"

using namespace ember::runtimes;
namespace fs = std::filesystem;

namespace {

fs::path fixture_dir() {
  fs::path dir = "tests/fixtures/python";
  return fs::exists(dir) ? dir : fs::path(__FILE__).parent_path().parent_path() / "fixtures/python";
}

std::string from_hex(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}


template <typename T>
void set(std::vector<uint8_t>& object, size_t at, T value) {
  std::memcpy(object.data() + at, &value, sizeof value);
}

// A compact str object with `chars` characters of `width` bytes.
std::vector<uint8_t> str_object(const ember_python_layout& l, const std::vector<uint32_t>& chars, uint32_t width) {
  bool ascii = width == 1 && std::all_of(chars.begin(), chars.end(), [](uint32_t c) { return c < 0x80; });
  size_t data = static_cast<size_t>(ascii ? l.ascii_data : l.compact_data);
  std::vector<uint8_t> o(data + (chars.size() + 1) * width);
  set<uint64_t>(o, 16, chars.size());
  set<uint32_t>(o, 32, 0x20 | width << 2 | (ascii ? 0x40 : 0));
  for (size_t i = 0; i < chars.size(); ++i) std::memcpy(o.data() + data + i * width, &chars[i], width);
  return o;
}

std::vector<uint32_t> ascii(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("python line tables: each instruction's line as CPython gives it, every version from 3.8") {
  int versions = 0;
  for (uint16_t v = kPythonOldest; v <= kPythonNewest; ++v) {
    fs::path path = fixture_dir() / ("lines-3." + std::to_string(v & 0xff) + ".txt");
    if (!fs::exists(path)) continue;  // no interpreter of that version wrote one
    ++versions;
    std::ifstream in(path);
    std::string row;
    int codes = 0;
    size_t instructions = 0;
    while (std::getline(in, row)) {
      if (row.starts_with("#")) continue;
      std::istringstream fields(row);
      int first = 0;
      std::string hex, lines;
      fields >> first >> hex >> lines;
      std::string table = from_hex(hex);
      std::istringstream each(lines);
      std::string line;
      for (int64_t index = 0; std::getline(each, line, ','); ++index, ++instructions) {
        INFO("3." << (v & 0xff) << " code at line " << first << ", instruction " << index);
        REQUIRE(python_line(v, table, first, index) == std::stoi(line));
      }
      ++codes;
    }
    CHECK(codes >= 10);
    CHECK(instructions >= 1000);
  }
  CHECK(versions >= 6);  // 3.8 to 3.14, as written on the development machines
  // Past the table, and before the first instruction: no line.
  CHECK(python_line(0x030b, "", 10, 0) == 0);
  CHECK(python_line(0x030b, "\x80", 10, -1) == 0);
}

TEST_CASE("python code objects: names read from the process, checked for their type") {
  for (uint16_t v : {uint16_t{0x030a}, uint16_t{0x030c}}) {
    ember_python_layout l = *python_layout(v);
    const uint64_t code_type = 0x7000, code_at = 0x10000, name_at = 0x20000, qualname_at = 0x30000,
                   file_at = 0x40000, table_at = 0x50000;
    FakeMemory m;
    std::vector<uint8_t> code(512);
    set<uint64_t>(code, 8, code_type);
    set<uint64_t>(code, static_cast<size_t>(l.code_name), name_at);
    if (l.code_qualname >= 0) set<uint64_t>(code, static_cast<size_t>(l.code_qualname), qualname_at);
    set<uint64_t>(code, static_cast<size_t>(l.code_filename), file_at);
    set<int32_t>(code, static_cast<size_t>(l.code_firstlineno), 42);
    set<uint64_t>(code, static_cast<size_t>(l.code_linetable), table_at);
    if (l.code_firsttraceable >= 0) set<int32_t>(code, static_cast<size_t>(l.code_firsttraceable), 3);
    m.put(code_at, code.data(), code.size());
    auto name = str_object(l, {'w', 0x3bb}, 2);  // "wλ": two bytes a character
    m.put(name_at, name.data(), name.size());
    auto qualname = str_object(l, ascii("Shapes.middle"), 1);
    m.put(qualname_at, qualname.data(), qualname.size());
    auto file = str_object(l, ascii("/srv/app/py_chains.py"), 1);
    m.put(file_at, file.data(), file.size());
    std::vector<uint8_t> table(32 + 4);
    set<uint64_t>(table, 16, 4);
    std::memcpy(table.data() + 32, "\x02\x01\x04\x02", 4);
    m.put(table_at, table.data(), table.size());

    INFO("3." << (v & 0xff));
    auto c = read_python_code(l, code_type, code_at, m.reader(), true);
    REQUIRE(c);
    // Qualified names from 3.11; the name alone before.
    CHECK(c->qualname == (v >= 0x030b ? "Shapes.middle" : "w\xce\xbb"));
    CHECK(c->file == "/srv/app/py_chains.py");
    CHECK(c->first_line == 42);
    CHECK(c->first_traceable == (v >= 0x030b ? 3 : -1));
    CHECK(c->line_table == std::string("\x02\x01\x04\x02", 4));
    CHECK(read_python_code(l, code_type, code_at, m.reader(), false)->line_table.empty());

    // A freed object reused for something else, memory gone, a bad string.
    CHECK(!read_python_code(l, code_type + 8, code_at, m.reader(), false));
    CHECK(!read_python_code(l, code_type, code_at + 0x100000, m.reader(), false));
    set<uint32_t>(file, 32, 0x20 | 3 << 2);  // a character width of 3
    m.put(file_at, file.data(), file.size());
    CHECK(!read_python_code(l, code_type, code_at, m.reader(), false));
    // A length past what is mapped: unreadable, not a read past the end.
    file = str_object(l, ascii("x.py"), 1);
    set<uint64_t>(file, 16, uint64_t{1} << 40);
    m.put(file_at, file.data(), file.size());
    CHECK(!read_python_code(l, code_type, code_at, m.reader(), false));
  }
}
