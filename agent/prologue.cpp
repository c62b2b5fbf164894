#include "agent/prologue.h"

#include <cstring>

namespace ember::agent {
namespace {

int32_t imm32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool starts(const uint8_t* p, size_t left, size_t length, const uint8_t (&opcode)[3]) {
  return left >= length && p[0] == opcode[0] && p[1] == opcode[1] && p[2] == opcode[2];
}

// The length of one of the nops HotSpot aligns with (0x66 prefixes, then
// 0x90 or 0f 1f /0 with its addressing bytes), 0 if `p` holds none.
size_t nop_length(const uint8_t* p, size_t left) {
  size_t i = 0;
  while (i < left && p[i] == 0x66) ++i;
  if (i < left && p[i] == 0x90) return i + 1;
  if (i + 2 >= left || p[i] != 0x0f || p[i + 1] != 0x1f) return 0;
  uint8_t modrm = p[i + 2], mod = modrm >> 6;
  size_t length = i + 3 + ((modrm & 7) == 4 && mod != 3 ? 1 : 0) + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
  return length <= left ? length : 0;
}

// What one prologue instruction does to the frame.
struct Effect {
  size_t length = 0;      // 0: not a prologue instruction
  int32_t grows = 0;      // bytes sp goes down by
  bool saves_fp = false;  // the fp stored at sp + fp_at, after the instruction
  int32_t fp_at = 0;
  bool sets_fp = false;  // fp = sp + a constant: a frame pointer
};

Effect x86_64_effect(const uint8_t* p, size_t left) {
  static constexpr uint8_t kStackBang[3] = {0x89, 0x84, 0x24};     // mov [rsp+disp32], eax
  static constexpr uint8_t kSubRsp8[3] = {0x48, 0x83, 0xec};       // sub rsp, imm8
  static constexpr uint8_t kSubRsp32[3] = {0x48, 0x81, 0xec};      // sub rsp, imm32
  static constexpr uint8_t kSaveRbp[3] = {0x48, 0x89, 0x2c};       // mov [rsp], rbp (SIB 24)
  static constexpr uint8_t kSaveRbp8[3] = {0x48, 0x89, 0x6c};      // mov [rsp+disp8], rbp (SIB 24)
  static constexpr uint8_t kSaveRbp32[3] = {0x48, 0x89, 0xac};     // mov [rsp+disp32], rbp (SIB 24)
  static constexpr uint8_t kMovRbpRsp[3] = {0x48, 0x89, 0xe5};     // mov rbp, rsp (-XX:+PreserveFramePointer)
  static constexpr uint8_t kMovRbpRspAlt[3] = {0x48, 0x8b, 0xec};
  static constexpr uint8_t kAddRbp8[3] = {0x48, 0x83, 0xc5};       // add rbp, imm (the same, without a bang)
  static constexpr uint8_t kAddRbp32[3] = {0x48, 0x81, 0xc5};
  if (left >= 1 && p[0] == 0x55) return {1, 8, true, 0};  // push rbp
  if (starts(p, left, 7, kStackBang)) return {7};
  if (starts(p, left, 4, kSubRsp8)) return {4, static_cast<int8_t>(p[3])};
  if (starts(p, left, 7, kSubRsp32)) return {7, imm32(p + 3)};
  if (starts(p, left, 4, kSaveRbp) && p[3] == 0x24) return {4, 0, true, 0};
  if (starts(p, left, 5, kSaveRbp8) && p[3] == 0x24) return {5, 0, true, static_cast<int8_t>(p[4])};
  if (starts(p, left, 8, kSaveRbp32) && p[3] == 0x24) return {8, 0, true, imm32(p + 4)};
  if (starts(p, left, 3, kMovRbpRsp) || starts(p, left, 3, kMovRbpRspAlt)) return {.length = 3, .sets_fp = true};
  if (starts(p, left, 4, kAddRbp8)) return {.length = 4, .sets_fp = true};
  if (starts(p, left, 7, kAddRbp32)) return {.length = 7, .sets_fp = true};
  return {nop_length(p, left)};
}

// aarch64's instructions, each a 32-bit word. x8 (rscratch1) is followed
// for frames whose size needs a register.
class Aarch64Effect {
 public:
  Effect operator()(const uint8_t* p, size_t left) {
    if (left < 4) return {};
    uint32_t w;
    std::memcpy(&w, p, sizeof w);
    const int32_t imm12 = static_cast<int32_t>((w >> 10) & 0xfff) << ((w >> 22 & 1) ? 12 : 0);
    // stp's signed 7-bit offset, in words.
    const int32_t imm7 = static_cast<int32_t>(((w >> 15) & 0x7f) ^ 0x40) - 0x40;
    const uint32_t imm16 = (w >> 5) & 0xffff, shift = 16 * ((w >> 21) & 3);
    if ((w & 0xfffff01f) == 0xd503201f) return {4};  // a hint: nop, bti, paciasp
    // The stack bang: sub x9, sp, N (lsl 12); [sub x9, x9, M;] str xzr, [x9].
    if ((w & 0xff8003ff) == 0xd10003e9 || (w & 0xff8003ff) == 0xd1000129 || w == 0xf900013f) return {4};
    if ((w & 0xff80001f) == 0xd2800008) {  // movz x8, imm16, lsl shift
      x8_ = uint64_t{imm16} << shift;
      return {4};
    }
    if ((w & 0xff80001f) == 0xf2800008) {  // movk x8, imm16, lsl shift
      x8_ = (x8_ & ~(uint64_t{0xffff} << shift)) | uint64_t{imm16} << shift;
      return {4};
    }
    if ((w & 0xff8003ff) == 0xd10003ff) return {4, imm12};  // sub sp, sp, imm
    if (w == 0xcb2863ff && x8_ <= (1 << 20)) return {4, static_cast<int32_t>(x8_)};  // sub sp, sp, x8
    if ((w & 0xffc07fff) == 0xa9007bfd) return {4, 0, true, imm7 * 8};  // stp x29, x30, [sp, imm]
    if ((w & 0xffc07fff) == 0xa9807bfd) return {4, -imm7 * 8, true, 0};  // stp x29, x30, [sp, imm]!
    if ((w & 0xff8003ff) == 0xd10003fd || (w & 0xff8003ff) == 0x910003fd)  // x29 = sp -/+ imm
      return {.length = 4, .sets_fp = true};
    return {};
  }

 private:
  uint64_t x8_ = 0;
};

// Follows the prologue from `cfa`, the bytes from sp to the caller's sp at
// the verified entry, to the whole frame.
template <typename EffectOf>
Prologue follow(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words, int32_t cfa,
                EffectOf effect_of) {
  Prologue p;
  int32_t fp_slot = 0;  // where the caller's fp is, in words from its sp
  for (size_t at = 0; at < size;) {
    Effect e = effect_of(code + at, size - at);
    if (e.length == 0 || e.grows < 0 || e.grows > (1 << 20) || e.grows % 8 != 0) break;
    at += e.length;
    p.sets_fp |= e.sets_fp;
    if (e.grows == 0 && !e.saves_fp) continue;
    cfa += e.grows;
    if (e.saves_fp) {
      int32_t from_cfa = e.fp_at - cfa;
      if (from_cfa % 8 != 0 || from_cfa >= 0) break;
      fp_slot = from_cfa / 8;
    }
    uint32_t offset = entry + static_cast<uint32_t>(at);
    if (cfa == frame_words * 8 && fp_slot == -2) {
      p.built = static_cast<int32_t>(offset);
      // enter() (push rbp; mov rbp, rsp) builds a frame of 2 words first.
      p.sets_fp |= effect_of(code + at, size - at).sets_fp;
      return p;
    }
    if (p.count == Prologue::kMaxSteps) break;
    p.steps[p.count++] = {offset, cfa / 8, fp_slot};
  }
  return {};
}

}  // namespace

Prologue decode_x86_64_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words) {
  return follow(code, size, entry, frame_words, 8, x86_64_effect);  // the return address on top
}

Prologue decode_aarch64_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words) {
  return follow(code, size, entry, frame_words, 0, Aarch64Effect{});  // the return address in x30
}

}  // namespace ember::agent
