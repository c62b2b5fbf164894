#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/auxv.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <set>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "symbolizer/profile_frames.h"
#include "symbolizer/symbolizer.h"

using namespace ember::symbolizer;
using ember::symbolizer::FrameKind;
namespace fs = std::filesystem;

namespace {

std::string fixture_path(const char* name) {
  const char* dir = std::getenv("EMBER_FIXTURES");
  return std::string(dir ? dir : "build/fixtures") + "/" + name;
}


void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// Addresses of the fixture's functions as the dynamic linker placed them:
// ground truth that does not go through ember's ELF reader.
void check_fixture(const char* library) {
  void* handle = dlopen(fixture_path(library).c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  struct Case {
    const char* symbol;
    std::string expect;
    FrameKind kind;
  } cases[] = {
      {"fixture_alpha", "fixture_alpha", FrameKind::Native},
      {"fixture_beta", "fixture_beta", FrameKind::Native},
      {"_ZN7fixture6Widget4spinEi", "fixture::Widget::spin(int)", FrameKind::Cpp},
      {"_ZN7fixture6Widget5twiceEl", "fixture::Widget::twice(long)", FrameKind::Cpp},
  };
  std::vector<uint64_t> addrs;
  for (const Case& c : cases) {
    void* p = dlsym(handle, c.symbol);
    REQUIRE(p != nullptr);
    addrs.push_back(reinterpret_cast<uint64_t>(p) + 2);  // inside, not only at the entry
  }
  Symbolizer sym;
  REQUIRE(sym.snapshot_process(getpid()));
  auto out = sym.symbolize_user(getpid(), addrs);
  REQUIRE(out.size() == addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    INFO(library << " " << cases[i].symbol);
    CHECK(out[i].known());
    CHECK(out[i].frames.front().name == cases[i].expect);
    CHECK(out[i].frames.front().kind == cases[i].kind);
    CHECK(out[i].frames.front().module.find(library) != std::string::npos);
  }
  dlclose(handle);
}

}  // namespace

TEST_CASE("symbolizer names functions of a loaded library (.symtab)") { check_fixture("libfixture.so"); }

TEST_CASE("symbolizer names functions of a stripped library (.dynsym)") { check_fixture("libfixture-stripped.so"); }

TEST_CASE("symbolizer names this test binary's own code and libc") {
  Symbolizer sym;
  REQUIRE(sym.snapshot_process(getpid()));
  uint64_t addrs[] = {reinterpret_cast<uint64_t>(&getpid)};
  auto out = sym.symbolize_user(getpid(), addrs);
  CHECK(out[0].known());
  CHECK(out[0].frames.front().name.find("getpid") != std::string::npos);
  CHECK(out[0].frames.front().module.find("libc") != std::string::npos);
}

TEST_CASE("symbolizer reads a file's symbols and DWARF ahead, on its loader thread, to the same names") {
  // The unit-test binary (DWARF, inlined calls) and libc (its debug file
  // from libc6-dbg when installed): naming them needs reading files.
  uint64_t pid = getpid();
  uint64_t addrs[] = {reinterpret_cast<uint64_t>(&getpid), reinterpret_cast<uint64_t>(&check_fixture) + 4};
  Symbolizer fresh;
  REQUIRE(fresh.snapshot_process(pid));
  auto expected = fresh.symbolize_user(pid, addrs);
  REQUIRE(expected[0].known());
  REQUIRE(expected[1].known());

  auto names = [](const Symbol& symbol) {
    std::vector<std::string> out;
    for (const Frame& f : symbol.frames) out.push_back(f.name + " " + f.module);
    return out;
  };
  Symbolizer ahead;
  REQUIRE(ahead.snapshot_process(pid));
  for (uint64_t a : addrs) CHECK_FALSE(ahead.names_at_once(pid, a));
  ahead.read_ahead(pid, addrs);
  // Taken in by a later call, once the loader has read them.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(ahead.names_at_once(pid, addrs[0]) && ahead.names_at_once(pid, addrs[1])) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ahead.read_ahead(pid, addrs);
  }
  CHECK(ahead.names_at_once(pid, addrs[0]));
  CHECK(ahead.names_at_once(pid, addrs[1]));
  auto got = ahead.symbolize_user(pid, addrs);
  for (size_t i = 0; i < 2; ++i) {
    INFO(expected[i].frames.front().name);
    CHECK(names(got[i]) == names(expected[i]));
  }

  // Asked and named at once: the naming waits for the loader, not reading twice.
  Symbolizer hurried;
  REQUIRE(hurried.snapshot_process(pid));
  hurried.read_ahead(pid, addrs);
  auto now = hurried.symbolize_user(pid, addrs);
  for (size_t i = 0; i < 2; ++i) CHECK(names(now[i]) == names(expected[i]));
  CHECK(hurried.binaries().size() == fresh.binaries().size());
}

// Kills and reaps the child however the test ends.
struct ChildGuard {
  pid_t pid;
  ~ChildGuard() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

TEST_CASE("symbolizer keeps a process's mappings and files after it exits") {
  pid_t child = fork();
  if (child == 0) {
    void* h = dlopen(fixture_path("libfixture.so").c_str(), RTLD_NOW);
    if (h) pause();
    _exit(1);
  }
  ChildGuard guard{child};
  // Wait for the child to map the fixture.
  std::string maps = "/proc/" + std::to_string(child) + "/maps";
  bool mapped = false;
  for (int i = 0; i < 200 && !mapped; ++i, usleep(10000)) {
    std::ifstream in(maps);
    std::stringstream s;
    s << in.rdbuf();
    mapped = s.str().find("libfixture.so") != std::string::npos;
  }
  REQUIRE(mapped);
  Symbolizer sym;
  REQUIRE(sym.snapshot_process(child));
  // The child's address of fixture_beta: same library, same load address
  // would be luck, so read it from its maps through a symbolizer lookup of
  // our own copy's offset.
  void* h = dlopen(fixture_path("libfixture.so").c_str(), RTLD_NOW);
  REQUIRE(h);
  Dl_info info{};
  REQUIRE(dladdr(dlsym(h, "fixture_beta"), &info));
  uint64_t offset = reinterpret_cast<uint64_t>(dlsym(h, "fixture_beta")) - reinterpret_cast<uint64_t>(info.dli_fbase);
  uint64_t child_base = 0;
  {
    std::ifstream in(maps);
    std::string line;
    while (std::getline(in, line))
      if (line.find("libfixture.so") != std::string::npos && line.find(" 00000000 ") != std::string::npos) {
        child_base = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
        break;
      }
  }
  REQUIRE(child_base != 0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  guard.pid = -1;
  REQUIRE_FALSE(fs::exists("/proc/" + std::to_string(child)));

  uint64_t addr[] = {child_base + offset + 1};
  auto out = sym.symbolize_user(child, addr);
  CHECK(out[0].known());
  CHECK(out[0].frames.front().name == "fixture_beta");
  dlclose(h);
}

TEST_CASE("symbolizer: perf maps, anonymous memory, unknown addresses") {
  TempDir dir;
  write_file(dir.path / "proc/77/maps",
             "00400000-00401000 r-xp 00000000 00:00 0 \n"
             "00500000-00501000 r-xp 00002000 fd:01 999999 /nonexistent/libgone.so\n"
             "7fff0000-7fff2000 r-xp 00000000 00:00 0                          [vdso]\n");
  write_file(dir.path / "tmp/perf-77.map",
             "400100 40 LFoo;::bar\n"
             "garbage line\n"
             "400200 20 old\n"
             "400200 20 Interpreter\n");
  Options opts;
  opts.proc_root = (dir.path / "proc").string();
  opts.perf_map_dir = (dir.path / "tmp").string();
  Symbolizer sym(opts);
  REQUIRE(sym.snapshot_process(77));
  uint64_t addrs[] = {0x400110, 0x400210, 0x400800, 0x500010, 0x7fff0010, 0x900000};
  auto out = sym.symbolize_user(77, addrs);
  CHECK(out[0].frames.front().name == "LFoo;::bar");
  CHECK(out[0].frames.front().kind == FrameKind::Jit);
  CHECK(out[1].frames.front().name == "Interpreter");  // the later entry for a reused range wins
  CHECK(out[2].unknown == Unknown::Anonymous);
  CHECK(out[2].module == "[anon]");
  CHECK(out[3].unknown == Unknown::Unreadable);
  CHECK(out[3].module == "/nonexistent/libgone.so");  // module and file offset kept
  CHECK(out[3].offset == 0x2010);
  CHECK_FALSE(out[4].known());  // the ELF header: no function there
  CHECK(out[4].module == "[vdso]");
  CHECK(out[5].unknown == Unknown::Unmapped);
  CHECK(out[5].module.empty());
}

TEST_CASE("symbolizer reads one build once, whatever the copies and paths") {
  TempDir dir;
  // Two files, two inodes, one build-id: as a container's copy of a library.
  fs::copy_file(fixture_path("libfixture.so"), dir.path / "a.so");
  fs::copy_file(fixture_path("libfixture.so"), dir.path / "b.so");
  void* a = dlopen((dir.path / "a.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  void* b = dlopen((dir.path / "b.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(a != b);
  uint64_t addrs[] = {reinterpret_cast<uint64_t>(dlsym(a, "fixture_alpha")) + 2,
                      reinterpret_cast<uint64_t>(dlsym(b, "fixture_beta")) + 2};
  Symbolizer sym;
  REQUIRE(sym.snapshot_process(getpid()));
  auto out = sym.symbolize_user(getpid(), addrs);
  CHECK(out[0].frames.front().name == "fixture_alpha");
  CHECK(out[1].frames.front().name == "fixture_beta");
  CHECK(sym.binaries().size() == 1);
  dlclose(a);
  dlclose(b);
}

// PLT entries as binutils' objdump names them (`<malloc@plt>:`, from its own
// reading of the relocations): ground truth apart from ember's reader. Its
// *ABS*+0x... entries (IRELATIVE, no symbol) and the PLT's header are "[plt]".
// arm64's, from Debian 12's arm64 libraries (the sysroot `make test`
// unpacks), against the cross binutils' objdump.
TEST_CASE("symbolizer names PLT entries after the function they jump to, as objdump does") {
  const std::string arm64 = "/var/cache/ember/arm64-sysroot/usr/lib/aarch64-linux-gnu/";
  for (auto [objdump, path] : std::vector<std::pair<std::string, std::string>>{
           {"objdump", fixture_path("libfixture.so")},
           {"objdump", "/usr/bin/ls"},
           {"objdump", "/lib/x86_64-linux-gnu/libc.so.6"},
           {"aarch64-linux-gnu-objdump", arm64 + "libstdc++.so.6"},
           {"aarch64-linux-gnu-objdump", arm64 + "libbpf.so.1"}}) {
    INFO(path);
    std::vector<uint64_t> addresses;
    std::vector<std::string> names;
    // arm64's objdump names the thread-local descriptors' trampoline, which
    // ends the PLT, after the TLSDESC relocations of .rela.plt: no entry.
    std::set<std::string> thread_locals;
    if (objdump != "objdump") {
      FILE* r = popen(("aarch64-linux-gnu-readelf -rW -C '" + path + "' 2>/dev/null").c_str(), "r");
      REQUIRE(r);
      char text[4096];
      while (fgets(text, sizeof text, r)) {
        std::istringstream words(text);
        std::string offset, info, type, value, name;
        if (words >> offset >> info >> type >> value >> name && type == "R_AARCH64_TLSDESC")
          thread_locals.insert(name.substr(0, name.find('@')) + "@plt");
      }
      pclose(r);
    }
    FILE* p = popen((objdump + " -d -C -j .plt -j .plt.sec -j .plt.got '" + path + "' 2>/dev/null").c_str(), "r");
    REQUIRE(p);
    char line[4096];
    while (fgets(line, sizeof line, p)) {
      // A label's line: "ADDRESS <NAME>:", not an instruction's (indented,
      // its operand's <NAME> may hold ">:" too, as in "<...> >::~...").
      std::string l(line);
      size_t open = l.find(" <"), close = l.rfind(">:");
      if (!std::isxdigit(static_cast<unsigned char>(l[0])) || open == std::string::npos || close == std::string::npos ||
          close < open)
        continue;
      std::string label = l.substr(open + 2, close - open - 2);
      uint64_t address = std::stoull(l.substr(0, open), nullptr, 16);
      bool entry = label.ends_with("@plt") && label.find("*ABS*") == std::string::npos && !thread_locals.count(label);
      // The entry's first byte and one inside it.
      for (uint64_t at : {address, address + 6}) {
        addresses.push_back(at);
        names.push_back(entry ? label : "[plt]");
      }
    }
    pclose(p);
    REQUIRE(addresses.size() >= 4);
    Symbolizer sym;
    auto out = sym.symbolize_file(path, addresses);
    size_t entries = 0;
    for (size_t i = 0; i < addresses.size(); ++i) {
      INFO("at 0x" << std::hex << addresses[i]);
      REQUIRE(out[i].known());
      CHECK(out[i].frames.front().name == names[i]);
      entries += names[i] != "[plt]";
    }
    CHECK(entries >= 2);
  }
}

TEST_CASE("symbolizer names vDSO functions from the kernel's image") {
  Symbolizer sym;
  REQUIRE(sym.snapshot_process(getpid()));
  uint64_t base = getauxval(AT_SYSINFO_EHDR);
  REQUIRE(base != 0);
  std::vector<uint64_t> addrs;
  for (uint64_t off = 0; off < 0x2000; off += 8) addrs.push_back(base + off);
  auto out = sym.symbolize_user(getpid(), addrs);
  std::set<std::string> names;
  for (const Symbol& s : out)
    if (s.known()) names.insert(s.frames.front().name);
  INFO("named in the vDSO: " << names.size());
  CHECK((names.count("__vdso_clock_gettime") || names.count("clock_gettime")));
  for (const Symbol& s : out)
    if (s.known()) CHECK(s.frames.front().module == "[vdso]");
}

TEST_CASE("kallsyms: text symbols, modules, and kptr_restrict") {
  TempDir dir;
  write_file(dir.path / "kallsyms",
             "ffffffff81000000 T _stext\n"
             "ffffffff81000100 t do_one_thing\n"
             "ffffffff81000200 D some_data\n"
             "ffffffffc0001000 t kvm_thing\t[kvm]\n"
             "ffffffffc0201000 t bpf_prog_6deef7357e7b4530_ember_sample\t[bpf]\n");
  Options opts;
  opts.kallsyms_path = (dir.path / "kallsyms").string();
  Symbolizer sym(opts);
  uint64_t addrs[] = {0xffffffff81000150, 0xffffffff81000250, 0xffffffffc0001010, 0x10, 0xffffffffc0201040};
  auto out = sym.symbolize_kernel(addrs);
  // BPF programs: named by kallsyms after their tag and program name.
  CHECK(out[4].frames.front().name == "bpf_prog_6deef7357e7b4530_ember_sample");
  CHECK(out[4].frames.front().module == "[bpf]");
  CHECK(out[0].frames.front().name == "do_one_thing");
  CHECK(out[0].frames.front().kind == FrameKind::Kernel);
  CHECK(out[1].frames.front().name == "do_one_thing");  // data symbols are not functions
  CHECK(out[2].frames.front().name == "kvm_thing");
  CHECK(out[2].frames.front().module == "[kvm]");
  CHECK(out[3].unknown == Unknown::KernelNoSymbol);
  CHECK_FALSE(sym.kernel_symbols_hidden());

  write_file(dir.path / "hidden", "0000000000000000 T _stext\n0000000000000000 t do_one_thing\n");
  opts.kallsyms_path = (dir.path / "hidden").string();
  Symbolizer hidden(opts);
  CHECK(hidden.kernel_symbols_hidden());
  std::vector<std::string> warnings = hidden.take_warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("kptr_restrict") != std::string::npos);
  CHECK(hidden.take_warnings().empty());  // told once
  CHECK(hidden.symbolize_kernel(addrs)[0].unknown == Unknown::KernelHidden);

  opts.kallsyms_path = (dir.path / "absent").string();
  Symbolizer absent(opts);
  CHECK(absent.symbolize_kernel(addrs)[0].unknown == Unknown::KernelUnavailable);
}

TEST_CASE("proc maps parser") {
  auto maps = parse_proc_maps(
      "55d0c3a00000-55d0c3a28000 r-xp 00002000 fd:01 1234   /usr/bin/foo bar\n"
      "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
      "not a mapping");
  REQUIRE(maps.size() == 2);
  CHECK(maps[0].start == 0x55d0c3a00000);
  CHECK(maps[0].offset == 0x2000);
  CHECK(maps[0].inode == 1234);
  CHECK(maps[0].executable);
  CHECK(maps[0].path == "/usr/bin/foo bar");
  CHECK_FALSE(maps[1].executable);
  CHECK(maps[1].path.empty());
}

TEST_CASE("demangle drops symbol versions, C and C++") {
  CHECK(demangle("rtime@GLIBC_2.2.5") == "rtime");
  bool cpp = false;
  std::string name = demangle("_ZNSs9_M_assignEPcmc@@GLIBCXX_3.4.5", &cpp);
  CHECK(cpp);
  CHECK(name.ends_with("::_M_assign(char*, unsigned long, char)"));
}

TEST_CASE("symbolizer: why a file's address has no name") {
  TempDir dir;
  write_file(dir.path / "not-elf.so", std::string(4096, 'x'));
  // The stripped fixture keeps .dynsym only: its local function has no name.
  Symbolizer sym;
  auto stripped = sym.symbolize_file(fixture_path("libfixture-stripped.so"), std::array<uint64_t, 1>{1});
  CHECK(stripped[0].unknown == Unknown::Stripped);
  CHECK(stripped[0].module == fixture_path("libfixture-stripped.so"));
  CHECK(stripped[0].offset == 1);
  // (Another symbolizer: the two fixtures share a build-id, so one module.)
  CHECK(Symbolizer().symbolize_file(fixture_path("libfixture.so"), std::array<uint64_t, 1>{1})[0].unknown ==
        Unknown::NoSymbol);
  CHECK(sym.symbolize_file((dir.path / "not-elf.so").string(), std::array<uint64_t, 1>{1})[0].unknown ==
        Unknown::BadElf);
  CHECK(sym.symbolize_file((dir.path / "absent.so").string(), std::array<uint64_t, 1>{1})[0].unknown ==
        Unknown::Unreadable);
  for (auto why : {Unknown::NoProcess, Unknown::JitNotPublished, Unknown::KernelNoSymbol})
    CHECK(std::string(describe(why)).size() > 10);
}

TEST_CASE("symbol frames: placeholders and lines as profiles show them") {
  using ember::profile_frames;
  using PFK = ember::flamegraph::FrameKind;
  Symbol file{{}, Unknown::NoSymbol, "/usr/lib/libc.so.6", 0x27249};
  CHECK(profile_frames(file) == std::vector<ember::flamegraph::Frame>{{"libc.so.6+0x27249", PFK::Unknown, "/usr/lib/libc.so.6"}});
  Symbol anon{{}, Unknown::Anonymous, "[anon]", 0};
  CHECK(profile_frames(anon).front() == ember::flamegraph::Frame{"[anon]", PFK::Unknown, "[anon]"});
  Symbol nowhere{{}, Unknown::Unmapped, {}, 0};
  CHECK(profile_frames(nowhere).front() == ember::flamegraph::Frame{"[unknown]", PFK::Unknown, {}});
  Symbol kernel{{}, Unknown::KernelNoSymbol, {}, 0};
  CHECK(profile_frames(kernel).front() == ember::flamegraph::Frame{"[unknown]", PFK::Kernel, "[kernel]"});
  Symbol inlined;
  inlined.frames = {Frame{"outer", FrameKind::Cpp, "/bin/x", "/src/a.c", 58}, Frame{"leaf", FrameKind::Inlined, "/bin/x"}};
  auto frames = profile_frames(inlined);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0] == ember::flamegraph::Frame{"outer (a.c:58)", PFK::Cpp, "/bin/x"});
  CHECK(frames[1] == ember::flamegraph::Frame{"leaf", PFK::Inlined, "/bin/x"});
}

namespace {

long open_fds() {
  return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
}

// A child that has exec'ed /bin/sleep and is asleep, or -1. Asleep, not
// just "libc in its maps": ld.so maps libc's first segment before its code,
// and a snapshot taken between the two lacked libc's code (on a busy
// machine, one run in a few).
pid_t start_sleep() {
  pid_t child = fork();
  if (child == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 2500; ++i, usleep(2000)) {
    std::ifstream in("/proc/" + std::to_string(child) + "/syscall");
    long nr = -1;
    in >> nr;  // the system call it is blocked in: "running" reads as none
    if (nr == SYS_clock_nanosleep || nr == SYS_nanosleep) return child;
  }
  return -1;
}

// The first address of `pid`'s first executable mapping of `name`, plus `offset`.
uint64_t code_address(pid_t pid, const std::string& name, uint64_t offset) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(in, line);)
    if (line.find(name) != std::string::npos && line.find(" r-xp ") != std::string::npos)
      return std::stoull(line.substr(0, line.find('-')), nullptr, 16) + offset;
  return 0;
}

std::vector<std::string> described(const std::vector<Symbol>& symbols) {
  std::vector<std::string> out;
  for (const Symbol& s : symbols) {
    std::string text = s.known() ? "" : describe(*s.unknown);
    for (const Frame& f : s.frames)
      text += ";" + f.name + "/" + std::to_string(int(f.kind)) + "/" + f.module + "/" + f.file + ":" + std::to_string(f.line);
    out.push_back(text);
  }
  return out;
}

const std::string kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

}  // namespace

TEST_CASE("symbolizer: forgetting processes closes the files only they mapped") {
  Symbolizer sym;
  REQUIRE(sym.snapshot_process(getpid()));
  size_t own_files = sym.open_files();
  long fds = open_fds();
  for (int i = 0; i < 20; ++i) {
    ChildGuard child{start_sleep()};
    REQUIRE(child.pid > 0);
    REQUIRE(sym.snapshot_process(child.pid));
    uint64_t addresses[] = {code_address(child.pid, "libc", 0x100), code_address(child.pid, "sleep", 0x100)};
    auto out = sym.symbolize_user(child.pid, addresses);
    CHECK(out[0].known());
    CHECK(sym.open_files() > own_files);  // sleep itself: libc and ld.so are this process's too
    sym.forget_process(child.pid);
    CHECK_FALSE(sym.has_process(child.pid));
    CHECK(sym.open_files() == own_files);
    CHECK(open_fds() == fds);
  }
  sym.forget_process(getpid());
  CHECK(sym.open_files() == 0);
  CHECK(open_fds() == fds - long(own_files));
  // Symbols stay, by build-id, until end_window() frees them.
  CHECK(sym.binaries().size() >= 2);
}

TEST_CASE("symbolizer: binaries idle for idle_windows windows are freed, and read again the same") {
  Options options;
  options.idle_windows = 2;
  options.lines = true;
  Symbolizer sym(options);
  std::vector<uint64_t> addresses;
  for (uint64_t a = 0x28000; a < 0x48000; a += 0x40) addresses.push_back(a);
  auto first = described(sym.symbolize_file(kLibc, addresses));
  REQUIRE(sym.binaries().size() == 1);
  uint64_t held = sym.memory_bytes();
  CHECK(held > 1'000'000);  // libc's symbols and its debug file's DWARF
  sym.end_window();  // used in this window
  sym.end_window();  // idle for one
  CHECK(sym.binaries().size() == 1);
  sym.end_window();  // idle for two
  CHECK(sym.binaries().empty());
  CHECK(sym.memory_bytes() == 0);
  CHECK(sym.open_files() == 0);
  auto again = described(sym.symbolize_file(kLibc, addresses));
  CHECK(again == first);
  CHECK(sym.memory_bytes() == held);
  size_t named = std::count_if(first.begin(), first.end(), [](const std::string& s) { return s.starts_with(";"); });
  CHECK(named > addresses.size() / 2);
}

TEST_CASE("symbolizer: over its memory cap, caches go first, then the binaries used least recently") {
  uint64_t libc_alone, fixture_alone;
  uint64_t one[] = {0x28100};
  {
    Symbolizer probe;
    probe.symbolize_file(kLibc, one);
    libc_alone = probe.memory_bytes();
    probe.symbolize_file(fixture_path("libfixture.so"), one);
    fixture_alone = probe.memory_bytes() - libc_alone;
  }
  Options options;
  options.memory_bytes = std::max(libc_alone, fixture_alone);  // one fits, not both
  Symbolizer sym(options);
  sym.symbolize_file(kLibc, one);
  sym.end_window();
  CHECK(sym.binaries().size() == 1);
  sym.symbolize_file(fixture_path("libfixture.so"), one);
  sym.end_window();
  auto held = sym.binaries();
  REQUIRE(held.size() == 1);
  CHECK(held[0].path == fixture_path("libfixture.so"));  // libc was used a window earlier

  // Within a window, the batch after the one that passed the cap frees the
  // binaries this window has not used.
  Symbolizer within(options);
  within.symbolize_file(kLibc, one);
  within.end_window();
  within.symbolize_file(fixture_path("libfixture.so"), one);
  CHECK(within.binaries().size() == 2);
  within.symbolize_file(fixture_path("libfixture.so"), one);
  held = within.binaries();
  REQUIRE(held.size() == 1);
  CHECK(held[0].path == fixture_path("libfixture.so"));

  // Answers cached past the cap are dropped; the binary stays. (Without
  // DWARF, whose unit tables grow with the addresses too, and stay.)
  options.inlines = false;
  {
    Symbolizer probe(options);
    probe.symbolize_file(kLibc, one);
    libc_alone = probe.memory_bytes();
  }
  options.memory_bytes = libc_alone + 1000;
  Symbolizer cached(options);
  cached.symbolize_file(kLibc, one);
  std::vector<uint64_t> many;
  for (uint64_t a = 0x28000; a < 0x28000 + 20000 * 4; a += 4) many.push_back(a);
  cached.symbolize_file(kLibc, many);
  CHECK(cached.memory_bytes() > libc_alone + 1'000'000);
  cached.end_window();
  CHECK(cached.binaries().size() == 1);
  CHECK(cached.memory_bytes() < libc_alone);
}
