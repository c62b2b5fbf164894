// Fuzz target: a CPython process's memory as ember reads it to name
// Python frames (user/runtimes/python_frames.h): the input is the memory
// at 0x10000 (its first byte picks the version's layout), read where a
// code object's fields point, strings and line tables included; then each
// line table format over the same bytes. Never a read past what the
// "process" holds, never a hang on a garbled table.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "user/runtimes/python_frames.h"
#include "user/runtimes/python_layout.h"

using namespace ember::runtimes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr uint64_t kBase = 0x10000;
  uint16_t version = static_cast<uint16_t>(kPythonOldest + data[0] % (kPythonNewest - kPythonOldest + 1));
  auto layout = python_layout(version);
  if (!layout) return 0;
  ReadMemory read = [&](uint64_t address, void* out, size_t n) {
    if (address < kBase || address - kBase > size || n > size - (address - kBase)) return false;
    std::memcpy(out, data + (address - kBase), n);
    return true;
  };
  uint64_t code_type = 0;
  if (size >= 16) std::memcpy(&code_type, data + 8, sizeof code_type);  // whatever the object says
  (void)read_python_code(*layout, code_type, kBase, read, true);
  std::string_view table(reinterpret_cast<const char*>(data), size);
  for (uint16_t v = kPythonOldest; v <= kPythonNewest; ++v)
    for (int64_t index : {int64_t{0}, int64_t{7}, static_cast<int64_t>(size), int64_t{1} << 20})
      (void)python_line(v, table, 1, index);
  return 0;
}
