// `ember record`: sample stacks, symbolize, write a flamegraph or folded file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "user/session/session.h"

namespace ember {

struct RecordOptions {
  SessionConfig session;         // events, targets (a command), stacks, Java
  bool all = false;              // -a: explicit, and exclusive with any narrower scope
  double duration = 0;           // seconds; 0 = until Ctrl-C, SIGTERM or the command exits
  double window = 0;             // seconds: a profile per window (out.0001.html, ...); 0: one
  std::string output = "ember.html";
  int progress_fd = -1;              // progress as JSON lines here (ember serve), see record_channel.h
};

// Returns the process exit code: the command's own with `-- CMD`.
int run_record(const RecordOptions& options);

}  // namespace ember
