// The commands that work on profile files: convert, report, diff.
#pragma once

#include <cstddef>
#include <string>

namespace ember {

// IN (folded or pprof) -> OUT (format by extension).
int run_convert(const std::string& in, const std::string& out);
// Top functions of IN by self weight, as a table on stdout.
int run_report(const std::string& in, size_t rows);
// A differential flamegraph of NEW against BASE, written to OUT (.html).
int run_diff(const std::string& base, const std::string& now, const std::string& out);

}  // namespace ember
