// Source of the ELF seeds in tests/fuzz/corpus/elf (make_elf_seeds.sh builds
// them once; they are committed): a few functions, one inlined into another,
// a C++ mangled name, a static (local) one, a weak one.
#include <cstdlib>

namespace seed {

static inline __attribute__((always_inline)) unsigned mix(unsigned x) {
  x ^= x >> 7;
  return x * 2654435761u;
}

__attribute__((noinline)) unsigned hash(const char* s) {
  unsigned h = 0;
  while (*s) h = mix(h + static_cast<unsigned char>(*s++));
  return h;
}

}  // namespace seed

__attribute__((noinline)) static int local_helper(int n) { return n > 1 ? n * local_helper(n - 1) : 1; }

extern "C" __attribute__((weak, noinline)) int weak_entry(int n) { return local_helper(n) + 1; }

int main(int argc, char** argv) {
  unsigned h = seed::hash(argc > 1 ? argv[1] : "ember");
  return static_cast<int>(h % 7) + weak_entry(argc) - (std::getenv("X") ? 1 : 0);
}
