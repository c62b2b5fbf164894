#include <catch2/catch.hpp>

#include <vector>

#include "agent/prologue.h"

using ember::agent::decode_prologue;
using ember::agent::FrameStep;
using ember::agent::Prologue;

namespace {

// The code of a compiled method from its start, its verified entry at `entry`.
Prologue decode(const std::vector<uint8_t>& code, uint32_t entry, int32_t words) {
  return decode_prologue(code.data() + entry, code.size() - entry, entry, words);
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
