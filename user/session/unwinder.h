// Feeds the in-kernel unwinder (bpf/unwind.bpf.c): builds the unwind
// table of each binary a sampled process maps (once per build: a
// container's libc and the host's share one), places it in the kernel's
// rows map under a memory cap, and tells the kernel, per process, where
// the table of each of its mappings lies. Bounded for sessions that run
// for weeks: a process leaves with remove_process(), and a table no
// process maps is kept for the next process of its binary until its rows
// are needed (see Unwinder::kIdleTables).
#pragma once

#include <cstdint>
#include <expected>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <linux/types.h>  // __u32 and friends for profile.h
extern "C" {
#include "profile.h"  // EMBER_MAX_STACK_DEPTH
}
#include "symbolizer/jit_map.h"
#include "symbolizer/symbolizer.h"
#include "unwind/cfi_table.h"
#include "unwind/row_space.h"

namespace ember {

// The kernel maps the tables go into (Sampler::unwind_maps()).
struct UnwindMaps {
  int rows_fd = -1;         // array of ember_unwind_row
  uint32_t rows_capacity = 0;
  int processes_fd = -1;    // hash: tgid -> ember_unwind_process
  int python_processes_fd = -1;  // hash: tgid -> ember_python_process (bpf/python.bpf.c)
  int v8_processes_fd = -1;      // hash: tgid -> ember_v8_process (bpf/v8.bpf.c)
  std::weak_ptr<uint32_t> runtimes_generation{};  // the BPF global, bumped as those two change
};

// Binaries by path, the first few kept: a session that runs for weeks
// meets new ones without end.
struct BinaryList {
  static constexpr size_t kKept = 16;
  std::vector<std::string> first;  // the first kKept
  uint64_t count = 0;
  void add(std::string path) {
    if (first.size() < kKept) first.push_back(std::move(path));
    ++count;
  }
  bool empty() const { return count == 0; }
};

struct UnwinderStats {
  uint64_t tables = 0;        // binaries with a table in the kernel
  uint64_t idle_tables = 0;   // binaries no process maps now, kept for the next (with a table or not)
  uint64_t rows = 0;          // rows used (tables and JIT code), of rows_capacity
  uint64_t rows_capacity = 0;
  uint64_t rows_waiting = 0;  // given back, reusable after the next wait for the kernel's readers
  uint64_t reader_waits = 0;  // such waits (each an RCU grace period)
  double reader_wait_ms = 0;  // time spent in them
  uint64_t tables_evicted = 0;
  double build_ms = 0;        // time spent building tables
  uint64_t processes = 0;     // processes given to the kernel
  uint64_t processes_held = 0;      // processes known now (remove_process forgets one)
  uint64_t processes_left_out = 0;  // processes the kernel's process table had no room for
  uint64_t mappings_left_out = 0;   // a process with more executable mappings than the table holds
  // Binaries walked by frame pointers, and why: no (usable) CFI, unreadable, or
  // their table did not fit under the cap.
  BinaryList without_cfi, unreadable, over_cap;
};

class Unwinder {
 public:
  // `mode`: EMBER_UNWIND_CFI or EMBER_UNWIND_AUTO, as the kernel's.
  static std::expected<std::unique_ptr<Unwinder>, std::string> open(UnwindMaps maps, uint32_t mode);
  ~Unwinder();
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  // Gives the kernel the tables of what process `pid` maps (replacing what
  // it had): called with each snapshot of its mappings.
  void add_process(uint32_t pid, std::span<const symbolizer::Symbolizer::MappedFile> files);
  // Forgets process `pid` (exited, and its stacks unwound): its kernel
  // entry and its JIT code's rows go; the tables it alone mapped become
  // idle. Call it before a new process with the same pid is added.
  void remove_process(uint32_t pid);
  // A JVM's live code (from its agent), as rows for its code cache: compiled
  // frames by the frame size the agent published, the interpreter's and
  // call_stub's by fp, other code by frame pointers. Called as it changes.
  void set_jit_code(uint32_t pid, std::vector<symbolizer::JitMap::Code> code);
  // Unwinds a user stack the kernel copied for lack of tables (a process's
  // first moments; bpf/unwind.h's EMBER_COPY_*), with the tables since
  // given for `pid`, as the kernel would: the frames into `out` (room for
  // EMBER_MAX_STACK_DEPTH), leaf first; their count and EMBER_STOP_* reason.
  // No frame: no tables were given for `pid`.
  std::pair<size_t, uint8_t> unwind_copy(uint32_t pid, std::span<const __u64> copy, __u64* out) const;
  UnwinderStats stats() const;

  // Idle tables kept at most (this machine maps 729 binaries in all): past
  // it, the longest idle goes. Idle tables also go, longest idle first,
  // when a table does not fit in the free rows.
  static constexpr size_t kIdleTables = 1024;

 private:
  Unwinder(UnwindMaps maps, uint32_t mode)
      : maps_(maps), mode_(mode), space_(maps.rows_capacity), index_pc_(maps.rows_capacity / kIndexStride + 1) {}
  using FileId = std::pair<uint64_t, uint64_t>;  // (dev, inode)
  // A binary's rows in the kernel (rows 0: none, frame pointers there).
  struct Table {
    uint32_t first = 0, rows = 0;
    uint32_t table = 0;  // write_rows' id of its rows
    uint64_t base = 0;
    std::vector<unwind::CfiTable::Segment> segments;
    std::string key;              // in by_build_
    uint32_t users = 0;           // processes that map it
    std::vector<FileId> files;    // its entries in by_file_, while it has users
    std::optional<std::list<Table*>::iterator> idle;  // its place in idle_
  };
  struct JitCode {
    uint32_t first = 0, rows = 0;  // in the rows map: a fresh range at each change
    uint32_t table = 0;            // write_rows' id of its rows
    uint64_t base = 0, end = 0;    // the code's range; rows are relative to base
    bool over_cap = false;
  };
  struct Process {
    std::unique_ptr<ember_unwind_process> entry;  // as given to the kernel; none before add_process
    std::vector<symbolizer::Mapping> mappings;    // executable ones
    std::vector<Table*> tables;                   // what its mappings use, each once (not the vDSO's)
    JitCode jit;
    bool given = false, left_out = false;         // counted in stats_.processes, processes_left_out
  };

  Table* table_for(const symbolizer::Mapping& mapping, int fd);
  const Table* known_table(const symbolizer::Mapping& mapping) const;
  void place(Table& t, unwind::CfiTable table, const std::string& name);
  void use(Table& t);
  void unuse(Table& t);
  void evict(Table& t);
  // The first of `rows` free rows, evicting idle tables and waiting for the
  // kernel's readers if it must; none if they do not fit.
  std::optional<uint32_t> allocate_rows(uint64_t rows);
  // Returns once no BPF program that was running is still running.
  bool wait_for_readers();
  // The rows map is written and read through the bpf() syscall, not mapped
  // here: a mapping counts whole in ember's RSS (the kernel maps every page
  // at mmap time) on top of the kernel's own copy. Every kIndexStride-th
  // row's pc is kept here (index_pc_, 1/16 of the rows' memory), so a
  // search reads one window of rows, in one syscall: a search by lookups,
  // one per step, took 90% of the collector's time under a sampling storm.
  // The rows get an id, never another's (0 if they could not be written):
  // the kernel's walks cache rows by it (bpf/unwind.bpf.h).
  uint32_t write_rows(uint32_t first, std::span<const ember_unwind_row> rows);
  // The last of the `count` rows from `first` whose pc is at most `pc`.
  std::optional<ember_unwind_row> find_row(uint32_t first, uint32_t count, uint64_t pc) const;
  static constexpr uint32_t kIndexStride = 32;
  // The windows read lately, by their first row: copies of the stacks of
  // new processes (a build's) unwind through the same code again and again.
  struct Window {
    uint32_t from = UINT32_MAX, to = 0;
    ember_unwind_row rows[kIndexStride];
  };
  static constexpr size_t kWindowsCached = 1024;  // 270 KB
  // Gives the kernel the tables of what `pid` maps, and its JIT code's.
  void publish(uint32_t pid, Process& p);
  static std::vector<ember_unwind_row> jit_rows(std::span<const symbolizer::JitMap::Code> code, uint64_t base);

  UnwindMaps maps_;
  uint32_t mode_;
  int grace_fd_ = -1, grace_inner_fd_ = -1;  // see wait_for_readers
  std::unordered_map<uint32_t, Process> processes_;
  unwind::RowSpace space_;
  std::vector<uint32_t> index_pc_;  // the pc of row i * kIndexStride, for each i
  uint32_t last_table_ = 0;          // write_rows' last id
  mutable std::vector<Window> windows_ = std::vector<Window>(kWindowsCached);
  std::unordered_map<std::string, Table> by_build_;  // build-id (or file identity) -> table
  std::map<FileId, Table*> by_file_;                 // files that processes map now -> their table
  std::list<Table*> idle_;                           // tables without users, longest idle first
  std::unique_ptr<Table> vdso_;
  UnwinderStats stats_;
};

}  // namespace ember
