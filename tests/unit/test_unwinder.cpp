#include <catch2/catch.hpp>

#include <elfutils/libdwelf.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "symbolizer/jit_map.h"
#include "symbolizer/proc_maps.h"
#include "symbolizer/symbolizer.h"
#include "temp_dir.h"
#include "unwind/row_space.h"
#include "user/session/unwinder.h"

using namespace ember;

namespace {

// The end of this thread's stack mapping (the main thread's: [stack]).
uint64_t stack_end(uint64_t sp) {
  std::vector<symbolizer::Mapping> maps = symbolizer::read_proc_maps("/proc/self/maps").value();
  for (const symbolizer::Mapping& m : maps)
    if (sp >= m.start && sp < m.end) return m.end;
  return 0;
}

// A stack copy as the kernel sends it (bpf/unwind.h's EMBER_COPY_*): the
// registers, then the stack from sp up.
std::vector<__u64> stack_copy(uint64_t ip, uint64_t sp, uint64_t bp, const std::vector<__u64>& stack) {
  std::vector<__u64> copy(EMBER_COPY_HEADER);
  copy[EMBER_COPY_IP] = ip;
  copy[EMBER_COPY_SP] = sp;
  copy[EMBER_COPY_BP] = bp;
  copy.insert(copy.end(), stack.begin(), stack.end());
  return copy;
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
  copy = stack_copy(ip, sp, bp, {});
  copy.resize(EMBER_COPY_HEADER + (end - sp) / 8);
  copy_words(copy.data() + EMBER_COPY_HEADER, reinterpret_cast<const volatile uint64_t*>(sp), (end - sp) / 8);
  reference.resize(EMBER_MAX_STACK_DEPTH);
  reference.resize(static_cast<size_t>(backtrace(reference.data(), static_cast<int>(reference.size()))));
  asm volatile("" ::: "memory");
}

// Unwinds this thread's stack from a copy, as the kernel sends it, with the
// tables `unwinder` holds for this process: as backtrace() has it.
void check_unwinds_as_backtrace(const Unwinder& unwinder) {
  std::vector<__u64> copy;
  std::vector<void*> reference;
  capture(copy, reference);
  __u64 frames[EMBER_MAX_STACK_DEPTH];
  auto [n, stop] = unwinder.unwind_copy(static_cast<uint32_t>(getpid()), copy, frames);
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
}

// An unwinder whose rows map, of `capacity` rows, is a BPF array as the
// Sampler makes it (root: CAP_BPF), made mmapable so the tests can look in.
std::unique_ptr<Unwinder> open_unwinder(uint32_t capacity, int& rows, uint32_t mode = EMBER_UNWIND_CFI) {
  LIBBPF_OPTS(bpf_map_create_opts, mmapable, .map_flags = BPF_F_MMAPABLE);
  rows = bpf_map_create(BPF_MAP_TYPE_ARRAY, "test_rows", 4, sizeof(ember_unwind_row), capacity, &mmapable);
  INFO("bpf_map_create: " << std::strerror(errno) << " (the unwinder's tests need root)");
  REQUIRE(rows >= 0);
  auto unwinder = Unwinder::open({.rows_fd = rows, .rows_capacity = capacity}, mode);
  REQUIRE(unwinder);
  return std::move(*unwinder);
}

// Process ids no process can have (above the kernel's PID_MAX_LIMIT, 2^22),
// for processes the tests make up: pids wrap, and the test's own may be any.
constexpr uint32_t kMadeUpPid = 1u << 23;

}  // namespace

TEST_CASE("unwinder: a copied stack unwinds as glibc's backtrace() does, to the thread's root", "[unwind]") {
  int rows;
  auto unwinder = open_unwinder(1 << 20, rows);
  symbolizer::Symbolizer symbolizer;
  REQUIRE(symbolizer.snapshot_process(static_cast<uint32_t>(getpid())));
  unwinder->add_process(static_cast<uint32_t>(getpid()), symbolizer.mapped_files(static_cast<uint32_t>(getpid())));
  CHECK(unwinder->stats().tables >= 2);  // this binary and libc at least
  CHECK(unwinder->stats().processes_left_out == 1);  // no kernel map here

  check_unwinds_as_backtrace(*unwinder);
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
    std::vector<__u64> copy = stack_copy(start + c.pc, kSp, 0x5555, c.stack);
    __u64 frames[EMBER_MAX_STACK_DEPTH];
    auto [n, stop] = unwinder->unwind_copy(pid, copy, frames);
    REQUIRE(n == 2);
    CHECK(frames[1] == kCaller);
    CHECK(stop == EMBER_STOP_UNMAPPED);
  }
  munmap(code, page);
  close(rows);
}

TEST_CASE("unwinder: a frame outside every mapping is code mapped since, unless frame pointers led there",
          "[unwind]") {
  int rows;
  auto unwinder = open_unwinder(1 << 16, rows, EMBER_UNWIND_AUTO);
  constexpr uint32_t kPid = kMadeUpPid;
  constexpr uint64_t kSp = 0x7ffc0000, kUnmapped = 0x5000, kNoTable = 0x10000;
  // Code without a table (a JIT's): walked by frame pointers.
  symbolizer::Mapping jit{kNoTable, kNoTable + 0x1000, 0, 0, 0, true, ""};
  unwinder->add_process(kPid, std::vector<symbolizer::Symbolizer::MappedFile>{{&jit, -1}});
  __u64 frames[EMBER_MAX_STACK_DEPTH];

  // The leaf outside: the process mapped code since its tables were made.
  // The collector reads its mappings again, not frame pointers.
  auto [n, stop] = unwinder->unwind_copy(kPid, stack_copy(kUnmapped, kSp, kSp, {0, kUnmapped}), frames);
  CHECK(n == 1);
  CHECK(stop == EMBER_STOP_UNMAPPED);

  // Reached by frame pointers (from code without a table): a guess, which
  // the walk follows on by frame pointers as it came.
  std::tie(n, stop) = unwinder->unwind_copy(kPid, stack_copy(kNoTable + 0x10, kSp, kSp, {0, kUnmapped}), frames);
  REQUIRE(n == 2);
  CHECK(frames[1] == kUnmapped);
  CHECK(stop == EMBER_STOP_FP_END);

  // A wild frame pointer at the top of the address space: no read wraps
  // around into the copy (this once read far outside it and crashed).
  for (uint64_t wild : {~uint64_t{0} - 15, ~uint64_t{0} - 7, ~uint64_t{0}}) {
    CAPTURE(wild);
    std::tie(n, stop) = unwinder->unwind_copy(kPid, stack_copy(kNoTable + 0x10, kSp, wild, {0, kUnmapped}), frames);
    CHECK(n == 1);
    CHECK(stop == EMBER_STOP_NOT_LOADED);
  }

  // A process with more mappings than its entry holds: the leaf may be in
  // one left out, walked by frame pointers too.
  std::vector<symbolizer::Mapping> many;
  for (uint64_t i = 0; i <= EMBER_UNWIND_MAPPINGS; ++i) many.push_back({0x100000 + i * 0x2000, 0x101000 + i * 0x2000, 0, 0, 0, true, ""});
  std::vector<symbolizer::Symbolizer::MappedFile> files;
  for (const auto& m : many) files.push_back({&m, -1});
  unwinder->add_process(kPid, files);
  std::tie(n, stop) = unwinder->unwind_copy(kPid, stack_copy(kUnmapped, kSp, kSp, {0, kUnmapped}), frames);
  CHECK(n == 2);
  CHECK(stop == EMBER_STOP_FP_END);
  close(rows);
}

TEST_CASE("row space: a range given back is reused only after the readers' grace, merged with its neighbours",
          "[unwind]") {
  unwind::RowSpace space(100);
  REQUIRE(space.allocate(30) == 0u);
  REQUIRE(space.allocate(30) == 30u);
  REQUIRE(space.allocate(40) == 60u);
  CHECK(space.used() == 100);
  CHECK(!space.allocate(1));
  CHECK(!space.allocate(0));
  space.release(30, 30);
  CHECK(space.used() == 70);
  CHECK(space.waiting() == 30);
  CHECK(!space.allocate(1));  // a walk may still be reading it
  space.grace_passed();
  CHECK(space.waiting() == 0);
  space.release(0, 30);
  space.grace_passed();
  CHECK(space.free_ranges() == 1);  // [0, 60) whole again
  CHECK(space.largest_free() == 60);
  CHECK(space.allocate(60) == 0u);
  CHECK(!space.allocate(101));
}

TEST_CASE("row space: the smallest free range that fits is taken, large ones stay whole", "[unwind]") {
  unwind::RowSpace space(1000);
  for (uint32_t i = 0; i < 10; ++i) REQUIRE(space.allocate(100) == i * 100);
  space.release(100, 100);  // a hole of 100
  space.release(400, 100);  // and one of 300, once merged
  space.release(500, 100);
  space.release(600, 100);
  space.grace_passed();
  CHECK(space.free_ranges() == 2);
  CHECK(space.allocate(50) == 100u);   // into the hole of 100, not the 300
  CHECK(space.allocate(300) == 400u);  // the 300 still whole
  CHECK(space.allocate(50) == 150u);
  CHECK(space.free_ranges() == 0);
}

TEST_CASE("row space: churn of tables of every size never overlaps two live ranges and gives every row back",
          "[unwind]") {
  constexpr uint32_t kCapacity = 1 << 20;
  unwind::RowSpace space(kCapacity);
  std::mt19937 random(14);
  // Sizes as binaries have them: mostly small, a few of 100,000 rows and more.
  auto size = [&] { return 1 + uint32_t(std::exponential_distribution<double>(1.0 / 8000)(random)) % 300000; };
  std::vector<uint8_t> owner(kCapacity);  // 0 free, 1 live, 2 given back, waiting
  struct Range {
    uint32_t first, rows;
  };
  std::vector<Range> live, waiting;
  uint64_t used = 0, failed = 0;
  for (int step = 0; step < 50000; ++step) {
    int what = std::uniform_int_distribution<int>(0, 9)(random);
    if (what < 5) {
      uint32_t rows = size();
      auto first = space.allocate(rows);
      if (!first) {
        ++failed;
        CHECK(space.largest_free() < rows);
        continue;
      }
      REQUIRE(uint64_t(*first) + rows <= kCapacity);
      auto range = owner.begin() + *first;
      // Neither live nor waiting for the grace.
      REQUIRE(std::all_of(range, range + rows, [](uint8_t o) { return o == 0; }));
      std::fill(range, range + rows, 1);
      live.push_back({*first, rows});
      used += rows;
    } else if (what < 9 && !live.empty()) {
      size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(random);
      Range r = live[i];
      live[i] = live.back();
      live.pop_back();
      space.release(r.first, r.rows);
      std::fill(owner.begin() + r.first, owner.begin() + r.first + r.rows, 2);
      waiting.push_back(r);
      used -= r.rows;
    } else {
      space.grace_passed();
      for (const Range& r : waiting) std::fill(owner.begin() + r.first, owner.begin() + r.first + r.rows, 0);
      waiting.clear();
    }
    REQUIRE(space.used() == used);
  }
  INFO(failed << " allocations did not fit");
  CHECK(failed > 0);  // the space was full at times: fragmentation was tested
  for (const Range& r : live) space.release(r.first, r.rows);
  space.grace_passed();
  CHECK(space.used() == 0);
  CHECK(space.free_ranges() == 1);
  CHECK(space.largest_free() == kCapacity);
}

namespace {

// Copies of a binary, each with a build-id of its own: as many binaries to
// the unwinder, with the same table.
struct DistinctBuilds {
  TempDir dir;
  std::string image;
  size_t id_at = 0, id_size = 0;

  explicit DistinctBuilds(const char* path) {
    std::ifstream in(path, std::ios::binary);
    image.assign(std::istreambuf_iterator<char>(in), {});
    elf_version(EV_CURRENT);
    Elf* elf = elf_memory(image.data(), image.size());
    REQUIRE(elf);
    const void* id = nullptr;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    REQUIRE(n > 0);
    id_at = static_cast<const char*>(id) - image.data();
    id_size = static_cast<size_t>(n);
    elf_end(elf);
  }
  // Build `i`, open; and its mapping, as /proc/PID/maps lists a program's code.
  int open(uint32_t i, symbolizer::Mapping& m) {
    std::string copy = image;
    std::memcpy(copy.data() + id_at, &i, std::min(sizeof i, id_size));
    std::string path = (dir.path / ("build-" + std::to_string(i))).string();
    std::ofstream(path, std::ios::binary) << copy;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    struct stat st;
    REQUIRE(fstat(fd, &st) == 0);
    m = {0x400000, 0x400000 + 0x10000, 0, st.st_dev, st.st_ino, true, path};
    return fd;
  }
};

}  // namespace

TEST_CASE("unwinder: processes come and go, a stream of binaries through a small row space; tables reused, "
          "rows bounded, unwinding still exact",
          "[unwind]") {
  DistinctBuilds builds("/bin/true");
  // Room for the tables of about 8 such binaries, and of this test's process.
  int rows;
  auto probe = open_unwinder(1 << 16, rows);
  symbolizer::Mapping m;
  int fd = builds.open(0, m);
  std::vector<symbolizer::Symbolizer::MappedFile> files{{&m, fd}};
  probe->add_process(kMadeUpPid, files);
  const uint64_t table_rows = probe->stats().rows;
  REQUIRE(table_rows > 0);
  close(fd);
  close(rows);

  symbolizer::Symbolizer symbolizer;
  uint32_t self = static_cast<uint32_t>(getpid());
  REQUIRE(symbolizer.snapshot_process(self));
  auto unwinder = open_unwinder(1 << 20, rows);
  unwinder->add_process(self, symbolizer.mapped_files(self));
  const uint64_t self_rows = unwinder->stats().rows;
  close(rows);
  unwinder = open_unwinder(static_cast<uint32_t>(self_rows + 8 * table_rows), rows);
  unwinder->add_process(self, symbolizer.mapped_files(self));

  // A short-lived process of each build in turn; then, at once, a process
  // of each build still idle (the latest): their tables are not rebuilt.
  constexpr uint32_t kBuilds = 300;
  for (uint32_t i = 0; i < kBuilds; ++i) {
    fd = builds.open(i, m);
    files = {{&m, fd}};
    unwinder->add_process(kMadeUpPid + 1000 + i, files);
    close(fd);
    unwinder->remove_process(kMadeUpPid + 1000 + i);
    REQUIRE(unwinder->stats().rows <= self_rows + 8 * table_rows);
    REQUIRE(unwinder->stats().over_cap.empty());
  }
  UnwinderStats s = unwinder->stats();
  CHECK(s.processes_held == 1);
  CHECK(s.tables_evicted >= kBuilds - 8);
  REQUIRE(s.idle_tables >= 1);
  CHECK(s.idle_tables <= 8);
  CHECK(s.reader_waits > 0);
  for (uint32_t i = kBuilds - s.idle_tables; i < kBuilds; ++i) {
    fd = builds.open(i, m);
    files = {{&m, fd}};
    unwinder->add_process(kMadeUpPid + 2000 + i, files);
    close(fd);
  }
  CHECK(unwinder->stats().build_ms == s.build_ms);  // nothing built again
  CHECK(unwinder->stats().tables == s.tables);
  CHECK(unwinder->stats().idle_tables == 0);
  for (uint32_t i = kBuilds - s.idle_tables; i < kBuilds; ++i) unwinder->remove_process(kMadeUpPid + 2000 + i);

  // This process's tables were never moved nor overwritten.
  check_unwinds_as_backtrace(*unwinder);
  close(rows);
}

TEST_CASE("unwinder: JIT code changes into fresh rows, never over rows a walk may read; a removed process gives "
          "them back",
          "[unwind]") {
  int rows;
  auto unwinder = open_unwinder(1 << 20, rows);
  const auto* map = static_cast<const ember_unwind_row*>(
      mmap(nullptr, (1 << 20) * sizeof(ember_unwind_row), PROT_READ, MAP_SHARED, rows, 0));
  REQUIRE(map != MAP_FAILED);
  uint32_t pid = 77;
  symbolizer::Mapping cache{0x10000000, 0x20000000, 0, 0, 0, true, ""};
  std::vector<symbolizer::Symbolizer::MappedFile> files{{&cache, -1}};
  unwinder->add_process(pid, files);
  // `methods` frameless methods of `size` bytes, 0x100 apart: 2 rows each.
  auto code = [](size_t methods, uint32_t size) {
    std::vector<symbolizer::JitMap::Code> code(methods);
    for (size_t i = 0; i < methods; ++i) {
      code[i].start = 0x10000000 + i * 0x100;
      code[i].size = size;
      code[i].frame_words = 0;
    }
    return code;
  };
  // Each version's rows, as the kernel's entry saw them: none is written
  // over by the versions after it (the kernel may still be reading one).
  std::vector<std::vector<ember_unwind_row>> versions;
  std::vector<const ember_unwind_row*> at;
  // (Two halves rewritten in turn would put the third over the first.)
  const std::vector<std::pair<size_t, uint32_t>> changes{{10, 0x40}, {10, 0x50}, {10, 0x60}, {20000, 0x70}, {5, 0x78}};
  for (auto [methods, size] : changes) {
    unwinder->set_jit_code(pid, code(methods, size));
    CHECK(unwinder->stats().rows == 2 * methods);
    // The new rows, found in the map by their content (each version's own).
    std::vector<ember_unwind_row> expected;
    for (size_t i = 0; i < methods; ++i) {
      expected.push_back({.pc = uint32_t(i * 0x100), .cfa = 8, .type = EMBER_ROW_CFA_SP, .ra = EMBER_RA_CFA, .fp = 0});
      expected.push_back({.pc = uint32_t(i * 0x100 + size), .cfa = 0, .type = EMBER_ROW_NONE, .ra = EMBER_RA_CFA, .fp = 0});
    }
    const ember_unwind_row* found = nullptr;
    for (uint32_t first = 0; first + expected.size() <= (1u << 20) && !found; ++first)
      if (std::memcmp(map + first, expected.data(), expected.size() * sizeof(ember_unwind_row)) == 0)
        found = map + first;
    REQUIRE(found);
    versions.push_back(expected);
    at.push_back(found);
    for (size_t v = 0; v < versions.size(); ++v)
      CHECK(std::memcmp(at[v], versions[v].data(), versions[v].size() * sizeof(ember_unwind_row)) == 0);
  }
  CHECK(unwinder->stats().rows_waiting == 2 * (10 + 10 + 10 + 20000));
  unwinder->remove_process(pid);
  CHECK(unwinder->stats().rows == 0);
  CHECK(unwinder->stats().processes_held == 0);
  munmap(const_cast<ember_unwind_row*>(map), (1 << 20) * sizeof(ember_unwind_row));
  close(rows);
}

TEST_CASE("unwinder: a process the kernel has no room for is counted once, however often it is given", "[unwind]") {
  int rows;
  auto unwinder = open_unwinder(1 << 16, rows);  // no kernel map: every process is left out
  std::vector<symbolizer::Symbolizer::MappedFile> none;
  unwinder->add_process(5, none);
  unwinder->add_process(5, none);  // its mappings read again
  unwinder->add_process(6, none);
  CHECK(unwinder->stats().processes_left_out == 2);
  unwinder->remove_process(5);
  unwinder->add_process(5, none);  // a new process with the pid
  CHECK(unwinder->stats().processes_left_out == 3);
  CHECK(unwinder->stats().processes_held == 2);
  close(rows);
}

TEST_CASE("unwinder: the kernel's row cache key: each table written has an id no other had, in every mapping "
          "that uses it",
          "[unwind]") {
  constexpr uint32_t kCapacity = 1 << 20;
  int rows = bpf_map_create(BPF_MAP_TYPE_ARRAY, "test_rows", 4, sizeof(ember_unwind_row), kCapacity, nullptr);
  int processes = bpf_map_create(BPF_MAP_TYPE_HASH, "test_procs", 4, sizeof(ember_unwind_process), 8, nullptr);
  INFO("bpf_map_create: " << std::strerror(errno) << " (the unwinder's tests need root)");
  REQUIRE(rows >= 0);
  REQUIRE(processes >= 0);
  auto unwinder = Unwinder::open({.rows_fd = rows, .rows_capacity = kCapacity, .processes_fd = processes}, EMBER_UNWIND_CFI);
  REQUIRE(unwinder);
  auto entry = [&](uint32_t pid) {
    ember_unwind_process e{};
    REQUIRE(bpf_map_lookup_elem(processes, &pid, &e) == 0);
    return e;
  };

  // This process: a binary's mappings share its table's id, other binaries'
  // ids differ.
  symbolizer::Symbolizer symbolizer;
  uint32_t self = static_cast<uint32_t>(getpid());
  REQUIRE(symbolizer.snapshot_process(self));
  (*unwinder)->add_process(self, symbolizer.mapped_files(self));
  ember_unwind_process e = entry(self);
  std::map<uint32_t, uint32_t> id_of_first;  // a table's first row -> its id
  std::set<uint32_t> ids;
  for (uint32_t i = 0; i < e.count; ++i) {
    const ember_unwind_mapping& m = e.mappings[i];
    if (!m.rows) continue;
    CHECK(m.table != 0);
    auto [at, added] = id_of_first.emplace(m.first, m.table);
    CHECK(at->second == m.table);
    if (added) ids.insert(m.table);
  }
  REQUIRE(ids.size() >= 3);  // the test binary, libc, libstdc++ at least
  CHECK(ids.size() == id_of_first.size());

  // A JVM's code cache: each version of its rows a new id, though a later
  // version may land where an earlier one's rows were.
  uint32_t jvm = kMadeUpPid;
  symbolizer::Mapping cache{0x10000000, 0x20000000, 0, 0, 0, true, ""};
  std::vector<symbolizer::Symbolizer::MappedFile> files{{&cache, -1}};
  (*unwinder)->add_process(jvm, files);
  for (uint32_t version = 0; version < 4; ++version) {
    std::vector<symbolizer::JitMap::Code> code(1);
    code[0].start = 0x10000000;
    code[0].size = 0x40 + version;
    (*unwinder)->set_jit_code(jvm, code);
    ember_unwind_mapping m = entry(jvm).mappings[0];
    REQUIRE(m.rows > 0);
    CHECK(ids.insert(m.table).second);
  }
  close(processes);
  close(rows);
}
