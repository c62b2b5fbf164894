// CPython in a process: which interpreter it runs (found by its exported
// _PyRuntime, in python3.X or libpython3.X.so), where that lies in the
// process, and the layout of its version (python_layout.h), for the BPF
// walker of Python frames and the names of their code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include "user/runtimes/python_layout.h"

namespace ember::runtimes {

struct PythonProcess {
  ember_python_layout layout;
  std::string binary;          // the file that holds the interpreter, as the process maps it
  uint64_t runtime = 0;        // &_PyRuntime
  uint64_t code_type = 0;      // &PyCode_Type: a frame's code object has this type
  uint64_t eval_start = 0;     // _PyEval_EvalFrameDefault, as exported
  uint64_t eval_end = 0;
  uint32_t thread_pointer_offset = 0;  // pthread_self() = the thread pointer less this (bpf/python.h)
};

// The CPython interpreter process `pid` runs, none if it runs none (or
// is gone), or why it cannot be read (a version ember does not know, a layout the
// process contradicts).
std::expected<std::optional<PythonProcess>, std::string> find_python(pid_t pid);

// The version a CPython file's name says (python3.11, libpython3.8.so.1.0):
// major << 8 | minor, or none.
std::optional<uint16_t> python_version_from_name(const std::string& path);

}  // namespace ember::runtimes
