// Addresses to frames, in batches: one answer per address. Kernel
// addresses through /proc/kallsyms; user addresses through each process's
// mappings, the ELF symbol tables and DWARF of the mapped files (and of
// their debug files, see debug_info.h), the vDSO, and perf-PID.map files
// written by JITs. Files are shared by build-id: one libc is read once for
// every process (and container) that maps it.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "symbolizer/debug_info.h"
#include "symbolizer/dwarf_index.h"
#include "symbolizer/elf_symbols.h"
#include "symbolizer/kallsyms.h"
#include "symbolizer/proc_maps.h"
#include "symbolizer/symbol.h"

namespace ember::symbolizer {

struct Options {
  std::string proc_root = "/proc";               // where /proc/PID/{maps,root,map_files} live
  std::string kallsyms_path = "/proc/kallsyms";  // read on the first kernel lookup
  std::string perf_map_dir = "/tmp";             // perf-PID.map files on the host
  bool inlines = true;  // inlined calls as frames of their own (DWARF)
  bool lines = false;   // "name (file.c:42)"
  // DWARF sections kept in memory at most (uncompressed; the per-unit
  // indexes built from them are a small fraction). Past it, the largest
  // binaries are named from their symbol tables only, with a warning.
  uint64_t dwarf_memory_bytes = 256ull << 20;
  // For sessions cut into windows (end_window()). A binary neither
  // symbolized in nor mapped by a remembered process for this many windows
  // is freed, and read again if needed. 10 windows of 5-10 s keep a binary
  // used about once a minute or more; one used less often is read again
  // at most once a minute: libc's symbols take 8 ms, with its debug file's
  // DWARF 85 ms, libjvm's symbols 25 ms (ember symbolize --elf, less the
  // process's start), under 0.2% of a CPU.
  uint32_t idle_windows = 10;
  // Symbols, DWARF and caches held at most, DWARF's bound included: past it
  // at the end of a window, caches go first, then the binaries symbolized
  // least recently; within a window, before each batch, the binaries the
  // window has not used. Counted as memory_bytes() says.
  uint64_t memory_bytes = 512ull << 20;
  DebugSearch debug;

  // How the caller's users set memory_bytes (record's --symbol-memory,
  // the agent's symbol_memory), for the warnings that name it.
  std::string memory_knob;

  // The one knob users turn: everything held at most, DWARF half of it.
  void set_memory_bound(uint64_t bytes) {
    memory_bytes = bytes;
    dwarf_memory_bytes = bytes / 2;
  }
};

class Symbolizer {
 public:
  explicit Symbolizer(Options options = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Records the process's mappings and opens each mapped executable, so its
  // addresses can still be named after it exits or its files are replaced.
  // Calling it again merges in mappings added since. False if the process
  // is gone.
  bool snapshot_process(uint32_t pid);
  // Adds a mapping learnt otherwise (from the kernel as the process exited):
  // it replaces what it overlaps. Its file is opened by path, and used only
  // if it is still the same inode.
  void add_mapping(uint32_t pid, Mapping mapping);
  bool has_process(uint32_t pid) const { return processes_.count(pid) != 0; }
  // Whether the last snapshot of `pid` maps `address` (else the process
  // mapped code since, e.g. a dlopen'ed libjvm.so: snapshot it again).
  bool maps(uint32_t pid, uint64_t address) const;
  // Whether symbolize_user() names `address` without reading a file: the
  // process's last snapshot maps it to a file whose symbols (and DWARF,
  // if it is to have any) were read, or that could not be read. Not for
  // anonymous code, such as a JIT's, named from a perf map that grows
  // while the JIT runs.
  bool names_at_once(uint32_t pid, uint64_t address) const;
  // Reads, on another thread, what naming these addresses of `pid` needs
  // from their files (symbols, debug files, DWARF): names_at_once() turns
  // true for them once it is read and a later call (or symbolize_user())
  // has taken it in. For naming while a recording goes on, which must not
  // stall it for a large binary's DWARF or a debuginfod download.
  void read_ahead(uint32_t pid, std::span<const uint64_t> addresses);
  // Forgets a process whose samples are all named: its mappings, perf map
  // and root. A file no remembered process maps any more is closed; its
  // symbols stay, shared by build-id, until end_window() frees them.
  void forget_process(uint32_t pid);

  // The executable mappings of `pid` as of its last snapshot, each with
  // the file it maps opened (fd -1: anonymous code, the vDSO, or a file
  // that cannot be opened); the fds stay the symbolizer's.
  struct MappedFile {
    const Mapping* mapping;
    int fd;
  };
  std::vector<MappedFile> mapped_files(uint32_t pid);

  // `addresses` are instruction addresses; pass return addresses minus one.
  std::vector<Symbol> symbolize_user(uint32_t pid, std::span<const uint64_t> addresses);
  std::vector<Symbol> symbolize_kernel(std::span<const uint64_t> addresses);
  // Addresses as in the file's symbol table (what addr2line -e takes).
  std::vector<Symbol> symbolize_file(const std::string& path, std::span<const uint64_t> addresses);

  // Starts reading kallsyms on another thread (about 50 ms of kernel time
  // formatting 200,000 lines), so the report after a recording need not wait.
  void prefetch_kernel();
  // Whether kernel lookups answer without waiting for kallsyms (read
  // already, or prefetched): a slow emulated CPU takes half a minute.
  bool kernel_ready() const;

  // Ends a window of a session (a cut profile): frees the binaries idle for
  // Options::idle_windows windows, then caches and the binaries symbolized
  // least recently while the memory held is over Options::memory_bytes.
  void end_window();
  // What the binaries held take: the symbol tables and the sections libelf
  // read for them, DWARF sections (uncompressed) and the tables indexing
  // them, answers and names cached. Counted from the sizes of what is held
  // (vectors' capacities, strings past their inline buffer, a node's cost
  // per hash map entry), not measured; kallsyms is not in it. Against
  // malloc's own count (mallinfo2) over 4096 lookups: libjvm, ls within 3%;
  // libc with its DWARF 14% under (libdw's own tables are not counted).
  uint64_t memory_bytes() const;
  // Files held open: one per (device, inode) mapped by a remembered process.
  size_t open_files() const { return files_.size() + files_by_path_.size(); }

  // Problems worth telling the user (kptr_restrict, unreadable files) met
  // since the last call, each once; they are forgotten, so a long session
  // holds none (a binary read again after eviction warns again).
  std::vector<std::string> take_warnings();
  // Distinct binaries held now: copies of one build (a container's libc and
  // the host's) count once.
  struct Binary {
    std::string path;  // as the first process that mapped it saw it
    uint64_t memory_bytes;
    uint64_t used_window;  // the last window it named an address in
  };
  std::vector<Binary> binaries() const;
  // Whether kernel symbols are hidden by kernel.kptr_restrict (loads kallsyms).
  bool kernel_symbols_hidden();

 private:
  struct Module;
  using FileKey = std::pair<uint64_t, uint64_t>;  // (dev, inode)
  struct Process {
    std::vector<Mapping> mappings;  // sorted by start, non-overlapping
    std::string root;  // the process's "/" when not ours (a container), else ""
    std::optional<PerfMap> perf_map;  // read on first use
  };
  // A mapped file, by (dev, inode); its Module is shared by build-id.
  struct OpenFile {
    int fd = -1;
    Module* module = nullptr;
    bool read_attempted = false;
    std::optional<Unknown> unreadable;  // why it has no module
    uint32_t processes = 0;  // remembered processes that map it
  };
  // What read_ahead() asked for a file, and what the loader read.
  struct Load {
    FileKey key;
    int fd = -1;  // the loader's own open file description of it
    std::string path, root;
    uint64_t dwarf_room = 0;  // DWARF left out past this many bytes
    std::unique_ptr<Module> module;  // none: not an ELF file (error)
    std::string error;
    std::vector<std::string> warnings;
  };
  void load(Load& job);  // on the loader thread
  // Takes in what the loader read; with `wait`, once it has read all it was asked.
  void take_loads(bool wait);
  // Attaches the file to a module already read of the same build, if any.
  bool attach_known_build(OpenFile& file);
  void admit_dwarf_warning(const Module& module, uint64_t bytes);
  void merge_mappings(uint32_t pid, std::vector<Mapping> fresh);
  OpenFile& file_for(uint32_t pid, const Mapping& m);
  // One process fewer maps the file: closed when none does.
  void release_file(const FileKey& key);
  void close_file(OpenFile& file);
  Module* module_of(OpenFile& file, const std::string& path, const std::string& root);
  Module* vdso();
  void load_debug_info(Module& module, std::vector<std::string>& warnings);
  // Reads what the modules of a batch need from their files (debug files,
  // DWARF while it fits the memory bound, smallest first), then lets the
  // files go: a module never reads its file after its first batch.
  void prepare(std::vector<Module*> modules);
  void admit_dwarf(std::vector<Module*>& modules);
  void free_modules(const std::function<bool(const Module&)>& unwanted);
  // Over Options::memory_bytes: at a window's end, caches, then binaries
  // least recently used; within one (before a batch), only the binaries it
  // has not used yet.
  void evict_over_cap(bool within_window);
  const Symbol& symbolize_in_module(Module& module, uint64_t vaddr);
  void answer(Module& module, uint64_t vaddr, Symbol& out);
  const PerfMap& perf_map(uint32_t pid, Process& p);
  const KernelSymbols* kernel();

  Options options_;
  DebugFinder debug_finder_;
  std::map<std::pair<uint64_t, uint64_t>, OpenFile> files_;  // by (dev, inode)
  std::vector<std::unique_ptr<Module>> modules_;
  std::unordered_map<std::string, Module*> modules_by_build_id_;
  std::unordered_map<std::string, OpenFile> files_by_path_;  // symbolize_file()
  std::optional<std::unique_ptr<Module>> vdso_;
  uint64_t dwarf_bytes_used_ = 0;
  uint64_t window_ = 0;  // end_window() calls so far
  std::unordered_map<uint32_t, Process> processes_;
  std::optional<std::expected<KernelSymbols, std::string>> kernel_;
  std::future<std::expected<KernelSymbols, std::string>> kernel_loading_;
  std::vector<std::string> warnings_;
  // read_ahead()'s loader: one thread, started on first use. It uses
  // debug_finder_ alone: symbolize_user() waits for it to be idle before
  // reading anything itself.
  std::thread loader_;
  std::mutex loads_mutex_;
  std::condition_variable loads_changed_;
  std::deque<std::unique_ptr<Load>> loads_asked_, loads_done_;  // under loads_mutex_
  bool loader_busy_ = false, loader_stop_ = false;             // under loads_mutex_
  // The loader reads beside the workload a recording records: niced by
  // kLoaderNice past ember's own nice (about a tenth of a CPU beside one
  // busy task), it yields the CPU to it; a 1-CPU guest's workload lost
  // most of a 4 s recording to it otherwise. Not while someone waits on
  // it (take_loads(true): a recording's stop), where the process may
  // raise it back (root; else it goes on niced). Under loads_mutex_.
  pid_t loader_tid_ = 0;
  int loader_nice_ = 0;
  bool loader_hurried_ = false;
  static constexpr int kLoaderNice = 10;
  void renice_loader();
  std::set<FileKey> loading_;  // asked and not yet taken in (this thread's)
};

}  // namespace ember::symbolizer
