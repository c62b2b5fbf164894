#include <catch2/catch.hpp>

#include <execinfo.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

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

}  // namespace

TEST_CASE("unwinder: a copied stack unwinds as glibc's backtrace() does, to the thread's root", "[unwind]") {
  // The rows map: a memfd stands in for the kernel's mmapable array.
  constexpr uint32_t kRows = 1 << 20;
  int rows = memfd_create("rows", MFD_CLOEXEC);
  REQUIRE(rows >= 0);
  REQUIRE(ftruncate(rows, kRows * sizeof(ember_unwind_row)) == 0);
  auto unwinder = Unwinder::open({rows, kRows, -1}, EMBER_UNWIND_CFI);
  REQUIRE(unwinder);
  symbolizer::Symbolizer symbolizer;
  REQUIRE(symbolizer.snapshot_process(static_cast<uint32_t>(getpid())));
  (*unwinder)->add_process(static_cast<uint32_t>(getpid()), symbolizer.mapped_files(static_cast<uint32_t>(getpid())));
  CHECK((*unwinder)->stats().tables >= 2);  // this binary and libc at least
  CHECK((*unwinder)->stats().processes_left_out == 1);  // no kernel map here

  std::vector<__u64> copy;
  std::vector<void*> reference;
  capture(copy, reference);
  __u64 frames[EMBER_MAX_STACK_DEPTH];
  auto [n, stop] = (*unwinder)->unwind_copy(static_cast<uint32_t>(getpid()), copy, frames);
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
