// The commands that work on profile files: convert, report, diff.
#pragma once

#include <cstddef>
#include <string>

namespace ember {

// Each reads folded stacks, pprof or ember's HTML; `event` chooses one of a
// pprof's sample types (empty: its default).

// With IN a directory, ember agent's spool: one service's periods merged.
struct SpoolRange {
  std::string service;
  std::string from, to;  // Unix seconds or UTC 2026-11-26T03:00[:00]; empty: unbounded
};

// IN -> OUT (format by extension).
int run_convert(const std::string& in, const std::string& out, const std::string& event, const SpoolRange& spool);
// Top functions of IN by self weight, as a table on stdout.
int run_report(const std::string& in, size_t rows, const std::string& event);
// A differential flamegraph of NEW against BASE, written to OUT (.html).
int run_diff(const std::string& base, const std::string& now, const std::string& out, const std::string& event);

}  // namespace ember
