// Where a compiled method's frame is built, read from its prologue: the
// exact instructions after which the caller's return address (and rbp)
// move, for an unwinder that may catch the thread between any two.
//
// HotSpot's frame-complete offset lies at or after the last of them (JDK
// 25 puts the nmethod entry barrier, `cmp [r15+..]; jne`, before it; C1's
// calls its slow path there), and says nothing of the steps in between.
// The prologues it emits on x86_64 (MacroAssembler::verified_entry for C2,
// C1_MacroAssembler::build_frame for C1), from the verified entry on:
//   with a stack bang: mov [rsp-N], eax; push rbp; [mov rbp, rsp;] sub rsp, F-16
//   without one (C2):  sub rsp, F-8; mov [rsp+F-16], rbp; [mov rbp, rsp; add rbp, F-16]
// with nops for alignment. The decoder knows these instructions only: any
// other before the frame is built (a class-initialization barrier, a jump
// patched over a method made not entrant) ends it without an answer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "agent/protocol.h"

namespace ember::agent {

// From `offset` (bytes from the code's start) on, the caller's rsp is rsp +
// 8 * cfa_words and its rbp is saved at that rsp + 8 * rbp_slot (0: still
// in rbp).
struct FrameStep {
  uint32_t offset = 0;
  int32_t cfa_words = 1, rbp_slot = 0;
  bool operator==(const FrameStep&) const = default;
};

struct Prologue {
  static constexpr int kMaxSteps = protocol::kMaxFrameSteps;
  // Where the whole frame (frame_words, rbp right below the return
  // address) is built, from the code's start; -1: the decoder could not tell.
  int32_t built = -1;
  FrameStep steps[kMaxSteps];  // before `built`, in order
  int count = 0;
};

// Decodes `code` (the bytes from the verified entry, which lies `entry`
// bytes after the code's start) for a frame of `frame_words` words.
Prologue decode_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words);

}  // namespace ember::agent
