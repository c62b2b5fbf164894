// Where a compiled method's frame is built, read from its prologue: the
// exact instructions after which the caller's return address and fp move,
// for an unwinder that may catch the thread between any two.
//
// HotSpot's frame-complete offset lies at or after the last of them (JDK
// 25 puts the nmethod entry barrier, `cmp [r15+..]; jne`, before it; C1's
// calls its slow path there), and says nothing of the steps in between.
// The prologues it emits, from the verified entry on (C2's
// MacroAssembler::verified_entry or MachPrologNode, C1's build_frame):
// - x86_64, with a stack bang: mov [rsp-N], eax; push rbp; [mov rbp, rsp;] sub rsp, F-16
//   without one (C2):        sub rsp, F-8; mov [rsp+F-16], rbp; [mov rbp, rsp; add rbp, F-16]
//   with nops for alignment;
// - aarch64 (MacroAssembler::build_frame), after a nop and the stack bang
//   (sub x9, sp, N; str xzr, [x9]):
//   frames under 528 bytes: sub sp, sp, F; stp x29, x30, [sp, F-16]; [add x29, sp, F-16]
//   larger ones:            stp x29, x30, [sp, -16]!; [mov x29, sp;] sub sp, sp, F-16
//                           (F-16 over 4 KiB: mov x8, F-16 (movz, movk); sub sp, sp, x8)
//   x30 holds the return address until the stp.
// The decoders know these instructions only: any other before the frame is
// built (a class-initialization barrier, a jump patched over a method made
// not entrant) ends it without an answer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "agent/protocol.h"

namespace ember::agent {

// From `offset` (bytes from the code's start) on, the caller's sp is sp +
// 8 * cfa_words and its fp is saved at that sp + 8 * fp_slot (0: still in
// its register; on aarch64 the return address is then in x30, else right
// above the saved fp).
struct FrameStep {
  uint32_t offset = 0;
  int32_t cfa_words = 1, fp_slot = 0;
  bool operator==(const FrameStep&) const = default;
};

struct Prologue {
  static constexpr int kMaxSteps = protocol::kMaxFrameSteps;
  // Where the whole frame (frame_words, fp right below the return address)
  // is built, from the code's start; -1: the decoder could not tell.
  int32_t built = -1;
  FrameStep steps[kMaxSteps];  // before `built`, in order
  int count = 0;
  bool sets_fp = false;  // the prologue points fp at the frame (-XX:+PreserveFramePointer, enter())
};

// Decodes `code` (the bytes from the verified entry, which lies `entry`
// bytes after the code's start) for a frame of `frame_words` words.
Prologue decode_x86_64_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words);
Prologue decode_aarch64_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words);

// The decoder of the machine the agent runs on.
inline Prologue decode_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words) {
#if defined(__aarch64__)
  return decode_aarch64_prologue(code, size, entry, frame_words);
#else
  return decode_x86_64_prologue(code, size, entry, frame_words);
#endif
}

}  // namespace ember::agent
