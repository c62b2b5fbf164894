#include <catch2/catch.hpp>

#include <vector>

#include "agent/prologue.h"

using ember::agent::decode_aarch64_prologue;
using ember::agent::decode_x86_64_prologue;
using ember::agent::FrameStep;
using ember::agent::Prologue;

namespace {

// The code of a compiled method from its start, its verified entry at `entry`.
Prologue decode(const std::vector<uint8_t>& code, uint32_t entry, int32_t words) {
  return decode_x86_64_prologue(code.data() + entry, code.size() - entry, entry, words);
}

// The same for aarch64's code, given as its instruction words.
Prologue decode_aarch64(const std::vector<uint32_t>& code, uint32_t entry, int32_t words) {
  std::vector<uint8_t> bytes;
  for (uint32_t w : code)
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(w >> (8 * i)));
  return decode_aarch64_prologue(bytes.data() + entry, bytes.size() - entry, entry, words);
}

std::vector<FrameStep> steps(const Prologue& p) { return {p.steps, p.steps + p.count}; }

}  // namespace

// The bytes are HotSpot's, read from JVMs on this machine (OpenJDK 17.0,
// Temurin 25): each method's code from its start up to a little past its
// frame-complete offset.
TEST_CASE("prologue: C2 without a stack bang: sub rsp, then rbp stored (JDK 17; JDK 25 adds the entry barrier)") {
  // Prologues.leaf, 4 words: sub $0x18,%rsp; mov %rbp,0x10(%rsp); movslq %esi,%rax (complete: 12).
  Prologue jdk17 = decode({0x48, 0x81, 0xec, 0x18, 0, 0, 0, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x48, 0x63, 0xc6}, 0, 4);
  CHECK(jdk17.built == 12);
  CHECK(steps(jdk17) == std::vector<FrameStep>{{7, 4, 0}});  // the frame's size, rbp not stored yet
  // The same on JDK 25, then cmpl $0x1,0x20(%r15); jne (complete: 26).
  Prologue jdk25 = decode({0x48, 0x81, 0xec, 0x18, 0, 0, 0, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x41, 0x81, 0x7f, 0x20,
                           0x01, 0, 0, 0, 0x0f, 0x85, 0x33, 0, 0, 0},
                          0, 4);
  CHECK(jdk25.built == 12);
  CHECK(steps(jdk25) == std::vector<FrameStep>{{7, 4, 0}});
}

TEST_CASE("prologue: a stack bang, push rbp, sub rsp (C2's and C1's), after an inline-cache check") {
  // Prologues.middle (C2, JDK 17), 4 words: mov %eax,-0x14000(%rsp); push %rbp; sub $0x10,%rsp.
  Prologue c2 = decode({0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x10, 0x8b, 0xee}, 0, 4);
  CHECK(c2.built == 12);
  CHECK(steps(c2) == std::vector<FrameStep>{{8, 2, -2}});  // rbp pushed below the return address
  // String.hashCode (C1, JDK 17), 10 words: the inline-cache check (mov
  // 0x8(%rsi),%r10d; movabs; add; cmp; jne; nopw), frameless, then the
  // verified entry at 0x20.
  std::vector<uint8_t> hash_code{0x44, 0x8b, 0x56, 0x08, 0x49, 0xbb, 0, 0, 0, 0x07, 0x26, 0x7f, 0, 0, 0x4d, 0x03,
                                 0xd3, 0x4c, 0x3b, 0xd0, 0x0f, 0x85, 0x06, 0x88, 0x58, 0x07, 0x66, 0x0f, 0x1f, 0x44,
                                 0, 0, 0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x40};
  Prologue c1 = decode(hash_code, 0x20, 10);
  CHECK(c1.built == 0x2c);
  CHECK(steps(c1) == std::vector<FrameStep>{{0x28, 2, -2}});
  // JCTree$JCReturn.accept (C1, JDK 25), 6 words: its entry barrier (cmpl;
  // je; call) follows the frame, before its complete offset (59).
  std::vector<uint8_t> accept{0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x20,
                              0x41, 0x81, 0x7f, 0x20, 0x01, 0, 0, 0, 0x74, 0x05, 0xe8, 0x25, 0xee, 0xf9, 0x06};
  Prologue barrier = decode(accept, 0, 6);
  CHECK(barrier.built == 12);
}

TEST_CASE("prologue: nops HotSpot aligns with are stepped over; what it cannot read gives no answer") {
  // Two 9-byte nops (66 0f 1f 84 00 00 00 00 00), then push rbp; sub $0x20,%rsp.
  std::vector<uint8_t> padded{0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0,
                              0x66, 0x66, 0x90, 0x55, 0x48, 0x83, 0xec, 0x20};
  Prologue p = decode(padded, 0, 6);
  CHECK(p.built == 26);
  CHECK(steps(p) == std::vector<FrameStep>{{22, 2, -2}});
  // A method made not entrant: a jump patched over its verified entry.
  CHECK(decode({0xe9, 0xbb, 0x76, 0x58, 0x07, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x40}, 0, 10).built == -1);
  // A frame other than the one HotSpot said (frame words): no answer.
  CHECK(decode({0x55, 0x48, 0x83, 0xec, 0x10}, 0, 6).built == -1);
  // The frame unfinished where the bytes end.
  CHECK(decode({0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55}, 0, 4).built == -1);
  // rbp stored inside the caller's frame: not a prologue.
  CHECK(decode({0x48, 0x81, 0xec, 0x18, 0, 0, 0, 0x48, 0x89, 0x6c, 0x24, 0x20}, 0, 4).built == -1);
}

// aarch64's, read from Debian 12's OpenJDK 17 in the arm64 guest
// (tests/kernels/matrix.sh) and disassembled with aarch64-linux-gnu-objdump.
TEST_CASE("prologue, aarch64: sub sp, then stp x29, x30 at the frame's top; x30 holds the return address until then") {
  // Prologues.leaf (C2), 4 words: nop; sub sp, sp, #0x20; stp x29, x30,
  // [sp, #16]; sxtw x10, w1 (complete: 12).
  Prologue leaf = decode_aarch64({0xd503201f, 0xd10083ff, 0xa9017bfd, 0x93407c2a}, 0, 4);
  CHECK(leaf.built == 12);
  CHECK(steps(leaf) == std::vector<FrameStep>{{8, 4, 0}});
  // Prologues.middle (C2), 6 words, with a stack bang: nop; sub x9, sp,
  // #0x14, lsl #12; str xzr, [x9]; sub sp, sp, #0x30; stp x29, x30, [sp, #32].
  Prologue middle =
      decode_aarch64({0xd503201f, 0xd14053e9, 0xf900013f, 0xd100c3ff, 0xa9027bfd, 0x93407c3d}, 0, 6);
  CHECK(middle.built == 20);
  CHECK(steps(middle) == std::vector<FrameStep>{{16, 6, 0}});
}

TEST_CASE("prologue, aarch64: a frame record pushed first, then the frame (a native method's wrapper, large frames)") {
  // System.arraycopy's native wrapper, 12 words: the inline-cache check
  // (ldr; cmp; b.eq; b), then at 0x10 nop; the bang; stp x29, x30, [sp,
  // #-16]!; mov x29, sp; sub sp, sp, #0x50 (complete: 0x28).
  std::vector<uint32_t> wrapper{0xb9400828, 0x6b08013f, 0x54000040, 0x17eac68d, 0xd503201f, 0xd14053e9,
                                0xf900013f, 0xa9bf7bfd, 0x910003fd, 0xd10143ff, 0x93407ca6};
  Prologue p = decode_aarch64(wrapper, 0x10, 12);
  CHECK(p.built == 0x28);
  CHECK(steps(p) == std::vector<FrameStep>{{0x20, 2, -2}});
  // Over 4 KiB (assembled): stp x29, x30, [sp, #-16]!; mov x29, sp; mov
  // x8, #0x1010; sub sp, sp, x8; paciasp and bti c (hints) before.
  Prologue large =
      decode_aarch64({0xd503233f, 0xd503245f, 0xa9bf7bfd, 0x910003fd, 0xd2820208, 0xcb2863ff}, 0, (0x1010 + 16) / 8);
  CHECK(large.built == 24);
  CHECK(steps(large) == std::vector<FrameStep>{{12, 2, -2}});
}

TEST_CASE("prologue, aarch64: what it cannot read gives no answer") {
  // Prologues.middle made not entrant (C1, 10 words): b patched over the nop.
  CHECK(decode_aarch64({0x15d4c790, 0xd14053e9, 0xf900013f, 0xd10143ff, 0xa9047bfd}, 0, 10).built == -1);
  // A frame other than HotSpot's size.
  CHECK(decode_aarch64({0xd503201f, 0xd10083ff, 0xa9017bfd}, 0, 6).built == -1);
  // The record stored elsewhere than the frame's top.
  CHECK(decode_aarch64({0xd503201f, 0xd10083ff, 0xa9007bfd}, 0, 4).built == -1);
  // Registers pushed after the record (a runtime stub's save_live_registers):
  // stp x0, x1, [sp, #-240]! is no prologue instruction.
  CHECK(decode_aarch64({0xa9bf7bfd, 0x910003fd, 0xa9b107e0}, 0, 64).built == -1);
  // Bytes ending mid-instruction.
  CHECK(decode_aarch64({0xd503201f, 0xd10083ff}, 0, 4).built == -1);
}

// C2's runtime stubs (HotSpot: never complete), whose frame the agent
// publishes only where the prologue leaves fp alone: one that points fp at
// its frame (enter()) is walked by it.
TEST_CASE("prologue: a stub's frame, and whether its prologue points fp at it") {
  // _new_array_Java (JDK 17, x86_64), 2 words: sub $0x8,%rsp; mov %rbp,(%rsp); mov %rsp,0x290(%r15).
  Prologue stub = decode({0x48, 0x81, 0xec, 0x08, 0, 0, 0, 0x48, 0x89, 0x2c, 0x24, 0x49, 0x89, 0xa7, 0x90, 0x02, 0, 0},
                         0, 2);
  CHECK(stub.built == 11);
  CHECK(steps(stub) == std::vector<FrameStep>{{7, 2, 0}});
  CHECK_FALSE(stub.sets_fp);
  // enter(): push %rbp; mov %rsp,%rbp, a frame of 2 words built at 1.
  Prologue enter = decode({0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10}, 0, 2);
  CHECK(enter.built == 1);
  CHECK(enter.sets_fp);
  // _new_instance_Java (JDK 17, aarch64), 2 words: nop; sub sp, sp, #0x10; stp x29, x30, [sp]; mov x9, sp.
  Prologue arm = decode_aarch64({0xd503201f, 0xd10043ff, 0xa9007bfd, 0x910003e9}, 0, 2);
  CHECK(arm.built == 12);
  CHECK(steps(arm) == std::vector<FrameStep>{{8, 2, 0}});
  CHECK_FALSE(arm.sets_fp);
  // enter() on aarch64: stp x29, x30, [sp, #-16]!; mov x29, sp.
  Prologue arm_enter = decode_aarch64({0xa9bf7bfd, 0x910003fd, 0xd10003bf}, 0, 2);
  CHECK(arm_enter.built == 4);
  CHECK(arm_enter.sets_fp);
}
