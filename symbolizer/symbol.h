// What the symbolizer answers for one address: the frames there, or why it
// has none, as a reason a program can act on (blazesym's shape). The words
// for people, and the placeholder frames of a profile, are made from it by
// the caller (symbolizer/profile_frames.h), not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember::symbolizer {

enum class FrameKind : uint8_t {
  Kernel,
  Native,       // C or unknown-language code in an ELF file
  Cpp,          // a demangled C++ name
  Inlined,      // a call inlined into the frame before it (DWARF, or a JIT's debug info)
  Jit,          // JIT-compiled code (perf-PID.map, the JVM agent)
  Interpreted,  // code a JVM's interpreter runs
};

struct Frame {
  Frame() = default;
  Frame(std::string name, FrameKind kind, std::string module = {}, std::string file = {}, uint32_t line = 0)
      : name(std::move(name)), kind(kind), module(std::move(module)), file(std::move(file)), line(line) {}

  std::string name;  // demangled
  FrameKind kind = FrameKind::Native;
  std::string module;  // the file the code lives in, "[vdso]", "[kernel]", "[kvm]"; empty for JIT code
  std::string file;    // source file, with Options::lines; may be empty
  uint32_t line = 0;   // with Options::lines; 0: unknown (for an inlined call's caller: the call's line)
};

enum class Unknown : uint8_t {
  NoProcess,          // the process's mappings were never read (it exited first)
  Unmapped,           // in no mapping of the process
  Anonymous,          // anonymous memory without a perf-PID.map entry (JIT code, most likely)
  JitNotPublished,    // a JVM's code its agent has not described (answered by the collector, which holds the JIT map)
  SpecialMapping,     // [heap], [stack], [vsyscall]...: no file behind it
  Unreadable,         // the mapped file could not be opened (gone, or not allowed)
  BadElf,             // the file is not ELF, or is damaged (truncated, bad headers)
  OutsideCode,        // in the file, but outside its executable segments
  Stripped,           // no symbol covers it, and the file has only its exported symbols (no .symtab, no debug file)
  NoSymbol,           // no symbol covers it, in a full symbol table
  KernelHidden,       // kernel.kptr_restrict shows kernel addresses as zeros
  KernelUnavailable,  // kallsyms could not be read
  KernelNoSymbol,     // no kernel symbol covers it
};

// The reason in words ("no symbol covers this address").
const char* describe(Unknown why);

struct Symbol {
  // Caller first: the function, then the calls inlined into it at this
  // address (kind Inlined). Empty when unknown.
  std::vector<Frame> frames;
  std::optional<Unknown> unknown;
  // Where an unknown address lies, so a placeholder can say: the mapping's
  // path ("[anon]", "[heap]" when it has none), empty if in no mapping; and
  // the file offset there (for symbolize_file, the address itself).
  std::string module;
  uint64_t offset = 0;
  bool known() const { return !unknown; }
};

}  // namespace ember::symbolizer
