// Fuzz target: what ember reads back from a JVM's attach listener (a JVM
// of any user, or a process posing as one on its socket): the reply's code
// line and output, then what a "load" reply says of the agent. Messages
// quote the reply: they must stay printable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "user/java/java_attach.h"

namespace {

void check_printable(const std::string& message) {
  for (unsigned char c : message)
    if (c < 0x20 || c == 0x7f) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view reply(reinterpret_cast<const char*>(data), size);
  auto parsed = ember::java::parse_attach_reply(reply, "JVM 1");
  if (!parsed) {
    check_printable(parsed.error());
    return 0;
  }
  auto loaded = ember::java::check_load_reply(*parsed, "/usr/lib/ember/libember-agent.so", "JVM 1");
  if (!loaded) check_printable(loaded.error());
  return 0;
}
