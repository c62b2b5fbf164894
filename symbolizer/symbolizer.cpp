#include "symbolizer/symbolizer.h"

#include "symbolizer/dwarf_index.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>

namespace ember::symbolizer {

// One binary's names: its symbols (merged with those of its debug file or
// MiniDebugInfo when it is stripped), its DWARF when admitted, and the
// answers given since its caches were last dropped.
struct Symbolizer::Module {
  std::string path;  // as the first process that mapped it sees it
  std::string root;  // that process's root, for its debug files
  std::unique_ptr<ElfSymbols> elf;
  std::optional<DebugFile> debug;
  std::unique_ptr<ElfSymbols> mini;
  bool debug_loaded = false;
  enum class Dwarf { kUnplanned, kLoaded, kNone } dwarf_state = Dwarf::kUnplanned;
  std::unique_ptr<DwarfIndex> dwarf;
  bool damage_reported = false;
  std::unordered_map<uint64_t, Symbol> answers;  // by vaddr
  std::unordered_map<const char*, std::pair<std::string, bool>> demangled;  // raw -> display, is C++
  uint64_t cache_bytes = 0;  // of answers and demangled
  uint64_t dwarf_bytes = 0;  // counted in dwarf_bytes_used_ while held
  uint32_t files = 0;        // OpenFile entries pointing to it
  uint64_t used_window = 0;    // the last window it named an address in
  uint64_t mapped_window = 0;  // the last window a remembered process mapped it

  // Where its DWARF is: the binary's own, or its debug file's; none.
  ElfSymbols* dwarf_source() const {
    if (elf && elf->has_dwarf()) return elf.get();
    if (debug && debug->elf->has_dwarf()) return debug->elf.get();
    return nullptr;
  }
  // Opens the DWARF of dwarf_source(), which fitted the bound: false, with
  // a warning, if libdw cannot read it.
  bool open_dwarf(std::vector<std::string>& warnings) {
    ElfSymbols* from = dwarf_source();
    dwarf_state = Dwarf::kNone;
    dwarf = DwarfIndex::open(from->elf());
    if (!dwarf) {
      warnings.push_back(path + ": DWARF unreadable; named from the symbol table");
      return false;
    }
    dwarf_state = Dwarf::kLoaded;
    dwarf_bytes = from->dwarf_bytes();
    return true;
  }
  // After its first batch: libdw read its sections whole as it opened
  // them, and a module never reads its files again.
  void release_files() {
    elf->release_file();
    if (debug && debug->fd >= 0) {
      debug->elf->release_file();
      close(debug->fd);
      debug->fd = -1;
    }
  }
  void drop_caches() {
    answers = {};
    demangled = {};
    cache_bytes = 0;
  }
  uint64_t memory_bytes() const {
    uint64_t bytes = sizeof *this + cache_bytes + elf->memory_bytes() + dwarf_bytes;
    if (debug) bytes += debug->elf->memory_bytes();
    if (mini) bytes += mini->memory_bytes();
    if (dwarf) bytes += dwarf->memory_bytes();
    return bytes;
  }
};

namespace {

// An unordered_map node beside its value (next pointer, cached hash), and
// a string's bytes past its inline buffer.
constexpr uint64_t kNodeBytes = 32;
uint64_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

uint64_t answer_bytes(const Symbol& s) {
  uint64_t bytes = kNodeBytes + sizeof(uint64_t) + sizeof s + s.frames.capacity() * sizeof(Frame) + heap_bytes(s.module);
  for (const Frame& f : s.frames) bytes += heap_bytes(f.name) + heap_bytes(f.module) + heap_bytes(f.file);
  return bytes;
}

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t address) {
  auto it = std::upper_bound(maps.begin(), maps.end(), address,
                             [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

// The pid the process has in its own pid namespace (what a JIT inside a
// container names its perf map after).
std::string namespace_pid(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("NSpid:")) {
      size_t last = line.find_last_of(" \t");
      return last == std::string::npos ? std::string() : line.substr(last + 1);
    }
  return {};
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

Symbolizer::Symbolizer(Options options) : options_(std::move(options)), debug_finder_(options_.debug) {}

Symbolizer::~Symbolizer() {
  if (loader_.joinable()) {
    {
      std::lock_guard lock(loads_mutex_);
      loader_stop_ = true;
    }
    loads_changed_.notify_all();
    loader_.join();
    for (auto* queue : {&loads_asked_, &loads_done_})
      for (auto& l : *queue) close(l->fd);
  }
  for (auto& [key, f] : files_) close_file(f);
  for (auto& [key, f] : files_by_path_) close_file(f);
}

bool Symbolizer::snapshot_process(uint32_t pid) {
  std::string dir = options_.proc_root + "/" + std::to_string(pid);
  std::optional<std::vector<Mapping>> maps = read_proc_maps(dir + "/maps");
  if (!maps) return false;
  std::vector<Mapping> fresh = std::move(*maps);
  // Samples only land in code.
  std::erase_if(fresh, [](const Mapping& m) { return !m.executable; });
  if (fresh.empty()) return false;  // exited between open and read, or a kernel thread
  auto [it, first] = processes_.try_emplace(pid);
  // Another mount namespace (a container): its files and /tmp are seen
  // through /proc/PID/root.
  if (first && !same_file(dir + "/ns/mnt", "/proc/self/ns/mnt")) it->second.root = dir + "/root";
  merge_mappings(pid, std::move(fresh));
  return true;
}

void Symbolizer::add_mapping(uint32_t pid, Mapping mapping) {
  std::vector<Mapping> fresh;
  fresh.push_back(std::move(mapping));
  merge_mappings(pid, std::move(fresh));
}

namespace {

std::set<std::pair<uint64_t, uint64_t>> files_mapped(const std::vector<Mapping>& mappings) {
  std::set<std::pair<uint64_t, uint64_t>> keys;
  for (const Mapping& m : mappings)
    if (m.inode != 0) keys.emplace(m.dev, m.inode);
  return keys;
}

}  // namespace

void Symbolizer::merge_mappings(uint32_t pid, std::vector<Mapping> fresh) {
  Process& p = processes_[pid];
  std::set<FileKey> before = files_mapped(p.mappings);
  // Mappings seen earlier that nothing replaced stay: the code may have
  // been unmapped after it was sampled.
  for (Mapping& old : p.mappings) {
    bool overlaps = std::any_of(fresh.begin(), fresh.end(),
                                [&](const Mapping& m) { return m.start < old.end && old.start < m.end; });
    if (!overlaps) fresh.push_back(std::move(old));
  }
  std::sort(fresh.begin(), fresh.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  p.mappings = std::move(fresh);
  std::set<FileKey> after = files_mapped(p.mappings);
  // A file counts this process once, however many of its mappings map it.
  std::set<FileKey> counted = before;
  for (const Mapping& m : p.mappings)
    if (m.inode != 0 && counted.insert({m.dev, m.inode}).second) ++file_for(pid, m).processes;
  for (const FileKey& key : before)
    if (!after.count(key)) release_file(key);
}

void Symbolizer::forget_process(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  for (const FileKey& key : files_mapped(it->second.mappings)) release_file(key);
  processes_.erase(it);
}

void Symbolizer::release_file(const FileKey& key) {
  auto it = files_.find(key);
  if (it == files_.end() || --it->second.processes != 0) return;
  close_file(it->second);
  files_.erase(it);
}

void Symbolizer::close_file(OpenFile& file) {
  if (file.module) --file.module->files;
  if (file.fd >= 0) close(file.fd);
  file = {};
}

bool Symbolizer::maps(uint32_t pid, uint64_t address) const {
  auto it = processes_.find(pid);
  return it != processes_.end() && find_mapping(it->second.mappings, address) != nullptr;
}

bool Symbolizer::names_at_once(uint32_t pid, uint64_t address) const {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return false;
  const Mapping* m = find_mapping(it->second.mappings, address);
  if (!m || m->inode == 0) return false;
  auto file = files_.find({m->dev, m->inode});
  if (file == files_.end() || !file->second.read_attempted) return false;
  const Module* module = file->second.module;
  return !module || (module->debug_loaded && (module->dwarf_state != Module::Dwarf::kUnplanned ||
                                              (!options_.inlines && !options_.lines)));
}

std::vector<Symbolizer::MappedFile> Symbolizer::mapped_files(uint32_t pid) {
  std::vector<MappedFile> files;
  auto it = processes_.find(pid);
  if (it == processes_.end()) return files;
  for (const Mapping& m : it->second.mappings) files.push_back({&m, m.inode ? file_for(pid, m).fd : -1});
  return files;
}

Symbolizer::OpenFile& Symbolizer::file_for(uint32_t pid, const Mapping& m) {
  auto [it, inserted] = files_.try_emplace({m.dev, m.inode});
  OpenFile& f = it->second;
  if (!inserted) return f;
  std::string dir = options_.proc_root + "/" + std::to_string(pid);
  char range[64];
  std::snprintf(range, sizeof range, "/map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
  // map_files reaches the very inode mapped (deleted, replaced, or in another
  // mount namespace) but needs CAP_SYS_ADMIN; root/ covers containers.
  for (const std::string& candidate : {dir + range, dir + "/root" + m.path}) {
    f.fd = open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd >= 0) return f;
  }
  // The path as seen from here (the process has exited): only if it is
  // still the very file mapped, not a newer build at the same path.
  f.fd = open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (f.fd >= 0 && (fstat(f.fd, &st) != 0 || st.st_ino != m.inode)) {
    close(f.fd);
    f.fd = -1;
  }
  return f;
}

bool Symbolizer::attach_known_build(OpenFile& file) {
  // The same build (a container's copy of libc, the next process of a
  // binary) is read once: its build-id costs a few hundred bytes of reading.
  std::string id = ElfSymbols::read_build_id(file.fd);
  auto known = id.empty() ? modules_by_build_id_.end() : modules_by_build_id_.find(id);
  if (known == modules_by_build_id_.end()) return false;
  file.read_attempted = true;
  file.module = known->second;
  ++file.module->files;
  return true;
}

Symbolizer::Module* Symbolizer::module_of(OpenFile& file, const std::string& path, const std::string& root) {
  if (file.read_attempted) return file.module;
  if (file.fd < 0) {
    file.read_attempted = true;
    file.unreadable = Unknown::Unreadable;
    return nullptr;
  }
  if (attach_known_build(file)) return file.module;
  file.read_attempted = true;
  auto elf = ElfSymbols::read(file.fd, path);
  if (!elf) {
    file.unreadable = Unknown::BadElf;
    warnings_.push_back(elf.error());
    return nullptr;
  }
  auto fresh = std::make_unique<Module>();
  fresh->path = path;
  fresh->root = root;
  fresh->elf = std::move(*elf);
  fresh->used_window = window_;
  if (const std::string& id = fresh->elf->build_id(); !id.empty()) modules_by_build_id_[id] = fresh.get();
  Module* module = modules_.emplace_back(std::move(fresh)).get();
  ++module->files;
  return file.module = module;
}

void Symbolizer::read_ahead(uint32_t pid, std::span<const uint64_t> addresses) {
  take_loads(false);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  const Process& p = it->second;
  bool asked = false;
  for (uint64_t address : addresses) {
    const Mapping* m = find_mapping(p.mappings, address);
    if (!m || m->inode == 0) continue;
    FileKey key{m->dev, m->inode};
    OpenFile& file = file_for(pid, *m);
    if (file.read_attempted || file.fd < 0 || loading_.count(key) || attach_known_build(file)) continue;
    auto job = std::make_unique<Load>();
    job->key = key;
    // Its own open file description: file offsets are not shared with the
    // symbolizer's descriptor (a dup's would be).
    job->fd = open(("/proc/self/fd/" + std::to_string(file.fd)).c_str(), O_RDONLY | O_CLOEXEC);
    if (job->fd < 0) continue;
    job->path = m->path;
    job->root = p.root;
    job->dwarf_room = options_.dwarf_memory_bytes - std::min(dwarf_bytes_used_, options_.dwarf_memory_bytes);
    loading_.insert(key);
    std::lock_guard lock(loads_mutex_);
    loads_asked_.push_back(std::move(job));
    asked = true;
  }
  if (!asked) return;
  if (!loader_.joinable())
    loader_ = std::thread([this] {
      std::unique_lock lock(loads_mutex_);
      loader_tid_ = gettid();
      loader_nice_ = getpriority(PRIO_PROCESS, 0);  // ember's own, inherited
      renice_loader();
      for (;;) {
        loads_changed_.wait(lock, [&] { return loader_stop_ || !loads_asked_.empty(); });
        if (loader_stop_) return;
        std::unique_ptr<Load> job = std::move(loads_asked_.front());
        loads_asked_.pop_front();
        loader_busy_ = true;
        lock.unlock();
        load(*job);
        lock.lock();
        loader_busy_ = false;
        loads_done_.push_back(std::move(job));
        loads_changed_.notify_all();
      }
    });
  loads_changed_.notify_all();
}

void Symbolizer::load(Load& job) {
  auto elf = ElfSymbols::read(job.fd, job.path);
  if (!elf) {
    job.error = elf.error();
    return;
  }
  auto module = std::make_unique<Module>();
  module->path = job.path;
  module->root = job.root;
  module->elf = std::move(*elf);
  load_debug_info(*module, job.warnings);
  if (options_.inlines || options_.lines) {
    // As admit_dwarf() would, but against the room left when it was asked;
    // one too large is told of when taken in.
    module->dwarf_state = Module::Dwarf::kNone;
    if (ElfSymbols* from = module->dwarf_source()) {
      if (from->dwarf_bytes() <= job.dwarf_room) module->open_dwarf(job.warnings);
      else module->dwarf_bytes = from->dwarf_bytes();
    }
  }
  module->release_files();
  job.module = std::move(module);
}

void Symbolizer::renice_loader() {
  if (loader_tid_)
    setpriority(PRIO_PROCESS, static_cast<id_t>(loader_tid_),
                loader_hurried_ ? loader_nice_ : std::min(19, loader_nice_ + kLoaderNice));
}

void Symbolizer::take_loads(bool wait) {
  if (!loader_.joinable()) return;
  std::deque<std::unique_ptr<Load>> done;
  {
    std::unique_lock lock(loads_mutex_);
    if (wait && (!loads_asked_.empty() || loader_busy_)) {
      // Someone waits on it now (a recording's stop): at full priority,
      // where the process may raise it (root; else it goes on niced).
      loader_hurried_ = true;
      renice_loader();
      loads_changed_.wait(lock, [&] { return loads_asked_.empty() && !loader_busy_; });
      loader_hurried_ = false;  // idle now: niced again for what the next window asks
      renice_loader();
    }
    done.swap(loads_done_);
  }
  for (auto& job : done) {
    loading_.erase(job->key);
    close(job->fd);
    warnings_.insert(warnings_.end(), job->warnings.begin(), job->warnings.end());
    auto f = files_.find(job->key);
    // Let go meanwhile, or read here (a file of the same build attached).
    if (f == files_.end() || f->second.read_attempted) continue;
    OpenFile& file = f->second;
    if (!job->module) {
      file.read_attempted = true;
      file.unreadable = Unknown::BadElf;
      warnings_.push_back(job->error);
      continue;
    }
    if (attach_known_build(file)) continue;
    std::unique_ptr<Module>& fresh = job->module;
    fresh->used_window = window_;
    if (fresh->dwarf_state == Module::Dwarf::kLoaded &&
        dwarf_bytes_used_ + fresh->dwarf_bytes > options_.dwarf_memory_bytes) {
      fresh->dwarf.reset();  // others were taken in first
      fresh->dwarf_state = Module::Dwarf::kNone;
    }
    if (fresh->dwarf_state == Module::Dwarf::kLoaded) {
      dwarf_bytes_used_ += fresh->dwarf_bytes;
    } else if (fresh->dwarf_bytes) {
      admit_dwarf_warning(*fresh, fresh->dwarf_bytes);
      fresh->dwarf_bytes = 0;
    }
    if (const std::string& id = fresh->elf->build_id(); !id.empty()) modules_by_build_id_[id] = fresh.get();
    Module* module = modules_.emplace_back(std::move(fresh)).get();
    file.read_attempted = true;
    file.module = module;
    ++module->files;
  }
}

Symbolizer::Module* Symbolizer::vdso() {
  if (vdso_) return vdso_->get();
  vdso_.emplace();
  std::string_view image = own_vdso_image();
  if (image.empty()) return nullptr;
  auto elf = ElfSymbols::read_memory(std::string(image), "[vdso]");
  if (!elf) return nullptr;
  auto module = std::make_unique<Module>();
  module->path = "[vdso]";
  module->elf = std::move(*elf);
  module->debug_loaded = true;
  module->dwarf_state = Module::Dwarf::kNone;
  *vdso_ = std::move(module);
  return vdso_->get();
}

void Symbolizer::load_debug_info(Module& module, std::vector<std::string>& warnings) {
  if (module.debug_loaded || !module.elf) return;
  module.debug_loaded = true;
  ElfSymbols& elf = *module.elf;
  bool want_dwarf = (options_.inlines || options_.lines) && !elf.has_dwarf();
  if (!elf.has_symtab() || want_dwarf) module.debug = debug_finder_.find(elf, module.path, module.root, warnings);
  if (elf.has_symtab()) return;
  if (module.debug && module.debug->elf->has_symtab())
    elf.merge(*module.debug->elf);
  else if ((module.mini = DebugFinder::minidebuginfo(elf, module.path, warnings)))
    elf.merge(*module.mini);
}

void Symbolizer::prepare(std::vector<Module*> modules) {
  std::sort(modules.begin(), modules.end());
  modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
  for (Module* m : modules) {
    load_debug_info(*m, warnings_);
    m->used_window = window_;
  }
  std::vector<Module*> batch = modules;
  admit_dwarf(batch);
  for (Module* m : modules) m->release_files();
}

void Symbolizer::admit_dwarf(std::vector<Module*>& modules) {
  if (!options_.inlines && !options_.lines) return;
  std::erase_if(modules, [&](Module* m) {
    if (m->dwarf_state != Module::Dwarf::kUnplanned) return true;
    if (m->dwarf_source()) return false;
    m->dwarf_state = Module::Dwarf::kNone;
    return true;
  });
  // Smallest first: past the bound, the largest go without.
  std::sort(modules.begin(), modules.end(), [&](Module* a, Module* b) {
    return a->dwarf_source()->dwarf_bytes() < b->dwarf_source()->dwarf_bytes();
  });
  for (Module* m : modules) {
    uint64_t bytes = m->dwarf_source()->dwarf_bytes();
    m->dwarf_state = Module::Dwarf::kNone;
    if (dwarf_bytes_used_ + bytes > options_.dwarf_memory_bytes) admit_dwarf_warning(*m, bytes);
    else if (m->open_dwarf(warnings_)) dwarf_bytes_used_ += m->dwarf_bytes;
  }
}

void Symbolizer::admit_dwarf_warning(const Module& module, uint64_t bytes) {
  warnings_.push_back(module.path + ": its DWARF (" + mib(bytes) + ") does not fit in what is left of the symbolizer's " +
                      mib(options_.dwarf_memory_bytes) + " for DWARF" +
                      (options_.memory_knob.empty() ? "" : " (half of " + options_.memory_knob + ")") +
                      "; its frames are named from the symbol table, without inlined calls or lines");
}

const Symbol& Symbolizer::symbolize_in_module(Module& module, uint64_t vaddr) {
  auto [it, inserted] = module.answers.try_emplace(vaddr);
  Symbol& out = it->second;
  if (!inserted) return out;
  answer(module, vaddr, out);
  module.cache_bytes += answer_bytes(out);
  return out;
}

void Symbolizer::answer(Module& module, uint64_t vaddr, Symbol& out) {
  std::string_view raw = module.elf->find(vaddr);
  std::vector<SourceFrame> source;
  if (module.dwarf) {
    source = module.dwarf->lookup(vaddr, options_.lines);
    if (module.dwarf->damaged_units() && !module.damage_reported) {
      module.damage_reported = true;
      warnings_.push_back(module.path + ": its DWARF is damaged (libdw could not read some of it); frames there "
                          "may lack inlined calls or lines");
    }
  }
  if (raw.empty() && source.empty()) {
    out.unknown = module.elf->has_symtab() ? Unknown::NoSymbol : Unknown::Stripped;
    return;
  }
  auto name_of = [&](std::string_view mangled, bool* cpp) -> const std::string& {
    auto [d, fresh] = module.demangled.try_emplace(mangled.data());
    if (fresh) {
      d->second.first = demangle(mangled, &d->second.second);
      module.cache_bytes += kNodeBytes + sizeof *d + heap_bytes(d->second.first);
    }
    *cpp = d->second.second;
    return d->second.first;
  };
  auto frame = [&](std::string name, FrameKind kind, const SourceFrame* f) {
    Frame frame(std::move(name), kind, module.path);
    if (options_.lines && f) {
      frame.file = f->file;
      frame.line = f->line;
    }
    return frame;
  };
  bool cpp = false;
  // The symbol table names the function (as every other tool does); DWARF
  // adds what was inlined into it here.
  std::string outer = raw.empty() ? demangle(source[0].name, &cpp) : name_of(raw, &cpp);
  out.frames.push_back(
      frame(std::move(outer), cpp ? FrameKind::Cpp : FrameKind::Native, source.empty() ? nullptr : &source[0]));
  for (size_t i = 1; i < source.size(); ++i)
    out.frames.push_back(frame(demangle(source[i].name), FrameKind::Inlined, &source[i]));
}

const PerfMap& Symbolizer::perf_map(uint32_t pid, Process& p) {
  if (!p.perf_map) {
    // A JIT in a container writes the map to its own /tmp, named by the pid
    // it sees.
    std::vector<std::string> candidates;
    std::string dir = options_.proc_root + "/" + std::to_string(pid);
    std::string ns = namespace_pid(dir);
    for (const std::string& tmp : {p.root.empty() ? std::string() : p.root + "/tmp", options_.perf_map_dir})
      for (const std::string& id : {ns, std::to_string(pid)})
        if (!tmp.empty() && !id.empty()) candidates.push_back(tmp + "/perf-" + id + ".map");
    for (const std::string& path : candidates) {
      std::ifstream in(path);
      if (!in) continue;
      p.perf_map = parse_perf_map(in);
      if (p.perf_map->bad_lines)
        warnings_.push_back(path + ": " + std::to_string(p.perf_map->bad_lines) + " lines that are not \"START SIZE name\" were skipped");
      break;
    }
    if (!p.perf_map) p.perf_map = PerfMap{};
  }
  return *p.perf_map;
}

std::vector<Symbol> Symbolizer::symbolize_user(uint32_t pid, std::span<const uint64_t> addresses) {
  std::vector<Symbol> out(addresses.size());
  auto it = processes_.find(pid);
  if (it == processes_.end()) {
    for (Symbol& s : out) s.unknown = Unknown::NoProcess;
    return out;
  }
  Process& p = it->second;
  // Before the batch takes pointers to modules.
  evict_over_cap(true);
  // What read_ahead() read: all of it, before reading anything here (the
  // loader may be reading the very file, and it uses the debug finder).
  take_loads(!std::all_of(addresses.begin(), addresses.end(), [&](uint64_t a) {
    const Mapping* m = find_mapping(p.mappings, a);
    return !m || m->inode == 0 || names_at_once(pid, a);
  }));
  // First where each address lies, so DWARF can be admitted for the whole batch.
  struct Where {
    const Mapping* mapping = nullptr;
    Module* module = nullptr;
    std::optional<uint64_t> vaddr;
    std::optional<Unknown> unreadable;
  };
  std::vector<Where> where(addresses.size());
  std::vector<Module*> modules;
  for (size_t i = 0; i < addresses.size(); ++i) {
    Where& w = where[i];
    w.mapping = find_mapping(p.mappings, addresses[i]);
    if (!w.mapping) continue;
    const Mapping& m = *w.mapping;
    if (m.inode != 0) {
      OpenFile& file = file_for(pid, m);
      w.module = module_of(file, m.path, p.root);
      w.unreadable = file.unreadable;
    } else if (m.path == "[vdso]") {
      w.module = vdso();
    }
    if (!w.module) continue;
    w.vaddr = w.module->elf->vaddr_of_offset(addresses[i] - m.start + m.offset);
    modules.push_back(w.module);
  }
  prepare(std::move(modules));

  for (size_t i = 0; i < addresses.size(); ++i) {
    const Where& w = where[i];
    const Mapping* m = w.mapping;
    uint64_t offset = m ? addresses[i] - m->start + m->offset : 0;
    auto unknown = [&](Unknown why) {
      out[i].unknown = why;
      out[i].module = m->path;
      out[i].offset = offset;
    };
    if (w.module && w.vaddr) {
      const Symbol& s = symbolize_in_module(*w.module, *w.vaddr);
      if (s.known())
        out[i] = s;
      else
        unknown(*s.unknown);
    } else if (w.module) {
      unknown(Unknown::OutsideCode);
    } else if (w.unreadable) {
      unknown(*w.unreadable);
    } else if (const PerfMapEntry* e = perf_map(pid, p).find(addresses[i])) {
      out[i].frames.push_back(Frame(e->name, FrameKind::Jit));
    } else if (!m) {
      out[i].unknown = Unknown::Unmapped;
    } else {
      // [anon] (JIT code without a perf map), [heap], [stack], [vdso] unread...
      unknown(m->path.empty() ? Unknown::Anonymous : Unknown::SpecialMapping);
      if (m->path.empty()) out[i].module = "[anon]";
    }
  }
  return out;
}

std::vector<Symbol> Symbolizer::symbolize_file(const std::string& path, std::span<const uint64_t> addresses) {
  auto [it, inserted] = files_by_path_.try_emplace(path);
  if (inserted) it->second.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  take_loads(true);  // the debug finder is the loader's meanwhile
  evict_over_cap(true);
  Module* module = module_of(it->second, path, "");
  if (module) prepare({module});
  std::vector<Symbol> out;
  out.reserve(addresses.size());
  for (uint64_t a : addresses) {
    const Symbol* s = module ? &symbolize_in_module(*module, a) : nullptr;
    if (s && s->known()) {
      out.push_back(*s);
      continue;
    }
    Symbol& unknown = out.emplace_back();
    unknown.unknown = s ? *s->unknown : *it->second.unreadable;
    unknown.module = path;
    unknown.offset = a;
  }
  return out;
}

void Symbolizer::prefetch_kernel() {
  if (!kernel_ && !kernel_loading_.valid())
    kernel_loading_ = std::async(std::launch::async, KernelSymbols::load, options_.kallsyms_path);
}

bool Symbolizer::kernel_ready() const {
  return kernel_ || (kernel_loading_.valid() &&
                     kernel_loading_.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
}

const KernelSymbols* Symbolizer::kernel() {
  if (!kernel_) {
    kernel_ = kernel_loading_.valid() ? kernel_loading_.get() : KernelSymbols::load(options_.kallsyms_path);
    if (!*kernel_)
      warnings_.push_back("kernel frames are unnamed: " + kernel_->error());
    else if ((*kernel_)->addresses_hidden())
      warnings_.push_back("kernel frames are unnamed: " + options_.kallsyms_path +
                          " shows ember only zero addresses. kernel.kptr_restrict=2 hides them from everyone "
                          "(fix: sysctl kernel.kptr_restrict=0); kernel.kptr_restrict=1 from processes without "
                          "CAP_SYSLOG (fix: run as root, or add cap_syslog to ember's capabilities)");
  }
  return *kernel_ ? &**kernel_ : nullptr;
}

bool Symbolizer::kernel_symbols_hidden() {
  const KernelSymbols* k = kernel();
  return !k || k->addresses_hidden();
}

std::vector<Symbol> Symbolizer::symbolize_kernel(std::span<const uint64_t> addresses) {
  std::vector<Symbol> out;
  out.reserve(addresses.size());
  const KernelSymbols* k = kernel();
  for (uint64_t address : addresses) {
    Symbol& symbol = out.emplace_back();
    if (auto s = k ? k->find(address) : std::nullopt)
      symbol.frames.emplace_back(std::string(s->name), FrameKind::Kernel,
                                 s->module.empty() ? "[kernel]" : "[" + std::string(s->module) + "]");
    else
      symbol.unknown = !k ? Unknown::KernelUnavailable
                       : k->addresses_hidden() ? Unknown::KernelHidden
                                               : Unknown::KernelNoSymbol;
  }
  return out;
}

void Symbolizer::end_window() {
  for (auto& [key, file] : files_)
    if (file.module) file.module->mapped_window = window_;
  // Paths given to symbolize_file are opened again on their next call.
  for (auto& [path, file] : files_by_path_) close_file(file);
  files_by_path_.clear();
  free_modules([&](const Module& m) {
    bool reachable = m.files != 0 || modules_by_build_id_.count(m.elf->build_id());
    return !reachable || window_ - std::max(m.used_window, m.mapped_window) >= options_.idle_windows;
  });
  evict_over_cap(false);
  ++window_;
}

std::vector<std::string> Symbolizer::take_warnings() {
  std::set<std::string> seen;
  std::erase_if(warnings_, [&](const std::string& w) { return !seen.insert(w).second; });
  return std::exchange(warnings_, {});
}

void Symbolizer::evict_over_cap(bool within_window) {
  if (memory_bytes() <= options_.memory_bytes) return;
  if (!within_window)
    for (auto& m : modules_) m->drop_caches();
  uint64_t held = memory_bytes();
  if (held <= options_.memory_bytes) return;
  // Least recently symbolized first; of those, the largest. Within a
  // window, only those it has not used: a window that meets many binaries
  // holds no more than its own past the bound.
  std::vector<std::pair<Module*, uint64_t>> order;
  for (auto& m : modules_)
    if (!within_window || m->used_window < window_) order.emplace_back(m.get(), m->memory_bytes());
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first->used_window != b.first->used_window ? a.first->used_window < b.first->used_window
                                                        : a.second > b.second;
  });
  std::set<const Module*> evicted;
  for (const auto& [m, bytes] : order) {
    if (held <= options_.memory_bytes) break;
    evicted.insert(m);
    held -= bytes;
  }
  free_modules([&](const Module& m) { return evicted.count(&m) != 0; });
}

void Symbolizer::free_modules(const std::function<bool(const Module&)>& unwanted) {
  std::erase_if(modules_, [&](const std::unique_ptr<Module>& m) {
    if (!unwanted(*m)) return false;
    // Files that still map it read it again when next asked.
    for (auto& [key, file] : files_)
      if (file.module == m.get()) file = {file.fd, nullptr, false, std::nullopt, file.processes};
    if (auto it = modules_by_build_id_.find(m->elf->build_id()); it != modules_by_build_id_.end() && it->second == m.get())
      modules_by_build_id_.erase(it);
    dwarf_bytes_used_ -= m->dwarf_bytes;
    return true;
  });
}

uint64_t Symbolizer::memory_bytes() const {
  uint64_t bytes = 0;
  for (const auto& m : modules_) bytes += m->memory_bytes();
  return bytes;
}

std::vector<Symbolizer::Binary> Symbolizer::binaries() const {
  std::vector<Binary> out;
  for (const auto& m : modules_) out.push_back({m->path, m->memory_bytes(), m->used_window});
  return out;
}

const char* describe(Unknown why) {
  switch (why) {
    case Unknown::NoProcess: return "the process exited before ember saw its mappings";
    case Unknown::Unmapped: return "not in any mapping of the process";
    case Unknown::Anonymous: return "anonymous memory: JIT code without a perf-PID.map";
    case Unknown::JitNotPublished: return "JIT code its JVM's agent has not described";
    case Unknown::SpecialMapping: return "a mapping without a file, and without symbols";
    case Unknown::Unreadable: return "its file cannot be opened";
    case Unknown::BadElf: return "its file is not ELF, or is damaged";
    case Unknown::OutsideCode: return "outside the file's code segments";
    case Unknown::Stripped: return "no symbol covers this address, and the file is stripped (no debug file found)";
    case Unknown::NoSymbol: return "no symbol covers this address";
    case Unknown::KernelHidden: return "kernel addresses are hidden (kernel.kptr_restrict)";
    case Unknown::KernelUnavailable: return "kernel symbols unavailable";
    case Unknown::KernelNoSymbol: return "no kernel symbol covers this address";
  }
  return "unknown";
}

}  // namespace ember::symbolizer
