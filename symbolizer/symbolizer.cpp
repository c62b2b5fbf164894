#include "symbolizer/symbolizer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace ember::symbolizer {

using flamegraph::Frame;
using flamegraph::FrameKind;

// A file mapped by some process, opened once for all processes that map it.
struct Symbolizer::MappedFile {
  std::string path;
  int fd = -1;
  bool read_attempted = false;
  std::unique_ptr<ElfSymbols> elf;
  std::unordered_map<const char*, std::string> demangled;  // raw name -> display name
  std::unordered_map<const char*, bool> is_cpp;
  ~MappedFile() {
    if (fd >= 0) close(fd);
  }
};

namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t address) {
  auto it = std::upper_bound(maps.begin(), maps.end(), address,
                             [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

}  // namespace

Symbolizer::Symbolizer(Options options) : options_(std::move(options)) {}
Symbolizer::~Symbolizer() = default;

bool Symbolizer::snapshot_process(uint32_t pid) {
  std::string dir = options_.proc_root + "/" + std::to_string(pid);
  std::ifstream in(dir + "/maps");
  if (!in) return false;
  std::vector<Mapping> fresh = parse_proc_maps(in);
  // Samples only land in code.
  std::erase_if(fresh, [](const Mapping& m) { return !m.executable; });
  if (fresh.empty()) return false;  // exited between open and read, or a kernel thread
  Process& p = processes_[pid];
  // Mappings seen earlier that nothing replaced stay: the code may have
  // been unmapped after it was sampled.
  for (Mapping& old : p.mappings) {
    bool overlaps = std::any_of(fresh.begin(), fresh.end(),
                                [&](const Mapping& m) { return m.start < old.end && old.start < m.end; });
    if (!overlaps) fresh.push_back(std::move(old));
  }
  std::sort(fresh.begin(), fresh.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  p.mappings = std::move(fresh);
  for (const Mapping& m : p.mappings)
    if (m.executable && m.inode != 0) file_for(pid, m);
  return true;
}

bool Symbolizer::maps(uint32_t pid, uint64_t address) const {
  auto it = processes_.find(pid);
  return it != processes_.end() && find_mapping(it->second.mappings, address) != nullptr;
}

Symbolizer::MappedFile* Symbolizer::file_for(uint32_t pid, const Mapping& m) {
  auto& slot = files_[{m.dev, m.inode}];
  if (slot) return slot.get();
  slot = std::make_unique<MappedFile>();
  slot->path = m.path;
  std::string dir = options_.proc_root + "/" + std::to_string(pid);
  char range[64];
  std::snprintf(range, sizeof range, "/map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
  // map_files reaches the very inode mapped (deleted, replaced, or in another
  // mount namespace) but needs CAP_SYS_ADMIN; root/ covers containers.
  for (const std::string& candidate : {dir + range, dir + "/root" + m.path, m.path}) {
    slot->fd = open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (slot->fd >= 0) break;
  }
  return slot.get();
}

Symbol Symbolizer::symbolize_in_file(MappedFile& file, const Mapping& m, uint64_t address) {
  uint64_t offset = address - m.start + m.offset;
  std::string module = file.path;
  if (!file.read_attempted && file.fd >= 0) {
    file.read_attempted = true;
    auto elf = ElfSymbols::read(file.fd, file.path);
    if (elf)
      file.elf = std::move(*elf);
    else
      warnings_.push_back(elf.error());
  }
  if (file.elf) {
    if (auto vaddr = file.elf->vaddr_of_offset(offset)) {
      std::string_view raw = file.elf->find(*vaddr);
      if (!raw.empty()) {
        auto [it, inserted] = file.demangled.try_emplace(raw.data());
        if (inserted) {
          bool cpp = false;
          it->second = demangle(raw, &cpp);
          file.is_cpp[raw.data()] = cpp;
        }
        return {Frame{it->second, file.is_cpp[raw.data()] ? FrameKind::Cpp : FrameKind::Native, module}, true};
      }
    }
  }
  return {Frame{basename_of(m.path) + "+" + hex(offset), FrameKind::Unknown, module}, false};
}

const PerfMap& Symbolizer::perf_map(uint32_t pid, Process& p) {
  if (!p.perf_map) {
    std::ifstream in(options_.perf_map_dir + "/perf-" + std::to_string(pid) + ".map");
    p.perf_map = in ? parse_perf_map(in) : PerfMap{};
  }
  return *p.perf_map;
}

std::vector<Symbol> Symbolizer::symbolize_user(uint32_t pid, std::span<const uint64_t> addresses) {
  std::vector<Symbol> out;
  out.reserve(addresses.size());
  auto it = processes_.find(pid);
  for (uint64_t address : addresses) {
    const Mapping* m = it == processes_.end() ? nullptr : find_mapping(it->second.mappings, address);
    if (m && m->inode != 0) {
      MappedFile* file = file_for(pid, *m);
      out.push_back(symbolize_in_file(*file, *m, address));
      continue;
    }
    if (it != processes_.end()) {
      if (const PerfMapEntry* e = perf_map(pid, it->second).find(address)) {
        out.push_back({Frame{e->name, FrameKind::Jit, {}}, true});
        continue;
      }
    }
    if (m && m->path == "[vdso]")
      out.push_back({Frame{"[vdso]", FrameKind::Native, "[vdso]"}, true});
    else
      out.push_back({Frame{m ? "[anon]" : "[unknown]", FrameKind::Unknown, {}}, false});
  }
  return out;
}

void Symbolizer::prefetch_kernel() {
  if (!kernel_ && !kernel_loading_.valid())
    kernel_loading_ = std::async(std::launch::async, KernelSymbols::load, options_.kallsyms_path);
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
    auto s = k ? k->find(address) : std::nullopt;
    if (s)
      out.push_back({Frame{std::string(s->name), FrameKind::Kernel,
                           s->module.empty() ? "[kernel]" : "[" + std::string(s->module) + "]"},
                     true});
    else
      out.push_back({Frame{"[unknown]", FrameKind::Kernel, "[kernel]"}, false});
  }
  return out;
}

}  // namespace ember::symbolizer
