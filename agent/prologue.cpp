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
  size_t length = 0;       // 0: not a prologue instruction
  int32_t grows = 0;       // bytes rsp goes down by
  bool saves_rbp = false;  // rbp stored at rsp + rbp_at, after the instruction
  int32_t rbp_at = 0;
};

Effect effect_of(const uint8_t* p, size_t left) {
  static constexpr uint8_t kStackBang[3] = {0x89, 0x84, 0x24};     // mov [rsp+disp32], eax
  static constexpr uint8_t kSubRsp8[3] = {0x48, 0x83, 0xec};       // sub rsp, imm8
  static constexpr uint8_t kSubRsp32[3] = {0x48, 0x81, 0xec};      // sub rsp, imm32
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
  if (starts(p, left, 5, kSaveRbp8) && p[3] == 0x24) return {5, 0, true, static_cast<int8_t>(p[4])};
  if (starts(p, left, 8, kSaveRbp32) && p[3] == 0x24) return {8, 0, true, imm32(p + 4)};
  if (starts(p, left, 3, kMovRbpRsp) || starts(p, left, 3, kMovRbpRspAlt)) return {3};
  if (starts(p, left, 4, kAddRbp8)) return {4};
  if (starts(p, left, 7, kAddRbp32)) return {7};
  return {nop_length(p, left)};
}

}  // namespace

Prologue decode_prologue(const uint8_t* code, size_t size, uint32_t entry, int32_t frame_words) {
  Prologue p;
  int32_t cfa = 8, rbp_slot = 0;  // bytes from rsp to the caller's rsp; where its rbp is, in words from there
  for (size_t at = 0; at < size;) {
    Effect e = effect_of(code + at, size - at);
    if (e.length == 0 || e.grows < 0 || e.grows > (1 << 20) || e.grows % 8 != 0) break;
    at += e.length;
    if (e.grows == 0 && !e.saves_rbp) continue;
    cfa += e.grows;
    if (e.saves_rbp) {
      int32_t from_cfa = e.rbp_at - cfa;
      if (from_cfa % 8 != 0 || from_cfa >= 0) break;
      rbp_slot = from_cfa / 8;
    }
    uint32_t offset = entry + static_cast<uint32_t>(at);
    if (cfa == frame_words * 8 && rbp_slot == -2) {
      p.built = static_cast<int32_t>(offset);
      return p;
    }
    if (p.count == Prologue::kMaxSteps) break;
    p.steps[p.count++] = {offset, cfa / 8, rbp_slot};
  }
  return {};
}

}  // namespace ember::agent
