// tests/integration/python_layout.sh: each thread's Python call chain in a
// running CPython, read from outside by ember's layouts alone
// (user/runtimes), the way the BPF walker reads it: _PyRuntime ->
// interpreters -> thread states -> frames -> code objects -> names. The
// process is stopped while it is read, so a chain is one moment's.
//
//   python_stacks PID
//
// A line per thread: "TID ROOT;...;LEAF", each frame its qualified name
// (3.11+; else its name); threads with no Python frame print no names.
// Before 3.11 thread states carry no tid: "pthread 0x..." instead.
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "flamegraph/utf8.h"
#include "user/runtimes/python.h"

namespace {

pid_t g_pid;

template <typename T>
T read(uint64_t address) {
  T v{};
  iovec local{&v, sizeof v};
  iovec remote{reinterpret_cast<void*>(address), sizeof v};
  if (process_vm_readv(g_pid, &local, 1, &remote, 1, 0) != sizeof v) return T{};
  return v;
}

// A str object as UTF-8 (compact strings only: what code names are).
std::string text(const ember_python_layout& l, uint64_t str) {
  uint32_t state = read<uint32_t>(str + 32);
  uint64_t length = read<uint64_t>(str + 16);
  unsigned kind = (state >> 2) & 7;
  bool ascii = state & 0x40;
  if (!(state & 0x20) || length > 1024 || (kind != 1 && kind != 2 && kind != 4)) return "?";
  uint64_t data = str + (ascii ? l.ascii_data : l.compact_data);
  std::string out;
  for (uint64_t i = 0; i < length; ++i) {
    uint32_t c = kind == 1 ? read<uint8_t>(data + i) : kind == 2 ? read<uint16_t>(data + 2 * i) : read<uint32_t>(data + 4 * i);
    ember::flamegraph::append_utf8(out, c);
  }
  return out;
}

// The thread's frames, newest first.
std::vector<std::string> chain(const ember::runtimes::PythonProcess& p, uint64_t tstate) {
  const ember_python_layout& l = p.layout;
  uint64_t frame = read<uint64_t>(tstate + l.tstate_frame);
  if (l.cframe_current_frame >= 0 && frame) frame = read<uint64_t>(frame + l.cframe_current_frame);
  std::vector<std::string> names;
  for (int depth = 0; frame && depth < 512; ++depth, frame = read<uint64_t>(frame + l.frame_previous)) {
    uint8_t owner = l.frame_owner >= 0 ? read<uint8_t>(frame + l.frame_owner) : 0;
    if (l.entry == EMBER_PY_ENTRY_SHIM && owner >= l.shim_owner) continue;  // the C stack's own frame
    uint64_t code = read<uint64_t>(frame + l.frame_code) & ~uint64_t{l.code_tag_mask};
    if (!code || read<uint64_t>(code + 8) != p.code_type) continue;
    if (l.code_firsttraceable >= 0 && owner != 1 /* FRAME_OWNED_BY_GENERATOR */) {
      // A frame still setting up (CPython's _PyFrame_IsIncomplete, which
      // compares prev_instr, then instr_ptr, alike): 3.13's __init__
      // clean-up frames among them.
      int64_t at = static_cast<int64_t>(read<uint64_t>(frame + l.frame_instr) - (code + l.code_adaptive)) / 2;
      if (at < read<int32_t>(code + l.code_firsttraceable)) continue;
    }
    names.push_back(text(l, read<uint64_t>(code + (l.code_qualname >= 0 ? l.code_qualname : l.code_name))));
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: python_stacks PID\n");
    return 2;
  }
  g_pid = std::atoi(argv[1]);
  auto found = ember::runtimes::find_python(g_pid);
  if (!found) {
    std::fprintf(stderr, "python_stacks: %s\n", found.error().c_str());
    return 1;
  }
  if (!*found) {
    std::fprintf(stderr, "python_stacks: process %d runs no CPython\n", g_pid);
    return 1;
  }
  const ember::runtimes::PythonProcess& p = **found;
  const ember_python_layout& l = p.layout;
  std::printf("# CPython %d.%d in %s\n", l.version >> 8, l.version & 0xff, p.binary.c_str());
  if (kill(g_pid, SIGSTOP) != 0) return 1;
  // Stopped once /proc says so: its threads then stand still.
  for (int i = 0; i < 1000; ++i) {
    char state = 0;
    if (FILE* f = std::fopen(("/proc/" + std::to_string(g_pid) + "/stat").c_str(), "r")) {
      if (std::fscanf(f, "%*d (%*[^)]) %c", &state) != 1) state = 0;
      std::fclose(f);
    }
    if (state == 'T') break;
    usleep(1000);
  }
  for (uint64_t interp = read<uint64_t>(p.runtime + l.runtime_interpreters); interp;
       interp = read<uint64_t>(interp + l.interp_next)) {
    int threads = 0;
    for (uint64_t t = read<uint64_t>(interp + l.interp_threads); t && threads < 4096;
         t = read<uint64_t>(t + l.tstate_next), ++threads) {
      std::vector<std::string> names = chain(p, t);
      std::string line;
      for (auto it = names.rbegin(); it != names.rend(); ++it) line += (line.empty() ? "" : ";") + *it;
      if (l.tstate_native_thread_id >= 0)
        std::printf("%llu %s\n", (unsigned long long)read<uint64_t>(t + l.tstate_native_thread_id), line.c_str());
      else
        std::printf("pthread 0x%llx %s\n", (unsigned long long)read<uint64_t>(t + l.tstate_thread_id), line.c_str());
    }
  }
  kill(g_pid, SIGCONT);
  return 0;
}
