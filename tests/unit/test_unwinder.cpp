#include <catch2/catch.hpp>

#include <execinfo.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "symbolizer/jit_map.h"
#include "symbolizer/proc_maps.h"
#include "symbolizer/symbolizer.h"
#include "user/unwinder.h"

using namespace ember;

namespace {

// The end of this thread's stack mapping (the main thread's: [stack]).
uint64_t stack_end(uint64_t sp) {
  std::ifstream in("/proc/self/maps");
  for (const symbolizer::Mapping& m : symbolizer::parse_proc_maps(in))
    if (sp >= m.start && sp < m.end) return m.end;
  return 0;
}

// The stack as the kernel reads it: ASan's redzones in it are not errors here.
__attribute__((no_sanitize("address"))) void copy_words(__u64* to, const volatile uint64_t* from, size_t words) {
  for (size_t i = 0; i < words; ++i) to[i] = from[i];
}

// What the kernel sends for a process without tables yet (bpf/unwind.h's
// EMBER_COPY_*): this function's registers and the stack above them; and
// glibc's backtrace() from the same function, the reference (libgcc's
// unwinder, which shares no code with ember's).
__attribute__((noinline)) void capture(std::vector<__u64>& copy, std::vector<void*>& reference) {
  uint64_t sp, bp, ip;
  asm volatile("lea (%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
  uint64_t end = stack_end(sp);
  REQUIRE(end > sp);
  copy = {ip, sp, bp, 0};
  copy.resize(EMBER_COPY_HEADER + (end - sp) / 8);
  copy_words(copy.data() + EMBER_COPY_HEADER, reinterpret_cast<const volatile uint64_t*>(sp), (end - sp) / 8);
  reference.resize(EMBER_MAX_STACK_DEPTH);
  reference.resize(static_cast<size_t>(backtrace(reference.data(), static_cast<int>(reference.size()))));
  asm volatile("" ::: "memory");
}

// An unwinder whose rows map, of `capacity` rows, is a memfd standing in
// for the kernel's mmapable array (held open in `rows`).
std::unique_ptr<Unwinder> open_unwinder(uint32_t capacity, int& rows) {
  rows = memfd_create("rows", MFD_CLOEXEC);
  REQUIRE(rows >= 0);
  REQUIRE(ftruncate(rows, capacity * sizeof(ember_unwind_row)) == 0);
  auto unwinder = Unwinder::open({rows, capacity, -1}, EMBER_UNWIND_CFI);
  REQUIRE(unwinder);
  return std::move(*unwinder);
}

}  // namespace

TEST_CASE("unwinder: a copied stack unwinds as glibc's backtrace() does, to the thread's root", "[unwind]") {
  int rows;
  auto unwinder = open_unwinder(1 << 20, rows);
  symbolizer::Symbolizer symbolizer;
  REQUIRE(symbolizer.snapshot_process(static_cast<uint32_t>(getpid())));
  unwinder->add_process(static_cast<uint32_t>(getpid()), symbolizer.mapped_files(static_cast<uint32_t>(getpid())));
  CHECK(unwinder->stats().tables >= 2);  // this binary and libc at least
  CHECK(unwinder->stats().processes_left_out == 1);  // no kernel map here

  std::vector<__u64> copy;
  std::vector<void*> reference;
  capture(copy, reference);
  __u64 frames[EMBER_MAX_STACK_DEPTH];
  auto [n, stop] = unwinder->unwind_copy(static_cast<uint32_t>(getpid()), copy, frames);
  INFO("ember: " << n << " frames, stop " << int(stop) << "; backtrace(): " << reference.size() << " frames");
  CHECK(stop == EMBER_STOP_ROOT);
  // ember's frame 0 is capture() itself; backtrace() may add its own (ASan
  // intercepts it): from capture()'s caller on, both list return addresses.
  for (size_t i = 0; i < std::max(n, reference.size()); ++i)
    UNSCOPED_INFO(i << ": ember 0x" << std::hex << (i < n ? frames[i] : 0) << ", backtrace 0x"
                    << (i < reference.size() ? reinterpret_cast<uint64_t>(reference[i]) : 0));
  REQUIRE(n >= 5);
  auto caller = std::find(reference.begin(), reference.end(), reinterpret_cast<void*>(frames[1]));
  REQUIRE(caller != reference.end());
  std::vector<uint64_t> theirs, ours(frames + 1, frames + n);
  for (auto it = caller; it != reference.end(); ++it) theirs.push_back(reinterpret_cast<uint64_t>(*it));
  CHECK(ours == theirs);
  close(rows);
}

namespace {

// Prologues.middle as C2 compiles it (JDK 17), 4 words: a stack bang, push
// %rbp (0x7), sub $0x10,%rsp (0x8); its body; then add $0x10,%rsp (0x1a),
// pop %rbp (0x1e), the return poll cmp 0x340(%r15),%rsp (0x1f), ja (0x26),
// ret (0x2c). Then JDK 25's tail of the same: pop, cmp 0x28(%r15),%rsp
// (disp8), ja, ret.
const uint8_t kMiddle[] = {0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x10, 0x8b, 0xee, 0x90,
                           0xe8, 0xcc, 0xfc, 0xff, 0xff, 0x4c, 0x63, 0xd5, 0x49, 0x33, 0xc2, 0x48, 0x83, 0xc4, 0x10,
                           0x5d, 0x49, 0x3b, 0xa7, 0x40, 0x03, 0x00, 0x00, 0x0f, 0x87, 0x0e, 0x00, 0x00, 0x00, 0xc3};
const uint8_t kJdk25Tail[] = {0x5d, 0x49, 0x3b, 0x67, 0x28, 0x0f, 0x87, 0x0e, 0x00, 0x00, 0x00, 0xc3};

}  // namespace

TEST_CASE("unwinder: a compiled leaf caught building or tearing down its frame steps to its caller", "[unwind]") {
  int rows;
  auto unwinder = open_unwinder(1 << 16, rows);
  // The code, in this process's memory, where the unwinder reads epilogues from.
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* code = static_cast<uint8_t*>(mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(code != MAP_FAILED);
  std::memcpy(code, kMiddle, sizeof kMiddle);
  std::memcpy(code + 0x100, kJdk25Tail, sizeof kJdk25Tail);
  uint64_t start = reinterpret_cast<uint64_t>(code);
  uint32_t pid = static_cast<uint32_t>(getpid());
  symbolizer::Mapping cache{start, start + page, 0, 0, 0, true, ""};
  std::vector<symbolizer::Symbolizer::MappedFile> files{{&cache, -1}};
  unwinder->add_process(pid, files);
  // The agent's G lines: the frame half built from 8 (after push rbp), whole from 12.
  symbolizer::JitMap map;
  char lines[256];
  std::snprintf(lines, sizeof lines, "M 1 Prologues.middle\nL 0 %lx 2d 1\nG %lx 4 12 8:2:-2\nL 0 %lx c 1\nG %lx 4 0\n",
                (unsigned long)start, (unsigned long)start, (unsigned long)start + 0x100, (unsigned long)start + 0x100);
  map.feed(lines);
  REQUIRE(map.bad_lines() == 0);
  unwinder->set_jit_code(pid, map.live_code());

  // Each pc with the stack as the thread has it there, from rsp up: the
  // caller's return address is 0x1000 (unmapped: the walk stops after it).
  constexpr uint64_t kCaller = 0x1000, kCallerRbp = 0x7777, kSp = 0x7ffc0000;
  struct Case {
    uint64_t pc;
    std::vector<__u64> stack;
  };
  for (const Case& c : std::vector<Case>{{0x0, {kCaller}},                          // the stack bang
                                         {0x7, {kCaller}},                          // push rbp
                                         {0x8, {kCallerRbp, kCaller}},              // sub rsp
                                         {0x14, {1, 2, kCallerRbp, kCaller}},       // the body
                                         {0x1a, {1, 2, kCallerRbp, kCaller}},       // add rsp
                                         {0x1e, {kCallerRbp, kCaller}},             // pop rbp
                                         {0x1f, {kCaller}},                         // the return poll
                                         {0x26, {kCaller}},                         // its ja
                                         {0x2c, {kCaller}},                         // ret
                                         {0x100, {kCallerRbp, kCaller}},            // JDK 25: pop rbp
                                         {0x101, {kCaller}},                        // cmp (disp8)
                                         {0x105, {kCaller}}}) {                     // ja
    CAPTURE(c.pc);
    std::vector<__u64> copy{start + c.pc, kSp, 0x5555, 0};
    copy.insert(copy.end(), c.stack.begin(), c.stack.end());
    __u64 frames[EMBER_MAX_STACK_DEPTH];
    auto [n, stop] = unwinder->unwind_copy(pid, copy, frames);
    REQUIRE(n == 2);
    CHECK(frames[1] == kCaller);
    CHECK(stop == EMBER_STOP_UNMAPPED);
  }
  munmap(code, page);
  close(rows);
}
