// Functions by self and total weight: the table `ember report` prints and
// the one to hold other tools' top lists against (pprof -top).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

struct FunctionRow {
  std::string name;    // a Java method JIT-compiled in one place and inlined in another is one row
  uint64_t self = 0;   // weight of stacks where it is the leaf
  uint64_t total = 0;  // weight of stacks it is in, once per stack even when recursive
};

// Every function, heaviest self first (then total, then name). Process and
// thread pseudo-frames are not functions and are left out.
std::vector<FunctionRow> function_table(const Profile& profile);

// The top `rows` as a text table with the profile's totals.
void write_report(const Profile& profile, size_t rows, std::ostream& out);

}  // namespace ember::flamegraph
