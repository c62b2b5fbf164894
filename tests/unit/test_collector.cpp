#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <memory>

#include "user/collector.h"

using namespace ember;

namespace {

// A sample of this process with the given user stack (leaf first).
std::unique_ptr<ember_sample> sample_of(std::initializer_list<uint64_t> user) {
  auto s = std::make_unique<ember_sample>();
  std::memset(s.get(), 0, sizeof *s);
  s->pid = s->tid = static_cast<uint32_t>(getpid());
  std::strcpy(s->comm, "test");
  std::strcpy(s->process_comm, "test");
  for (uint64_t ip : user) s->ips[s->ustack_len++] = ip;
  return s;
}

}  // namespace

TEST_CASE("collector: a user stack that strays into the kernel half is cut there, not misread") {
  symbolizer::Symbolizer symbolizer;
  Collector collector({}, symbolizer);
  auto here = reinterpret_cast<uint64_t>(&getpid);
  // The walk went wrong after two frames: the rest must not be taken for
  // JIT tokens (the top bit) or frames.
  auto s = sample_of({here, here + 16, 0xffff888012345678ULL, 0xdeadbeefULL});
  collector.add(*s);
  auto profile = collector.build();
  REQUIRE(profile.stacks().size() == 1);
  CHECK(profile.stacks()[0].frames.size() == 3);  // process frame + two user frames
  CHECK(collector.stats().samples == 1);
}
