// The code map a JVM publishes through libember-agent.so: which Java method
// (and which inlined callees) a JIT address belonged to at a given time, and
// where the interpreter and stubs are. Written by agent/jitmap_writer.cpp as
// text lines, appended while the JVM runs:
//   # ember-jitmap 1 pid N
//   M <id> <name>                  method id -> "com.example.Foo.bar"
//   L <ns> <start> <size> <id>     compiled method loaded at [start, start+size)
//   I <pc_off> <id>,<id>,...       after its L: the frames at start+pc_off, innermost first
//   U <ns> <start>                 the compiled method at start was freed
//   S <ns> <start> <size> <name>   generated code: interpreter, stubs, adapters
//   P <pointer> <id>               interpreted frames whose Method* slot holds
//                                  <pointer> (hex) run method <id>; a later P
//                                  line for the same pointer replaces it (its
//                                  class was unloaded, the memory reused)
//   G <start> <words> <complete> [<offset>:<cfa>:<rbp> ...]
//                                  right after the L or S line of the code at
//                                  start: its frame. <words> (decimal): the
//                                  frame's size in 8-byte words, return address
//                                  and saved rbp included (HotSpot's
//                                  CodeBlob::_frame_size: the caller's rsp is
//                                  rsp + 8 * words once the frame is complete,
//                                  its rbp saved right below the return
//                                  address; 0: the code builds no frame, the
//                                  return address stays at rsp: the
//                                  method-handle intrinsics, which jump on to
//                                  their target, and the vtable and itable
//                                  stubs, which jump to theirs).
//                                  <complete> (decimal): the offset in bytes
//                                  from start where the frame is complete: for
//                                  a compiled method whose prologue the agent
//                                  decoded (agent/prologue.h), right after the
//                                  instruction that finishes it; else
//                                  HotSpot's frame-complete offset, which may
//                                  lie further (it counts in what follows the
//                                  frame's construction: the nmethod entry
//                                  barrier on JDK 25); -1 when HotSpot says it
//                                  never is (or it lies before start). Before
//                                  it the return address is at rsp, except
//                                  where a step says otherwise: from <offset>
//                                  (decimal, bytes from start, increasing, each
//                                  below <complete>) on, the caller's rsp is
//                                  rsp + 8 * <cfa> and its rbp is saved at
//                                  that rsp + 8 * <rbp> (negative; 0: still in
//                                  rbp): a prologue's frame half built (after
//                                  push rbp, or after sub rsp before rbp is
//                                  stored), at most 4 steps. The epilogues
//                                  that tear the frame down are not marked:
//                                  ember's unwinder reads them (bpf/unwind.bpf.c).
//                                  Every compiled method gets a G line unless
//                                  the agent could not match its code to the
//                                  code cache (counted: D frames-unmatched);
//                                  generated code when it is a blob of its own
//                                  with a frame (RuntimeStub, SafepointBlob,
//                                  ...) or a vtable or itable stub (0 words),
//                                  not the other stubs that share a blob
//                                  (StubRoutines, the interpreter). None at all
//                                  after "O frames-unavailable <entry>": the
//                                  JVM's VMStructs lack <entry>
// Times are CLOCK_MONOTONIC nanoseconds, the clock of the BPF samples; an
// L or S time of 0 is code that was there before the stream began (replayed
// when the agent attaches to a running JVM, while the recording runs).
// Addresses and sizes are hex.
//
// Java events, with the agent options alloc, live and lock (read by
// symbolizer/java_events.h; JitMap skips them). Numbers are decimal.
//   O <key> <value>                a setting, before the events it governs:
//                                  alloc-interval <bytes> (mean bytes between
//                                  allocation samples), live-max <n> (samples
//                                  are followed for liveness, at most n at a
//                                  time), lock-interval <ns>; alloc-unavailable
//                                  or lock-unavailable when the JVM refused;
//                                  at the end of a live stream, live-end gc
//                                  (after a full GC: what is left is live) or
//                                  live-end none (no GC: the JVM exited with a
//                                  collector other than G1, or the stream was
//                                  replaced; garbage not yet collected is left);
//                                  native-library <start> <end> <bias> <path>
//                                  (hex) before the first A line with a native
//                                  frame in that file: it is mapped at
//                                  [start, end), address - bias is the address
//                                  in the file's symbol table;
//                                  frames-unavailable <entry> (no G lines);
//                                  interpreter-method-slot <n> (decimal): an
//                                  interpreted frame's Method* is at rbp + 8n;
//                                  interpreter-methods-unavailable <reason>:
//                                  no P lines (the JVM's VMStructs lack an
//                                  entry, or its jmethodIDs are no Method* slots)
//   K <id> <name>                  class id -> "java.lang.String", "byte[]"
//   T <tid> <name>                 a thread's name, before its first event
//   A <ns> <tid> <size> <class> <sample> <frames> [<native>]
//                                  an allocation sample: an object of <size>
//                                  bytes; <sample> > 0 numbers a followed one
//                                  (live), 0 when not followed; <native>, only
//                                  when native code allocated (JNI): its frames
//                                  from the innermost Java frame (a native
//                                  method) to the JNI function, innermost
//                                  first, call-site addresses in hex,
//                                  comma-separated (at most 32)
//   F <ns> <sample>                the followed object of <sample> was freed
//                                  (seen at <ns>)
//   C <ns> <tid> <wait> <class> <frames>
//                                  a thread waited <wait> ns from <ns> to enter
//                                  a contended monitor of class <class>; waits
//                                  under lock-interval are sampled, one record
//                                  per lock-interval ns of them
//   D <ns> <counter> <value>       losses inside the agent over the stream
//                                  (reentered, write-error-bytes,
//                                  frames-unmatched: compiled methods without
//                                  a G line)
// <tid> is the Linux thread id. <frames>: method ids (M lines), innermost
// first, comma-separated; "-" for none; a last "+" when the agent cut the
// stack at its depth limit (128). Unknown lines are counted and skipped.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flamegraph/profile.h"
#include "symbolizer/line_buffer.h"

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
  std::vector<flamegraph::Frame> frames(const Location& at) const;
  // Forgets freed code older than `time_ns` (no pending sample is older).
  void forget_before(uint64_t time_ns);

  // From `offset` (bytes from the code's start) on, the caller's rsp is
  // rsp + 8 * cfa_words, its rbp saved at that rsp + 8 * rbp_slot (0: in rbp).
  struct FrameStep {
    uint32_t offset = 0;
    int32_t cfa_words = 1, rbp_slot = 0;
    bool operator==(const FrameStep&) const = default;
  };
  static constexpr size_t kMaxFrameSteps = 4;

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
  // lines): its id, 0 if unknown; and an id's name.
  uint32_t interpreted_method(uint64_t pointer) const;
  std::string_view name(uint32_t id) const;

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
  // By method id: a map, so that memory follows the lines read, whatever
  // ids a stream makes up.
  std::unordered_map<uint32_t, std::string> names_;
  std::vector<uint32_t> inline_ids_;
  std::map<uint64_t, Blob> live_;         // by start; live code never overlaps
  std::multimap<uint64_t, Blob> retired_;  // freed code, kept for samples taken before
  uint64_t max_retired_size_ = 0;
  Blob* last_loaded_ = nullptr;  // where I lines go
  size_t bad_lines_ = 0;
  uint64_t code_version_ = 0;
  std::string frames_unavailable_;
  std::unordered_map<uint64_t, uint32_t> method_pointers_;  // P lines
  int32_t method_slot_ = 0;
  std::string interpreter_methods_unavailable_;
};

}  // namespace ember::symbolizer
