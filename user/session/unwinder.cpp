#include "user/session/unwinder.h"

#include <elfutils/libdwelf.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

namespace ember {
namespace {

// What the walk needs of the architecture (see unwind.bpf.c): where the
// kernel's signal frame keeps the interrupted registers, from the sp its
// return trampoline runs with (x86_64: the ucontext less the popped return
// address; arm64: the siginfo's 128 bytes, then the ucontext, its
// sigcontext at 176: fault_address, x0-x30, sp, pc); whether a frame
// record lies at its frame's bottom (arm64), which leaves sp unknown after
// a frame-pointer step; whether a call leaves the return address in the
// link register (arm64's x30) rather than on the stack.
struct SignalFrame {
  uint64_t pc, sp, fp, lr;  // lr 0: none
};
#if defined(__aarch64__)
constexpr uint64_t kSigcontext = 128 + 176;
constexpr SignalFrame kSignalFrame{kSigcontext + 8 + 32 * 8, kSigcontext + 8 + 31 * 8, kSigcontext + 8 + 29 * 8,
                                   kSigcontext + 8 + 30 * 8};
constexpr bool kFrameRecordAtBottom = true;
constexpr bool kReturnAddressInLink = true;
#else
constexpr uint64_t kMcontext = 40;
constexpr SignalFrame kSignalFrame{kMcontext + 16 * 8, kMcontext + 15 * 8, kMcontext + 10 * 8, 0};
constexpr bool kFrameRecordAtBottom = false;
constexpr bool kReturnAddressInLink = false;
#endif

// A return address as the code jumps to it: see unwind.bpf.c's.
uint64_t code_address(uint64_t ra) {
#if defined(__aarch64__)
  return ra & ((uint64_t{1} << 48) - 1);
#else
  return ra;
#endif
}

std::string hex(const void* bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = static_cast<const uint8_t*>(bytes)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// Where a compiled leaf caught in its epilogue's tail has its return
// address, as bpf/unwind.bpf.c's compiled_epilogue() tells from the code at
// its pc: in a frame record at sp (the caller's fp, then the return
// address), alone at sp, or in the link register.
enum class Epilogue { kNone, kRecordAtSp, kAtSp, kInLink };

#if defined(__aarch64__)
// bpf/unwind.bpf.c's returns(): [ldr x8, [x28, #poll]; cmp sp, x8; b.hi <stub>;] ret at instruction `at`.
bool returns(const uint32_t* c, uint32_t at) {
  if ((c[at] & 0xffc003ff) == 0xf9400388) ++at;
  if (c[at] == 0xeb2863ff) ++at;
  if ((c[at] & 0xff00001f) == 0x54000008) ++at;
  return c[at] == 0xd65f03c0;
}

Epilogue epilogue_at(const uint8_t (&bytes)[EMBER_EPILOGUE_BYTES]) {
  uint32_t code[EMBER_EPILOGUE_BYTES / 4];
  std::memcpy(code, bytes, sizeof code);
  bool popping = code[0] == 0xa8c17bfd;  // ldp x29, x30, [sp], #16
  if (!returns(code, popping ? 1 : 0)) return Epilogue::kNone;
  return popping ? Epilogue::kRecordAtSp : Epilogue::kInLink;
}
#else
// bpf/unwind.bpf.c's returns(): [cmp rsp, [r15+poll]; ja <stub>;] ret at c + at.
bool returns(const uint8_t* c, uint32_t at) {
  if (c[at] == 0x49 && c[at + 1] == 0x3b && c[at + 2] == 0x67)
    at += 4;
  else if (c[at] == 0x49 && c[at + 1] == 0x3b && c[at + 2] == 0xa7)
    at += 7;
  if (c[at] == 0x0f && c[at + 1] == 0x87) at += 6;
  return c[at] == 0xc3;
}

Epilogue epilogue_at(const uint8_t (&code)[EMBER_EPILOGUE_BYTES]) {
  bool popping = code[0] == 0x5d;  // pop rbp
  if (!returns(code, popping ? 1 : 0)) return Epilogue::kNone;
  return popping ? Epilogue::kRecordAtSp : Epilogue::kAtSp;
}
#endif

// The code at `address` in process `pid`, as the kernel reads it.
bool read_code(uint32_t pid, uint64_t address, uint8_t (&code)[EMBER_EPILOGUE_BYTES]) {
  iovec local{code, sizeof code}, remote{reinterpret_cast<void*>(address), sizeof code};
  return process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof code);
}

}  // namespace

std::expected<std::unique_ptr<Unwinder>, std::string> Unwinder::open(UnwindMaps maps, uint32_t mode) {
  std::unique_ptr<Unwinder> u(new Unwinder(maps, mode));
  u->stats_.rows_capacity = maps.rows_capacity;
  // Without a process table, no kernel reads the rows (the unit tests).
  if (maps.processes_fd >= 0) {
    u->grace_inner_fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY, nullptr, 4, 4, 1, nullptr);
    LIBBPF_OPTS(bpf_map_create_opts, outer, .inner_map_fd = static_cast<__u32>(u->grace_inner_fd_));
    if (u->grace_inner_fd_ >= 0)
      u->grace_fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "ember_grace", 4, 4, 1, &outer);
    if (u->grace_fd_ < 0)
      return std::unexpected(std::string("cannot create the unwinder's grace map: ") + std::strerror(errno));
  }
  return u;
}

Unwinder::~Unwinder() {
  if (grace_fd_ >= 0) close(grace_fd_);
  if (grace_inner_fd_ >= 0) close(grace_inner_fd_);
}

UnwinderStats Unwinder::stats() const {
  UnwinderStats s = stats_;
  s.rows = space_.used();
  s.rows_waiting = space_.waiting();
  s.idle_tables = idle_.size();
  s.processes_held = processes_.size();
  return s;
}

// Updating a map-in-map returns only after an RCU grace period, once every
// BPF program that was running has returned (kernel/bpf/syscall.c's
// maybe_wait_bpf_programs(), Linux 4.20; the kernel's own selftests wait so,
// test_btf_map_in_map.c). Every ember program is non-sleepable, so runs
// inside one RCU read section: a walk that could still hold a process
// entry replaced or deleted before this call has ended after it.
bool Unwinder::wait_for_readers() {
  using Clock = std::chrono::steady_clock;
  auto started = Clock::now();
  int key = 0;
  if (grace_fd_ >= 0 && bpf_map_update_elem(grace_fd_, &key, &grace_inner_fd_, BPF_ANY) != 0) return false;
  space_.grace_passed();
  ++stats_.reader_waits;
  stats_.reader_wait_ms += std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  return true;
}

uint32_t Unwinder::write_rows(uint32_t first, std::span<const ember_unwind_row> rows) {
  constexpr size_t kChunk = 65536;  // keys built at a time
  std::vector<uint32_t> keys(std::min(rows.size(), kChunk));
  for (size_t done = 0; done < rows.size(); done += kChunk) {
    auto count = static_cast<uint32_t>(std::min(rows.size() - done, kChunk));
    std::iota(keys.begin(), keys.begin() + count, first + static_cast<uint32_t>(done));
    if (bpf_map_update_batch(maps_.rows_fd, keys.data(), rows.data() + done, &count, nullptr) != 0) return 0;
  }
  for (uint32_t key = (first + kIndexStride - 1) / kIndexStride * kIndexStride; key < first + rows.size();
       key += kIndexStride)
    index_pc_[key / kIndexStride] = rows[key - first].pc;
  for (Window& w : windows_)
    if (w.from < first + rows.size() && first < w.to) w = Window{};
  if (++last_table_ == 0) ++last_table_;
  return last_table_;
}

std::optional<ember_unwind_row> Unwinder::find_row(uint32_t first, uint32_t count, uint64_t pc) const {
  // The window of rows holding the answer: from the last indexed row of the
  // range at or before pc to the next indexed one, or the range's rows
  // before its first indexed row.
  const uint32_t end = first + count;
  uint32_t lo = (first + kIndexStride - 1) / kIndexStride, hi = (end + kIndexStride - 1) / kIndexStride;
  uint32_t first_indexed = lo;
  while (lo < hi) {  // the first indexed row past pc, as an index entry
    uint32_t mid = lo + (hi - lo) / 2;
    if (pc < index_pc_[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  uint32_t from = lo > first_indexed ? (lo - 1) * kIndexStride : first;
  uint32_t to = std::min(end, lo * kIndexStride);
  if (from >= to) return std::nullopt;
  Window& w = windows_[(from / kIndexStride) % kWindowsCached];
  if (w.from != from || w.to != to) {
    uint32_t keys[kIndexStride];
    uint32_t n = to - from, before = from - 1, next = 0;
    // An array's batch starts after the key given (none: at key 0).
    w = Window{};
    if (bpf_map_lookup_batch(maps_.rows_fd, from ? &before : nullptr, &next, keys, w.rows, &n, nullptr) != 0 &&
        errno != ENOENT)
      return std::nullopt;
    if (n != to - from) return std::nullopt;
    w.from = from;
    w.to = to;
  }
  const ember_unwind_row* begin = w.rows;
  const ember_unwind_row* past =
      std::upper_bound(begin, begin + (to - from), pc, [](uint64_t p, const ember_unwind_row& r) { return p < r.pc; });
  if (past == begin) return std::nullopt;
  return *(past - 1);
}

std::optional<uint32_t> Unwinder::allocate_rows(uint64_t rows) {
  // A wait lasts an RCU grace period (12 ms on the loaded 2-core test
  // machine): each makes room for the tables to come too, a sixteenth of
  // the rows at least.
  const uint64_t room = std::max<uint64_t>(rows, space_.capacity() / 16);
  for (;;) {
    if (auto first = space_.allocate(rows)) return first;
    while (space_.waiting() < room) {
      auto oldest = std::find_if(idle_.begin(), idle_.end(), [](const Table* t) { return t->rows > 0; });
      if (oldest == idle_.end()) break;
      evict(**oldest);
    }
    if (space_.waiting() == 0 || !wait_for_readers()) return std::nullopt;
  }
}

void Unwinder::place(Table& t, unwind::CfiTable table, const std::string& name) {
  t.base = table.base;
  t.segments = std::move(table.segments);
  if (table.rows.empty()) return;
  std::optional<uint32_t> first = allocate_rows(table.rows.size());
  if (!first) {
    stats_.over_cap.add(name);
    return;
  }
  // The kernel reads these rows only once a process entry points at them;
  // none did since they were given back (allocate_rows waited for that).
  uint32_t written = write_rows(*first, table.rows);
  if (!written) {
    space_.release(*first, static_cast<uint32_t>(table.rows.size()));
    stats_.over_cap.add(name + " (its rows could not be written: " + std::strerror(errno) + ")");
    return;
  }
  t.table = written;
  t.first = *first;
  t.rows = static_cast<uint32_t>(table.rows.size());
  ++stats_.tables;
}

Unwinder::Table* Unwinder::table_for(const symbolizer::Mapping& m, int fd) {
  using Clock = std::chrono::steady_clock;
  auto timed = [&](auto build) {
    auto started = Clock::now();
    auto table = build();
    stats_.build_ms += std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    return table;
  };
  auto failed = [&](const unwind::TableError& e) {
    (e.reason == unwind::NoTable::Unreadable ? stats_.unreadable : stats_.without_cfi).add(m.path);
  };
  if (m.path == "[vdso]") {
    if (!vdso_) {
      vdso_ = std::make_unique<Table>();
      std::string_view image = symbolizer::own_vdso_image();
      auto table = timed([&] { return unwind::build_vdso_table(image); });
      if (table)
        place(*vdso_, std::move(*table), m.path);
      else
        failed(table.error());
    }
    return vdso_.get();
  }
  if (m.inode == 0) return nullptr;  // anonymous code: a JIT's
  FileId file{m.dev, m.inode};
  if (auto known = by_file_.find(file); known != by_file_.end()) return known->second;
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, int (*)(Elf*)> elf(fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, nullptr) : nullptr, elf_end);
  // One table per build: a container's copy of a library is the same file.
  // Files are matched to builds again once idle: an inode can be reused.
  const void* id = nullptr;
  ssize_t id_size = elf ? dwelf_elf_gnu_build_id(elf.get(), &id) : -1;
  std::string key = id_size > 0 ? hex(id, static_cast<size_t>(id_size))
                                : "file " + std::to_string(m.dev) + ":" + std::to_string(m.inode);
  auto [it, fresh] = by_build_.try_emplace(key);
  Table& t = it->second;
  if (fresh) {
    t.key = key;
    if (!elf) {
      stats_.unreadable.add(m.path);
    } else {
      auto table = timed([&] { return unwind::build_cfi_table(elf.get()); });
      if (table)
        place(t, std::move(*table), m.path);
      else
        failed(table.error());
    }
  }
  t.files.push_back(file);
  by_file_.emplace(file, &t);
  return &t;
}

const Unwinder::Table* Unwinder::known_table(const symbolizer::Mapping& m) const {
  if (m.path == "[vdso]") return vdso_.get();
  auto known = by_file_.find({m.dev, m.inode});
  return m.inode && known != by_file_.end() ? known->second : nullptr;
}

void Unwinder::use(Table& t) {
  if (t.users++ == 0 && t.idle) {
    idle_.erase(*t.idle);
    t.idle.reset();
  }
}

// A table no process maps stays, idle, for the next process of its binary
// (a shell's short commands would rebuild libc's at each): its rows go
// only when needed, or when too many are idle.
void Unwinder::unuse(Table& t) {
  if (--t.users > 0) return;
  for (const FileId& file : t.files) by_file_.erase(file);
  t.files.clear();
  t.idle = idle_.insert(idle_.end(), &t);
  while (idle_.size() > kIdleTables) evict(*idle_.front());
}

// The table goes; its rows are reused once the kernel's readers moved on
// (no process entry points at them: it has no users).
void Unwinder::evict(Table& t) {
  if (t.rows) {
    space_.release(t.first, t.rows);
    --stats_.tables;
  }
  ++stats_.tables_evicted;
  idle_.erase(*t.idle);
  by_build_.erase(t.key);
}

void Unwinder::add_process(uint32_t pid, std::span<const symbolizer::Symbolizer::MappedFile> files) {
  Process& p = processes_[pid];
  std::vector<Table*> tables;
  p.mappings.clear();
  for (const auto& [m, fd] : files)
    if (m->executable) {
      Table* t = table_for(*m, fd);  // built now, while the file is open
      if (t && t != vdso_.get() && std::find(tables.begin(), tables.end(), t) == tables.end()) {
        use(*t);  // at once: building the next table may evict idle ones
        tables.push_back(t);
      }
      p.mappings.push_back(*m);
    }
  publish(pid, p);
  // Only now that the kernel's entry no longer points at them.
  for (Table* t : p.tables) unuse(*t);
  p.tables = std::move(tables);
}

void Unwinder::remove_process(uint32_t pid) {
  auto found = processes_.find(pid);
  if (found == processes_.end()) return;
  Process& p = found->second;
  // Its exit may have taken the entry already (ember_unwind_exit).
  if (maps_.processes_fd >= 0) bpf_map_delete_elem(maps_.processes_fd, &pid);
  for (Table* t : p.tables) unuse(*t);
  space_.release(p.jit.first, p.jit.rows);
  processes_.erase(found);
}

void Unwinder::publish(uint32_t pid, Process& p) {
  auto entry = std::make_unique<ember_unwind_process>();
  std::memset(entry.get(), 0, sizeof *entry);
  const JitCode& jit = p.jit;
  for (const symbolizer::Mapping& m : p.mappings) {
    if (entry->count == EMBER_UNWIND_MAPPINGS) {
      ++entry->left_out;
      ++stats_.mappings_left_out;
      continue;
    }
    ember_unwind_mapping& e = entry->mappings[entry->count++];
    e.start = m.start;
    e.end = m.end;
    // A JVM's code cache: the rows made from what its agent published.
    if (m.inode == 0 && jit.rows && m.start < jit.end && jit.base < m.end) {
      e.base = jit.base;
      e.first = jit.first;
      e.rows = jit.rows;
      e.table = jit.table;
      e.flags = EMBER_MAPPING_JIT;
      continue;
    }
    const Table* t = known_table(m);
    if (!t) continue;
    // Where the file's addresses land in this mapping: by the loadable
    // segment its bytes come from (address - offset is constant in one).
    uint64_t length = m.end - m.start;
    for (const auto& s : t->segments)
      if (t->rows && s.offset < m.offset + length && m.offset < s.offset + s.size) {
        e.base = m.start - m.offset + s.offset - s.vaddr + t->base;
        e.first = t->first;
        e.rows = t->rows;
        e.table = t->table;
        break;
      }
  }
  if (bpf_map_update_elem(maps_.processes_fd, &pid, entry.get(), BPF_ANY) == 0) {
    if (!p.given) ++stats_.processes;
    p.given = true;
  } else {
    // An entry left from before would point at tables this one replaced.
    if (maps_.processes_fd >= 0) bpf_map_delete_elem(maps_.processes_fd, &pid);
    if (!p.left_out) ++stats_.processes_left_out;
    p.left_out = true;
  }
  p.entry = std::move(entry);
}

std::vector<ember_unwind_row> Unwinder::jit_rows(std::span<const symbolizer::JitMap::Code> code, uint64_t base) {
  using Kind = symbolizer::JitMap::Code::Kind;
  std::vector<ember_unwind_row> rows;
  auto add = [&](uint64_t at, uint8_t type, uint16_t cfa, uint8_t ra, int8_t fp) {
    ember_unwind_row row{.pc = static_cast<uint32_t>(at - base), .cfa = cfa, .type = type, .ra = ra, .fp = fp};
    if (!rows.empty() && rows.back().pc == row.pc) rows.pop_back();
    if (!rows.empty() && rows.back().type == type && rows.back().cfa == cfa && rows.back().ra == ra &&
        rows.back().fp == fp)
      return;
    rows.push_back(row);
  };
  // Where a call leaves the return address: on top of the stack (x86_64),
  // or in the link register (aarch64) until a prologue saves it with the
  // caller's fp, a frame record.
  auto called = [&](uint64_t at) {
    if (kReturnAddressInLink)
      add(at, EMBER_ROW_CFA_SP, 0, EMBER_RA_LINK, 0);
    else
      add(at, EMBER_ROW_CFA_SP, 8, EMBER_RA_CFA, 0);
  };
  auto half_built = [&](uint64_t at, const symbolizer::JitMap::FrameStep& step) {
    auto cfa = static_cast<uint16_t>(step.cfa_words * 8);
    auto fp = static_cast<int8_t>(step.fp_slot);
    uint8_t ra = EMBER_RA_CFA;
    if (fp == -2 || (fp && kReturnAddressInLink))
      ra = EMBER_RA_RECORD;  // the return address above the saved fp
    else if (kReturnAddressInLink)
      ra = EMBER_RA_LINK;  // the record not stored yet
    add(at, EMBER_ROW_CFA_SP, cfa, ra, fp);
  };
  uint64_t covered = base;
  for (const auto& c : code) {
    if (c.start < covered || c.start + c.size - base > UINT32_MAX) continue;  // overlapping or out of reach
    if (c.start > covered) add(covered, EMBER_ROW_NONE, 0, EMBER_RA_CFA, 0);
    if (c.kind == Kind::Interpreter) {
      add(c.start, EMBER_ROW_INTERPRETER, 0, EMBER_RA_CFA, static_cast<int8_t>(c.method_slot));
    } else if (c.kind == Kind::CallStub) {
      // A frame record at fp (HotSpot's enter()).
      add(c.start, EMBER_ROW_CFA_FP, 16, EMBER_RA_RECORD, -2);
    } else if (c.frame_words == 0) {
      called(c.start);  // frameless: method-handle intrinsics, dispatch stubs
    } else if (c.frame_words >= 2 && c.complete >= 0 && c.frame_words * 8 <= UINT16_MAX) {
      // Until its prologue starts, the return address is where the call
      // left it; then the frame grows step by step to frame_words words,
      // its frame record at its top.
      if (c.complete > 0) called(c.start);
      for (const auto& step : c.steps) half_built(c.start + step.offset, step);
      add(c.start + c.complete, EMBER_ROW_COMPILED, static_cast<uint16_t>(c.frame_words * 8), EMBER_RA_RECORD, -2);
    } else {
      add(c.start, EMBER_ROW_NONE, 0, EMBER_RA_CFA, 0);  // frame pointers, if any
    }
    covered = c.start + c.size;
  }
  add(covered, EMBER_ROW_NONE, 0, EMBER_RA_CFA, 0);
  return rows;
}

void Unwinder::set_jit_code(uint32_t pid, std::vector<symbolizer::JitMap::Code> code) {
  std::erase_if(code, [](const auto& c) { return c.size == 0; });
  if (code.empty()) return;
  std::sort(code.begin(), code.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  Process& p = processes_[pid];
  JitCode& jit = p.jit;
  uint64_t base = code.front().start;
  std::vector<ember_unwind_row> rows = jit_rows(code, base);
  // Rows a walk may be reading are never rewritten: the code gets a fresh
  // range, and gives back the old once the kernel's entry moved on.
  std::optional<uint32_t> first = allocate_rows(rows.size());
  if (!first) {
    if (!jit.over_cap) stats_.over_cap.add("JIT code of process " + std::to_string(pid));
    jit.over_cap = true;
    return;
  }
  uint32_t written = write_rows(*first, rows);
  if (!written) {
    space_.release(*first, static_cast<uint32_t>(rows.size()));
    if (!jit.over_cap)
      stats_.over_cap.add("JIT code of process " + std::to_string(pid) + " (its rows could not be written: " +
                          std::strerror(errno) + ")");
    jit.over_cap = true;
    return;
  }
  JitCode old = jit;
  jit.table = written;
  jit.first = *first;
  jit.rows = static_cast<uint32_t>(rows.size());
  jit.base = base;
  jit.end = code.back().start + code.back().size;
  if (p.entry) publish(pid, p);
  space_.release(old.first, old.rows);
}


// The kernel's walk (bpf/unwind.bpf.c's step), over a copy of the
// stack: keep the two in step.
std::pair<size_t, uint8_t> Unwinder::unwind_copy(uint32_t pid, std::span<const __u64> copy, __u64* out) const {
  auto found = processes_.find(pid);
  if (copy.size() < EMBER_COPY_HEADER) return {0, EMBER_STOP_BAD_READ};
  uint64_t ip = copy[EMBER_COPY_IP], sp = copy[EMBER_COPY_SP], bp = copy[EMBER_COPY_BP], lr = copy[EMBER_COPY_LINK];
  bool exact = !copy[EMBER_COPY_RETURN_ADDRESS], guessed = false, sp_unknown = false;
  if (found == processes_.end() || !found->second.entry) return {0, EMBER_STOP_NOT_LOADED};
  const ember_unwind_process& process = *found->second.entry;
  const uint64_t stack = copy[EMBER_COPY_SP], words = copy.size() - EMBER_COPY_HEADER;
  // A read past the copy: the stack went on beyond what the kernel copied.
  // (Written without address + 8, which wraps for a wild frame pointer.)
  auto read = [&](uint64_t address, uint64_t& value) {
    if (address < stack || words * 8 < 8 || address - stack > words * 8 - 8) return false;
    std::memcpy(&value, reinterpret_cast<const uint8_t*>(copy.data() + EMBER_COPY_HEADER) + (address - stack), 8);
    return true;
  };
  size_t n = 0;
  while (n < EMBER_MAX_STACK_DEPTH) {
    out[n] = exact && n ? ip + 1 : ip;  // as the kernel records frames (see unwind_step)
    ++n;
    uint64_t pc = exact ? ip : ip - 1;
    const ember_unwind_mapping* begin = process.mappings;
    const ember_unwind_mapping* end = begin + std::min<uint32_t>(process.count, EMBER_UNWIND_MAPPINGS);
    auto m = std::upper_bound(begin, end, pc, [](uint64_t pc, const ember_unwind_mapping& m) { return pc < m.start; });
    std::optional<ember_unwind_row> row;
    uint8_t missing = EMBER_STOP_UNMAPPED;
    const bool inside = m != begin && pc < (--m)->end;
    if (inside) {
      missing = EMBER_STOP_NO_TABLE;
      if (m->rows && pc >= m->base && pc - m->base <= UINT32_MAX) row = find_row(m->first, m->rows, pc - m->base);
    }
    if (row && row->type == EMBER_ROW_NONE) row.reset();
    if (row && sp_unknown && row->type != EMBER_ROW_CFA_FP && row->type != EMBER_ROW_ROOT &&
        row->type != EMBER_ROW_INTERPRETER)
      row.reset();
    if (row && row->type == EMBER_ROW_UNSUPPORTED) {
      row.reset();
      missing = EMBER_STOP_UNSUPPORTED;
    }
    if (!row) {
      // A trusted pc in no mapping: code mapped since the snapshot.
      if (missing == EMBER_STOP_UNMAPPED && !guessed && !process.left_out) return {n, missing};
      if (mode_ != EMBER_UNWIND_AUTO) return {n, missing};
      uint64_t ra, next_bp;
      if (!bp) return {n, EMBER_STOP_FP_END};
      if (bp < sp) return {n, EMBER_STOP_BAD_FRAME};
      if (!read(bp + 8, ra) || !read(bp, next_bp)) return {n, EMBER_STOP_NOT_LOADED};
      if (!ra) return {n, EMBER_STOP_FP_END};
      sp = bp + 16;
      bp = next_bp;
      ip = code_address(ra);
      exact = false;
      guessed = true;
      sp_unknown = kFrameRecordAtBottom && !(inside && (m->flags & EMBER_MAPPING_JIT));
      continue;
    }
    uint64_t cfa;
    switch (row->type) {
      case EMBER_ROW_CFA_SP: cfa = sp + row->cfa; break;
      case EMBER_ROW_COMPILED: {
        // A leaf in its epilogue: its code is read from the process (the
        // copy holds only its stack), as the kernel reads it.
        uint8_t code[EMBER_EPILOGUE_BYTES];
        Epilogue e = exact && read_code(pid, ip, code) ? epilogue_at(code) : Epilogue::kNone;
        uint64_t ra = 0, caller_bp = bp, caller_sp = sp;
        if (e == Epilogue::kRecordAtSp && read(sp, caller_bp) && read(sp + 8, ra))
          caller_sp = sp + 16;
        else if (e == Epilogue::kAtSp && read(sp, ra))
          caller_sp = sp + 8;
        else if (e == Epilogue::kInLink)
          ra = lr;
        if (ra) {
          sp = caller_sp;
          bp = caller_bp;
          ip = code_address(ra);
          exact = false;
          continue;
        }
        cfa = sp + row->cfa;
        break;
      }
      case EMBER_ROW_CFA_FP: cfa = bp + row->cfa; break;
      case EMBER_ROW_PLT: cfa = sp + 8 + ((ip & 15) >= row->cfa ? 8 : 0); break;
      case EMBER_ROW_SIGNAL: {
        // The interrupted registers, in the ucontext on the stack (see unwind.bpf.c).
        if (!read(sp + kSignalFrame.pc, ip) || !read(sp + kSignalFrame.sp, cfa) || !read(sp + kSignalFrame.fp, bp) ||
            (kSignalFrame.lr && !read(sp + kSignalFrame.lr, lr)))
          return {n, EMBER_STOP_NOT_LOADED};
        if (n > 0) out[n - 1] += 1;
        sp = cfa;
        exact = true;
        continue;
      }
      case EMBER_ROW_INTERPRETER: {
        uint64_t caller_sp, caller_bp, ra, method;
        if (row->fp && read(bp + int64_t(row->fp) * 8, method) && method && method <= EMBER_FRAME_METHOD_MASK)
          out[n - 1] = EMBER_FRAME_METHOD | method;
        if (!read(bp - 8, caller_sp) || !read(bp, caller_bp) || !read(bp + 8, ra)) return {n, EMBER_STOP_NOT_LOADED};
        if (!ra || caller_sp <= sp) return {n, EMBER_STOP_BAD_FRAME};
        sp = caller_sp;
        sp_unknown = false;
        bp = caller_bp;
        ip = code_address(ra);
        exact = false;
        continue;
      }
      case EMBER_ROW_ROOT: return {n, EMBER_STOP_ROOT};
      default: return {n, EMBER_STOP_UNSUPPORTED};
    }
    uint64_t ra;
    const uint64_t slot = (row->ra == EMBER_RA_RECORD_LOW ? cfa - row->cfa : cfa) + int64_t(row->fp) * 8;
    if (row->ra == EMBER_RA_RECORD || row->ra == EMBER_RA_RECORD_LOW) {
      if (!read(slot, bp) || !read(slot + 8, ra)) return {n, EMBER_STOP_NOT_LOADED};
    } else if (row->ra == EMBER_RA_SAVED) {
      if (!read(slot, ra)) return {n, EMBER_STOP_NOT_LOADED};
    } else {
      if (row->ra == EMBER_RA_LINK && !exact) return {n, EMBER_STOP_BAD_FRAME};
      if (row->ra == EMBER_RA_LINK) ra = lr;
      else if (!read(cfa - 8, ra)) return {n, EMBER_STOP_NOT_LOADED};
      if (row->fp && !read(slot, bp)) return {n, EMBER_STOP_NOT_LOADED};
    }
    ra = code_address(ra);
    if (!ra || cfa < sp || (cfa == sp && row->ra != EMBER_RA_LINK)) return {n, EMBER_STOP_BAD_FRAME};
    sp = cfa;
    sp_unknown = false;
    ip = ra;
    exact = false;
  }
  return {n, EMBER_STOP_DEPTH};
}

}  // namespace ember
