// Folded stacks ("a;b;c 42" per line), the format of FlameGraph's
// stackcollapse scripts, inferno and speedscope. Frame kinds travel as the
// conventional name suffixes: _[k] kernel, _[j] JIT, _[i] inlined,
// _[0] interpreted; thread frames are "[name tid=N]".
#pragma once

#include <expected>
#include <iosfwd>
#include <string>
#include <vector>

#include "flamegraph/profile.h"

namespace ember::flamegraph {

void write_folded(const Profile& profile, std::ostream& out);
std::string folded_text(const Profile& profile);  // the same, as a string

struct FoldedReadResult {
  Profile profile;
  std::vector<std::string> warnings;  // "line N: why", one per skipped line
};

// Reads folded stacks; malformed lines are skipped with a warning. Fails
// only when the stream cannot be read.
std::expected<FoldedReadResult, std::string> read_folded(std::istream& in);
// The same of a file of `size` bytes, read in parts of at least
// `part_bytes` on every core (a fleet's merged profile is gigabytes): the
// same profile, frames and stacks in the same order, the same warnings.
std::expected<FoldedReadResult, std::string> read_folded_file(const std::string& path, size_t size,
                                                              size_t part_bytes = 64 << 20);

// The folded spelling of a frame (name plus kind suffix, ';' and newlines
// replaced) and its inverse; `is_root`: the first of a line's frames, with
// more after it, where a process frame stands.
std::string folded_name(const Frame& frame);
Frame parse_folded_frame(std::string_view text, bool is_root);

}  // namespace ember::flamegraph
