// tests/integration/unwind_churn.sh: the unwinder's state through a stream
// of short-lived processes, as a session that runs for weeks sees them.
// Each process is a real one (spawn of cat, which echoes a byte to
// say it runs), snapshot by the symbolizer as the collector does, given to
// the unwinder, then removed once it exited. A few live at once.
//
//   unwind_churn PROCESSES EVERY [--distinct] [--rows N]
//
// Every EVERY processes, one line: rows in use and waiting, free ranges,
// tables (idle), the kernel's process entries, ... --distinct: each
// process runs a copy of cat with a build-id of its own (a new binary
// every time, its file deleted as it exits; in $TMPDIR). --rows: the rows map's size
// (default: --unwind-memory's 16 MiB).
//
// The kernel maps are made as bpf/unwind.bpf.c declares them, without the
// programs: no exit program takes entries away, so any left are the
// unwinder's.
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "symbolizer/symbolizer.h"
#include "user/session/unwinder.h"

using namespace ember;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "unwind_churn: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// Copies of cat, each with a build-id of its own.
class Builds {
 public:
  explicit Builds(const char* path) {
    std::ifstream in(path, std::ios::binary);
    image_.assign(std::istreambuf_iterator<char>(in), {});
    elf_version(EV_CURRENT);
    Elf* elf = elf_memory(image_.data(), image_.size());
    const void* id = nullptr;
    if (!elf || dwelf_elf_gnu_build_id(elf, &id) < 4) die(std::string(path) + " has no build-id");
    id_at_ = static_cast<const char*>(id) - image_.data();
    elf_end(elf);
    std::string dir = (std::filesystem::temp_directory_path() / "ember-churn-XXXXXX").string();
    if (!mkdtemp(dir.data())) die("mkdtemp");
    dir_ = dir;
  }
  ~Builds() { rmdir(dir_.c_str()); }
  std::string write(uint32_t i) {
    std::string copy = image_;
    std::memcpy(copy.data() + id_at_, &i, sizeof i);
    std::string path = dir_ + "/cat-" + std::to_string(i);
    std::ofstream(path, std::ios::binary) << copy;
    if (chmod(path.c_str(), 0755) != 0) die("chmod " + path);
    return path;
  }

 private:
  std::string image_, dir_;
  size_t id_at_ = 0;
};

struct Child {
  pid_t pid;
  int in, out;  // its stdin, stdout
  std::string built;  // its binary, to delete (--distinct)
};

// Runs `path` (cat) and returns once it runs: it echoed a byte. Spawned,
// not forked: a fork copies this process's page tables, the rows map's too.
Child start(const std::string& path) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) die("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  char* args[] = {const_cast<char*>("cat"), nullptr};
  pid_t pid;
  errno = posix_spawn(&pid, path.c_str(), &actions, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (errno) die("cannot run " + path);
  close(in[0]);
  close(out[1]);
  char byte = 'x';
  if (write(in[1], &byte, 1) != 1 || read(out[0], &byte, 1) != 1) die("cat did not start: " + path);
  return {pid, in[1], out[0], ""};
}

void stop(Child& c) {
  close(c.in);  // cat sees the end of its input and exits
  int status;
  waitpid(c.pid, &status, 0);
  close(c.out);
  if (!c.built.empty()) unlink(c.built.c_str());
}

uint64_t map_entries(int fd) {
  uint32_t key, next;
  uint64_t n = 0;
  for (uint32_t* at = nullptr; bpf_map_get_next_key(fd, at, &next) == 0; at = &key) {
    key = next;
    ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: unwind_churn PROCESSES EVERY [--distinct] [--rows N]\n");
    return 2;
  }
  uint32_t processes = std::strtoul(argv[1], nullptr, 10), every = std::strtoul(argv[2], nullptr, 10);
  bool distinct = false;
  uint32_t capacity = (16u << 20) / sizeof(ember_unwind_row);
  for (int i = 3; i < argc; ++i)
    if (std::string(argv[i]) == "--distinct")
      distinct = true;
    else if (std::string(argv[i]) == "--rows" && i + 1 < argc)
      capacity = std::strtoul(argv[++i], nullptr, 10);
  constexpr uint32_t kLive = 8;  // processes alive at once
  constexpr uint32_t kProcessEntries = 16384;  // as user/session/sampler.cpp sizes the map

  int rows_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_rows", 4, sizeof(ember_unwind_row), capacity, nullptr);
  LIBBPF_OPTS(bpf_map_create_opts, no_prealloc, .map_flags = BPF_F_NO_PREALLOC);
  int processes_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "unwind_procs", 4, sizeof(ember_unwind_process),
                                    kProcessEntries, &no_prealloc);
  if (rows_fd < 0 || processes_fd < 0) die("cannot create the unwinder's maps (root?)");
  UnwindMaps maps;  // no runtimes' tables
  maps.rows_fd = rows_fd;
  maps.rows_capacity = capacity;
  maps.processes_fd = processes_fd;
  auto unwinder = Unwinder::open(maps, EMBER_UNWIND_AUTO);
  if (!unwinder) {
    std::fprintf(stderr, "unwind_churn: %s\n", unwinder.error().c_str());
    return 1;
  }
  symbolizer::Symbolizer symbolizer;
  Builds builds("/bin/cat");
  std::deque<Child> live;
  uint64_t unsnapshot = 0;
  auto leave = [&] {
    Child c = live.front();
    live.pop_front();
    stop(c);
    (*unwinder)->remove_process(static_cast<uint32_t>(c.pid));
  };
  std::printf("capacity %u rows\n", capacity);
  for (uint32_t i = 1; i <= processes; ++i) {
    std::string path = distinct ? builds.write(i) : "/bin/cat";
    Child c = start(path);
    if (distinct) c.built = path;
    uint32_t pid = static_cast<uint32_t>(c.pid);
    if (symbolizer.snapshot_process(pid))
      (*unwinder)->add_process(pid, symbolizer.mapped_files(pid));
    else
      ++unsnapshot;
    live.push_back(c);
    if (live.size() > kLive) leave();
    if (i % every == 0) {
      UnwinderStats s = (*unwinder)->stats();
      std::printf(
          "processes %u: rows %llu waiting %llu tables %llu idle %llu entries %llu held %llu evicted %llu "
          "waits %llu wait_ms %.0f over_cap %llu left_out %llu build_ms %.0f\n",
          i, (unsigned long long)s.rows, (unsigned long long)s.rows_waiting, (unsigned long long)s.tables,
          (unsigned long long)s.idle_tables, (unsigned long long)map_entries(processes_fd),
          (unsigned long long)s.processes_held, (unsigned long long)s.tables_evicted,
          (unsigned long long)s.reader_waits, s.reader_wait_ms, (unsigned long long)s.over_cap.count, (unsigned long long)s.processes_left_out,
          s.build_ms);
      std::fflush(stdout);
    }
  }
  while (!live.empty()) leave();
  UnwinderStats s = (*unwinder)->stats();
  std::printf("end: rows %llu waiting %llu tables %llu idle %llu entries %llu held %llu unsnapshot %llu\n",
              (unsigned long long)s.rows, (unsigned long long)s.rows_waiting, (unsigned long long)s.tables,
              (unsigned long long)s.idle_tables, (unsigned long long)map_entries(processes_fd),
              (unsigned long long)s.processes_held, (unsigned long long)unsnapshot);
  return 0;
}
