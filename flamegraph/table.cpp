#include "flamegraph/table.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <unordered_map>
#include <unordered_set>


namespace ember::flamegraph {

std::vector<FunctionRow> function_table(const Profile& profile) {
  // Rows by function name, whatever the frame's kind or module: what pprof
  // and a reader of a "top" table mean by a function.
  std::unordered_map<std::string_view, FunctionRow> rows;
  std::unordered_set<std::string_view> seen;
  for (const Stack& s : profile.stacks()) {
    seen.clear();
    const Frame* leaf = nullptr;
    std::string_view leaf_name;
    for (FrameId id : s.frames) {
      const Frame& f = profile.frames()[id];
      if (f.kind == FrameKind::Process || f.kind == FrameKind::Thread) continue;
      leaf = &f;
      leaf_name = f.name;
      if (seen.insert(f.name).second) rows[f.name].total += s.weight;
    }
    if (leaf) rows[leaf_name].self += s.weight;
  }
  std::vector<FunctionRow> out;
  out.reserve(rows.size());
  for (auto& [name, row] : rows) {
    row.name = std::string(name);
    out.push_back(std::move(row));
  }
  std::sort(out.begin(), out.end(), [](const FunctionRow& a, const FunctionRow& b) {
    if (a.self != b.self) return a.self > b.self;
    if (a.total != b.total) return a.total > b.total;
    return a.name < b.name;
  });
  return out;
}

void write_report(const Profile& profile, size_t rows, std::ostream& out) {
  std::vector<FunctionRow> table = function_table(profile);
  double total = profile.total() ? static_cast<double>(profile.total()) : 1.0;
  char line[256];
  std::snprintf(line, sizeof line, "%s: %llu %s in %zu stacks, %zu functions\n", profile.event.c_str(),
                static_cast<unsigned long long>(profile.total()), profile.unit.c_str(), profile.stacks().size(),
                table.size());
  out << line;
  std::snprintf(line, sizeof line, "%14s %7s %14s %7s  %s\n", "self", "self%", "total", "total%", "function");
  out << line;
  for (size_t i = 0; i < table.size() && i < rows; ++i) {
    const FunctionRow& r = table[i];
    std::snprintf(line, sizeof line, "%14llu %6.2f%% %14llu %6.2f%%  ", static_cast<unsigned long long>(r.self),
                  100.0 * r.self / total, static_cast<unsigned long long>(r.total), 100.0 * r.total / total);
    out << line << r.name << '\n';
  }
}

}  // namespace ember::flamegraph
