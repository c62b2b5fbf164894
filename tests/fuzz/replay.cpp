// Runs inputs through a fuzz harness once: the kept corpus as a regression
// test (g++ + sanitizers), and the main of the binaries AFL++ runs (`@@`).
//   afl-TARGET FILE...           one harness, LLVMFuzzerTestOneInput
//   replay TARGET FILE|DIR...    every harness in one binary (make test):
//                                the Makefile renames each one's entry to
//                                fuzz_TARGET and lists them in FUZZ_ALL
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

using Harness = int (*)(const uint8_t* data, size_t size);

#ifdef FUZZ_ALL
#define TARGET(name) extern "C" int fuzz_##name(const uint8_t*, size_t);
FUZZ_ALL
#undef TARGET
namespace {
struct Target {
  const char* name;
  Harness run;
};
#define TARGET(name) {#name, fuzz_##name},
const Target kTargets[] = {FUZZ_ALL};
#undef TARGET
}  // namespace
#else
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
#endif

int main(int argc, char** argv) {
  int first = 1;
#ifdef FUZZ_ALL
  Harness harness = nullptr;
  for (const Target& t : kTargets)
    if (argc > 1 && std::strcmp(argv[1], t.name) == 0) harness = t.run;
  if (!harness) {
    std::fprintf(stderr, "usage: replay TARGET FILE|DIR... (targets:");
    for (const Target& t : kTargets) std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, ")\n");
    return 2;
  }
  first = 2;
#else
  Harness harness = LLVMFuzzerTestOneInput;
#endif
  size_t files = 0;
  auto run = [&](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    harness(bytes.data(), bytes.size());
    ++files;
  };
  for (int i = first; i < argc; ++i) {
    if (!std::filesystem::is_directory(argv[i])) {
      run(argv[i]);
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argv[i]))
      if (entry.is_regular_file()) run(entry.path());
  }
  if (argc > first + 1 || std::filesystem::is_directory(argv[argc - 1])) std::printf("replayed %zu inputs\n", files);
  return files ? 0 : 1;
}
