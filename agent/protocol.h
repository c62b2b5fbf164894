// The agent's protocol, shared by both ends: the options ember passes
// libember-agent.so (agent/agent.cpp reads them, user/java builds them) and
// the stream the agent appends and ember tails (agent/jitmap_writer.cpp
// writes it; symbolizer/jit_map.h reads its code map, user/java/java_events.h
// its Java events). Plain constants only: the agent links no libstdc++.
//
// OPTIONS
// Load at start-up:  java -agentpath:/path/libember-agent.so=out=/path/x.jitmap ...
// or let `ember record` attach it to a running JVM. Options (comma-separated):
//   out=PATH     where to write the stream (required); "{pid}" in PATH becomes
//                this JVM's pid (as it sees it). The file is created, mode
//                0600, and must not exist: an existing file or a symlink at
//                PATH is never written through
//   lease        the directory of PATH is ember's (see user/java/agent_dir.h): its
//                reader holds a shared flock on it while it reads. When the
//                lock is let go without a `stop` (ember was killed), the agent
//                stops publishing and removes its files and the directory
//   alloc[=N]    sampled object allocation (JVMTI SampledObjectAlloc), one
//                sample per N bytes allocated on average (default 524288);
//                allocations made by native code (JNI) carry its frames too
//   live         with alloc: follow the sampled objects (weak references, at
//                most LiveObjects::kMaxTracked at a time, agent/live_objects.h)
//                and write which ones the GC freed. A `stop` ends the stream with one full GC
//                (as `jmap -histo:live` does), so that objects dropped but
//                not yet collected are not taken for live ones. At JVM exit
//                only with G1: by VMDeath HotSpot has stopped the threads of
//                its concurrent collectors, and a forced GC hangs the exit
//                (seen with ZGC and Shenandoah on JDK 17.0.15), while G1's
//                full GC runs in the VM thread. "O live-end gc" or
//                "O live-end none" says which ending a stream had.
//   nogc         with live: no full GC at the end (the reader keeps only the
//                objects old enough, `record --min-age`, a production JVM's
//                owner may not accept a forced collection)
//   lock[=NS]    contended monitor enters (MonitorContendedEnter/Entered):
//                the wait, the waiter's stack and the monitor's class.
//                Waits shorter than NS (default 10000) are sampled: one per
//                NS of such waiting (async-profiler's lock=10us default);
//                lock=0 records every one.
//   pin=TOKEN    with live: ends the Java events as a `stop` would (no full
//                GC), but holds the objects still followed, for a heap dump
//                to show what else holds them (`ember jvm --leaks`): one
//                Object[] under a JNI global reference, its element 0 the
//                String "ember-pin TOKEN" (how the dump's reader finds it),
//                then the objects, each told by an H line. The stream stays
//                open; the array is let go at the `stop`, the lease's end or
//                the next attach. TOKEN: up to 32 letters and digits
//   stop         stop publishing and close the file (the "detach": HotSpot
//                never unloads an agent library, so a later attach restarts it)
// Attaching again while publishing starts a fresh stream with the new
// options (events the old ones enabled and the new ones do not are turned
// off): the collector of a new recording replays the JVM's code from the top.
//
// THE STREAM
// Which Java method (and which inlined callees) a JIT address belonged to
// at a given time, where the interpreter and stubs are, and the Java
// events; text lines, appended while the JVM runs:
//   # ember-jitmap 1 pid N
//   M <id> <name>                  method id -> "com.example.Foo.bar"
//   L <ns> <start> <size> <id>     compiled method loaded at [start, start+size)
//   I <pc_off> <id>,<id>,...       after its L: the frames at start+pc_off, innermost first;
//                                  an address has those of the first I at or after it (a
//                                  line per change of frames: one frame where none is inlined)
//   U <ns> <start>                 the compiled method at start was freed
//   S <ns> <start> <size> <name>   generated code: interpreter, stubs, adapters
//   P <pointer> <id>               interpreted frames whose Method* slot holds
//                                  <pointer> (hex) run method <id>; a later P
//                                  line for the same pointer replaces it (its
//                                  class was unloaded, the memory reused)
//   G <start> <words> <complete> [<offset>:<cfa>:<fp> ...]
//                                  right after the L or S line of the code at
//                                  start: its frame. <words> (decimal): the
//                                  frame's size in 8-byte words, return address
//                                  and saved fp (rbp, x29) included (HotSpot's
//                                  CodeBlob::_frame_size: the caller's sp is
//                                  sp + 8 * words once the frame is complete,
//                                  its fp saved right below the return
//                                  address; 0: the code builds no frame, the
//                                  return address stays where the call left
//                                  it (at rsp; in x30 on aarch64): the
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
//                                  it the return address is where the call
//                                  left it, except where a step says
//                                  otherwise: from <offset> (decimal, bytes
//                                  from start, increasing, each below
//                                  <complete>) on, the caller's sp is sp + 8 *
//                                  <cfa> and its fp is saved at that sp + 8 *
//                                  <fp> (negative; 0: still in its register):
//                                  a prologue's frame half built (after push
//                                  rbp, or after sub rsp before rbp is stored;
//                                  on aarch64 after sub sp before stp x29,
//                                  x30), at most 4 steps. The return address
//                                  is at the caller's sp - 8 on x86_64; on
//                                  aarch64 in x30 while <fp> is 0, else right
//                                  above the saved fp (a frame record). The
//                                  epilogues that tear the frame down are not
//                                  marked: ember's unwinder reads them
//                                  (bpf/unwind.bpf.c).
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
// user/java/java_events.h; JitMap skips them). Numbers are decimal.
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
//                                  gcs <n> (with live): the JVM's garbage
//                                  collections (JVMTI GarbageCollectionFinish:
//                                  its stop-the-world ones) since the agent
//                                  loaded, written when it changed before the
//                                  next A line and before live-end; an object
//                                  still followed at the end has survived the
//                                  ones after its A line (none are written
//                                  when the JVM refused the GC events);
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
//   H <index> <sample>             after a `pin`: element <index> of the pin
//                                  array holds the followed object of <sample>;
//                                  then "O pinned <token> <count>" ends them, or
//                                  "O pin-unavailable <reason>" says why none
//   C <ns> <tid> <wait> <class> <frames>
//                                  a thread waited <wait> ns from <ns> to enter
//                                  a contended monitor of class <class>; waits
//                                  under lock-interval are sampled, one record
//                                  per lock-interval ns of them
//   D <ns> <counter> <value>       losses inside the agent over the stream
//                                  (reentered, write-error-bytes,
//                                  frames-unmatched: compiled methods without
//                                  a G line)
//
// A stream is cut into files of kFileBytes or so, so that a JVM publishing
// for weeks (allocation samples add up) holds little on disk:
//   R <name>                       the stream goes on in the file <name>
//                                  (PATH.1, PATH.2, ...: in the same
//                                  directory), made before this line was
//                                  written; this file ends here. Ids, names
//                                  and code carry over; the new file has no
//                                  header. The reader removes each file it
//                                  has read to its end.
// <tid> is the Linux thread id. <frames>: method ids (M lines), innermost
// first, comma-separated; "-" for none; a last "+" when the agent cut the
// stack at its depth limit (128). Unknown lines are counted and skipped.
#pragma once

#include <cstdint>

namespace ember::agent::protocol {

// The agent's options (comma-separated, "NAME" or "NAME=VALUE").
namespace args {
inline constexpr char kOut[] = "out", kLease[] = "lease", kAlloc[] = "alloc", kLive[] = "live", kLock[] = "lock",
                      kStop[] = "stop", kNoGc[] = "nogc", kPin[] = "pin";
}

// The stream's first line, then " pid N".
inline constexpr char kHeader[] = "# ember-jitmap 1";

// Line tags.
inline constexpr char kMethod = 'M', kLoad = 'L', kInline = 'I', kUnload = 'U', kStub = 'S', kFrame = 'G',
                      kMethodPointer = 'P', kOption = 'O', kClass = 'K', kThread = 'T', kAlloc = 'A', kFree = 'F',
                      kContended = 'C', kCounter = 'D', kContinued = 'R', kHeld = 'H';

// A stream's file is continued in a new one at the first event group that
// ends past this size.
inline constexpr uint64_t kFileBytes = 16ull << 20;

// O line keys.
namespace setting {
inline constexpr char kAllocInterval[] = "alloc-interval", kAllocUnavailable[] = "alloc-unavailable",
                      kLiveMax[] = "live-max", kLiveEnd[] = "live-end", kLockInterval[] = "lock-interval",
                      kLockUnavailable[] = "lock-unavailable", kNativeLibrary[] = "native-library",
                      kFramesUnavailable[] = "frames-unavailable", kMethodSlot[] = "interpreter-method-slot",
                      kMethodsUnavailable[] = "interpreter-methods-unavailable", kGcs[] = "gcs",
                      kPinned[] = "pinned", kPinUnavailable[] = "pin-unavailable";
// live-end values.
inline constexpr char kEndGc[] = "gc", kEndNone[] = "none";
}  // namespace setting

// The pin array's element 0: this, a space, the token.
inline constexpr char kPinMarker[] = "ember-pin";
inline constexpr int kMaxPinToken = 32;
// D line counters.
namespace counter {
inline constexpr char kReentered[] = "reentered", kWriteErrorBytes[] = "write-error-bytes",
                      kFramesUnmatched[] = "frames-unmatched";
}

// The generated code (S lines) the reader tells apart, by HotSpot's names.
inline constexpr char kInterpreter[] = "Interpreter", kCallStub[] = "call_stub";

// Limits: Java frames per event (deeper stacks end in "+"), native frames
// per allocation, prologue steps per G line.
inline constexpr int kMaxJavaFrames = 128, kMaxNativeFrames = 32, kMaxFrameSteps = 4;

}  // namespace ember::agent::protocol
