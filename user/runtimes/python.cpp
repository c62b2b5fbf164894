#include "user/runtimes/python.h"

#include <fstream>
#include <regex>
#include <vector>

#include "symbolizer/elf_facts.h"
#include "symbolizer/proc_maps.h"
#include "user/runtimes/process_memory.h"

namespace ember::runtimes {
namespace {

// A 4-byte constant of a file (an exported symbol's initial value).
std::optional<uint32_t> u32_in_file(const std::string& path, const symbolizer::ExportedSymbol& symbol) {
  if (!symbol.file_offset || symbol.size != 4) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  uint32_t value = 0;
  in.seekg(static_cast<std::streamoff>(symbol.file_offset));
  if (!in.read(reinterpret_cast<char*>(&value), sizeof value)) return std::nullopt;
  return value;
}

// How far a thread's pthread_self() lies below its thread pointer. x86_64:
// they are equal. arm64: the pointer is past glibc's struct pthread, whose
// size glibc exports for debuggers (libthread_db's _thread_db_sizeof_pthread).
std::expected<uint32_t, std::string> thread_pointer_offset(const std::vector<symbolizer::Mapping>& mappings,
                                                           const std::string& root) {
#if defined(__aarch64__)
  static const std::regex libc(R"((?:^|/)libc\.so\.6$)");
  for (const symbolizer::Mapping& m : mappings) {
    if (m.offset != 0 || m.inode == 0 || !std::regex_search(m.path, libc)) continue;
    auto exports = symbolizer::exported_symbols(root + m.path, {"_thread_db_sizeof_pthread"});
    if (!exports) return std::unexpected(exports.error());
    auto found = exports->symbols.find("_thread_db_sizeof_pthread");
    auto size = found == exports->symbols.end() ? std::nullopt : u32_in_file(root + m.path, found->second);
    if (!size) return std::unexpected(m.path + " exports no _thread_db_sizeof_pthread: on arm64 ember tells Python threads apart through glibc's");
    return *size;
  }
  return std::unexpected("no glibc (libc.so.6) in the process: on arm64 ember tells Python threads apart through glibc's");
#else
  (void)mappings;
  (void)root;
  return 0;
#endif
}

}  // namespace

std::optional<uint16_t> python_version_from_name(const std::string& path) {
  static const std::regex name(R"((?:^|/)(?:lib)?python(\d)\.(\d+)[dmu]*(?:\.so[.0-9]*)?$)");
  // Asked of every file a new process maps: most are ruled out without the regex.
  std::string_view base = std::string_view(path).substr(path.rfind('/') + 1);
  if (!base.starts_with("python") && !base.starts_with("libpython")) return std::nullopt;
  std::smatch m;
  if (!std::regex_search(path, m, name)) return std::nullopt;
  return static_cast<uint16_t>(std::stoi(m[1]) << 8 | std::stoi(m[2]));
}

std::expected<std::optional<PythonProcess>, std::string> find_python(pid_t pid) {
  std::optional<std::vector<symbolizer::Mapping>> mappings = symbolizer::read_proc_maps("/proc/" + std::to_string(pid) + "/maps");
  if (!mappings) return std::nullopt;  // gone: nothing to read
  std::string root = "/proc/" + std::to_string(pid) + "/root";
  for (const symbolizer::Mapping& m : *mappings) {
    if (m.offset != 0 || m.inode == 0) continue;
    auto named = python_version_from_name(m.path);
    if (!named) continue;
    std::string file = root + m.path;
    auto exports = symbolizer::exported_symbols(file, {"_PyRuntime", "PyCode_Type", "_PyEval_EvalFrameDefault", "Py_Version"});
    if (!exports) return std::unexpected(exports.error());
    auto& s = exports->symbols;
    if (!s.contains("_PyEval_EvalFrameDefault")) continue;  // a launcher; the interpreter is in its libpython
    if (!s.contains("_PyRuntime")) {  // before 3.7
      if (auto known = python_layout(*named); !known) return std::unexpected(known.error());
      return std::unexpected(m.path + " exports no _PyRuntime");
    }
    if (!s.contains("PyCode_Type")) return std::unexpected(m.path + " exports no PyCode_Type");
    uint64_t bias = m.start - exports->first_load_vaddr;
    uint16_t version = *named;
    if (auto in_file = s.contains("Py_Version") ? u32_in_file(file, s["Py_Version"]) : std::nullopt)
      version = static_cast<uint16_t>(*in_file >> 16);  // PY_VERSION_HEX
    auto offset = thread_pointer_offset(*mappings, root);
    if (!offset) return std::unexpected(offset.error());
    PythonProcess p;
    p.thread_pointer_offset = *offset;
    p.binary = m.path;
    p.runtime = s["_PyRuntime"].vaddr + bias;
    p.code_type = s["PyCode_Type"].vaddr + bias;
    p.eval_start = s["_PyEval_EvalFrameDefault"].vaddr + bias;
    p.eval_end = p.eval_start + s["_PyEval_EvalFrameDefault"].size;
    if (version >= 0x030d) {
      std::vector<uint8_t> head(kDebugOffsetsBytes);
      if (!read_process(pid, p.runtime, head.data(), head.size()))
        return std::unexpected("cannot read _PyRuntime of process " + std::to_string(pid));
      auto layout = python_layout_from_debug_offsets(head);
      if (!layout) return std::unexpected(layout.error());
      if (layout->version != version)
        return std::unexpected(m.path + " says CPython " + std::to_string(version >> 8) + "." +
                               std::to_string(version & 0xff) + ", its _Py_DebugOffsets another");
      p.layout = *layout;
    } else {
      auto layout = python_layout(version);
      if (!layout) return std::unexpected(layout.error());
      p.layout = *layout;
    }
    return p;
  }
  return std::nullopt;
}

}  // namespace ember::runtimes
