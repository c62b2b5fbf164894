// The code map a JVM publishes through libember-agent.so: which Java method
// (and which inlined callees) a JIT address belonged to at a given time,
// where the interpreter and stubs are, and their frames. Read from the
// agent's stream (format: agent/protocol.h); its Java events are
// user/java/java_events.h's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent/protocol.h"
#include "symbolizer/line_buffer.h"
#include "symbolizer/symbol.h"

namespace ember::symbolizer {

class JitMap {
 public:
  // Feeds appended text; a trailing partial line is kept for the next call.
  void feed(std::string_view text);

  // Where an address fell: a code blob (by its start and load time, unique
  // over the JVM's life) and the debug-info pc inside it. Cheap to compare,
  // so callers can cache frames per location.
  struct Location {
    uint64_t start = 0, load_ns = 0;
    uint32_t pc = UINT32_MAX;  // index of the inlining record, if any
    bool compiled = false;     // a JIT-compiled method (else interpreter or stub)
    bool framed = false;       // its frame size was published (a G line)
    explicit operator bool() const { return start != 0; }
    bool operator==(const Location& o) const { return start == o.start && load_ns == o.load_ns && pc == o.pc; }
  };
  // The code that covered `address` at `time_ns`, if the JVM published any.
  Location locate(uint64_t address, uint64_t time_ns) const;
  // The frames at a location, innermost (leaf) first; empty once forgotten.
  std::vector<Frame> frames(const Location& at) const;
  // Forgets freed code older than `time_ns` (no pending sample is older).
  void forget_before(uint64_t time_ns);

  // From `offset` (bytes from the code's start) on, the caller's sp is sp +
  // 8 * cfa_words, its fp saved at that sp + 8 * fp_slot (0: in its
  // register; see agent/protocol.h's G lines for the return address).
  struct FrameStep {
    uint32_t offset = 0;
    int32_t cfa_words = 1, fp_slot = 0;
    bool operator==(const FrameStep&) const = default;
  };

  // Live code and its frames, for the unwinder (user/session/unwinder.h).
  struct Code {
    enum class Kind { Compiled, Interpreter, CallStub, Other } kind = Kind::Other;
    uint64_t start = 0, size = 0;
    int32_t frame_words = -1, complete = -1;  // from G lines; -1: not published
    std::vector<FrameStep> steps;             // the frame half built, before complete
    int32_t method_slot = 0;  // Interpreter: its frames' Method* at rbp + 8 * this; 0: unknown
  };
  std::vector<Code> live_code() const;
  // Changes with every load, unload or frame of code.
  uint64_t code_version() const { return code_version_; }

  // What the JVM lacks for its frames to be published (an O frames-unavailable
  // line: a VMStructs entry); empty if nothing.
  const std::string& frames_unavailable() const { return frames_unavailable_; }
  // The same for interpreted frames' methods (O interpreter-methods-unavailable).
  const std::string& interpreter_methods_unavailable() const { return interpreter_methods_unavailable_; }

  // The method an interpreted frame holding Method* `pointer` runs (P
  // lines): its id, 0 if unknown; and an id's name (valid until the next
  // feed()).
  uint32_t interpreted_method(uint64_t pointer) const;
  std::string_view name(uint32_t id) const;

  // The file the stream went on in (its last R line), a name in the same
  // directory; empty while it has not.
  const std::string& continued_in() const { return continued_in_; }

  size_t methods() const { return names_.size(); }
  size_t live_blobs() const { return live_.size(); }
  size_t bad_lines() const { return bad_lines_; }

 private:
  struct InlinePc {
    uint64_t offset;
    uint32_t first, count;  // into inline_ids_
  };
  struct Blob {
    uint64_t start = 0, size = 0, load_ns = 0, unload_ns = UINT64_MAX;
    uint32_t method = 0;        // compiled method id; 0 for generated code
    std::string stub;           // generated code's name
    std::vector<InlinePc> pcs;  // sorted by offset
    int32_t frame_words = -1, complete = -1;
    std::vector<FrameStep> steps;
  };
  void line(std::string_view s);
  // The steps of a G line (after its complete offset); false if malformed.
  static bool frame_steps(std::string_view s, int32_t words, int32_t complete, std::vector<FrameStep>& out);
  void retire(std::map<uint64_t, Blob>::iterator it, uint64_t when);
  const Blob* find_blob(uint64_t start, uint64_t load_ns) const;
  static const Blob* containing(const std::multimap<uint64_t, Blob>& blobs, uint64_t address, uint64_t time_ns,
                                uint64_t max_size);

  LineBuffer lines_;
  // Method names, by id: where each lies in name_bytes_ (one allocation for
  // the 11,000 a JVM publishes as it attaches, not one each). A map, so
  // that memory follows the lines read, whatever ids a stream makes up.
  struct NameAt {
    uint32_t offset = 0, size = 0;
  };
  std::unordered_map<uint32_t, NameAt> names_;
  std::string name_bytes_;
  std::vector<uint32_t> inline_ids_;
  std::map<uint64_t, Blob> live_;         // by start; live code never overlaps
  std::multimap<uint64_t, Blob> retired_;  // freed code, kept for samples taken before
  uint64_t max_retired_size_ = 0;
  Blob* last_loaded_ = nullptr;  // where I lines go
  size_t bad_lines_ = 0;
  std::string continued_in_;
  uint64_t code_version_ = 0;
  std::string frames_unavailable_;
  std::unordered_map<uint64_t, uint32_t> method_pointers_;  // P lines
  int32_t method_slot_ = 0;
  std::string interpreter_methods_unavailable_;
};

}  // namespace ember::symbolizer
