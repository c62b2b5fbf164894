// Test tool: reads a code-map stream with Java events (libember-agent.so
// with alloc, live or lock) and prints one profile as folded stacks through
// user/java/java_profiles.h, its info lines on stderr. For the integration tests
// that run Java with the agent loaded directly, without `ember record`.
// Usage: java_events_dump alloc|alloc-objects|lock [--live] [--threads]
//        [--name COMM] [--pid PID] STREAM
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "flamegraph/folded.h"
#include "user/java/java_events.h"
#include "user/java/java_profiles.h"

int main(int argc, char** argv) {
  using namespace ember;
  JavaProfileOptions options;
  JavaProcess process{0, "java"};
  const char* kind_name = nullptr;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--live") options.live_only = true;
    else if (a == "--threads") options.thread_frames = true;
    else if (a == "--name" && i + 1 < argc) process.name = argv[++i];
    else if (a == "--pid" && i + 1 < argc) process.pid = static_cast<uint32_t>(std::stoul(argv[++i])), options.pid_frames = true;
    else if (!kind_name) kind_name = argv[i];
    else if (!path) path = argv[i];
    else path = nullptr, kind_name = nullptr, i = argc;
  }
  JavaProfileKind kind{};
  if (!kind_name || !path || (std::strcmp(kind_name, "alloc") && std::strcmp(kind_name, "alloc-objects") &&
                              std::strcmp(kind_name, "lock"))) {
    std::fprintf(stderr,
                 "usage: java_events_dump alloc|alloc-objects|lock [--live] [--threads] [--name COMM] [--pid PID] "
                 "STREAM\n");
    return 2;
  }
  kind = !std::strcmp(kind_name, "alloc")   ? JavaProfileKind::AllocBytes
         : !std::strcmp(kind_name, "lock") ? JavaProfileKind::Lock
                                           : JavaProfileKind::AllocObjects;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "java_events_dump: cannot read %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  java::JavaEvents events;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) events.feed(std::string_view(buffer, in.gcount()));
  flamegraph::Profile profile = java_profile(events, kind, process, options);
  for (const auto& [key, value] : profile.info) std::fprintf(stderr, "%s: %s\n", key.c_str(), value.c_str());
  std::fprintf(stderr, "total: %llu %s\n", static_cast<unsigned long long>(profile.total()), profile.unit.c_str());
  flamegraph::write_folded(profile, std::cout);
  return 0;
}
