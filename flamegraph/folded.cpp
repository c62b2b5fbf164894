#include "flamegraph/folded.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

namespace ember::flamegraph {
namespace {

struct Suffix {
  std::string_view text;
  FrameKind kind;
};
constexpr Suffix kSuffixes[] = {
    {"_[k]", FrameKind::Kernel},
    {"_[j]", FrameKind::Jit},
    {"_[i]", FrameKind::Inlined},
    {"_[0]", FrameKind::Interpreted},
};

// Longest line we accept: a 4096-frame stack of 256-byte names.
constexpr size_t kMaxLineBytes = 1 << 20;

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// The file of "function (file)" or "function (file:12)", as ember and
// py-spy write a script's frame; empty for other frames.
std::string_view script_file(std::string_view s) {
  size_t open = s.rfind(" (");
  if (!s.ends_with(")") || open == std::string_view::npos) return {};
  s = s.substr(open + 2, s.size() - open - 3);
  size_t colon = s.rfind(':');
  if (colon != std::string_view::npos && all_digits(s.substr(colon + 1))) s = s.substr(0, colon);
  return s;
}

bool is_python_frame(std::string_view s) { return script_file(s).ends_with(".py"); }

// Node's: a script (.js, .mjs, .cjs) or one of its own modules (node:fs,
// not C++'s node:: namespace).
bool is_javascript_frame(std::string_view s) {
  std::string_view file = script_file(s);
  return file.ends_with(".js") || file.ends_with(".mjs") || file.ends_with(".cjs") ||
         (file.starts_with("node:") && !file.starts_with("node::"));
}

// "[name tid=123]"
bool is_thread_frame(std::string_view s) {
  size_t at = s.rfind(" tid=");
  return s.size() > 7 && s.front() == '[' && s.back() == ']' && at != std::string_view::npos &&
         all_digits(s.substr(at + 5, s.size() - at - 6));
}

// A line's first frame, when more follow, names its process as ember and
// perf's stackcollapse write it: "name (123)", or a bare name a process
// can have (the kernel's comm: 15 bytes at most) that is not C++. Without
// this, a folded file's report counted the process as one more function
// than the same recording's HTML or pprof. A tool that starts its lines
// with a short function (async-profiler's start_thread) has it read as a
// process: it is then a root that weighs the same, coloured as one.
bool is_process_frame(std::string_view s) {
  size_t at = s.rfind(" (");
  if (at != std::string_view::npos && at > 0 && s.back() == ')' && all_digits(s.substr(at + 2, s.size() - at - 3)))
    return true;
  constexpr size_t kCommBytes = 15;  // TASK_COMM_LEN less its NUL
  return s.size() <= kCommBytes && s.find("::") == std::string_view::npos;
}

// Frame ids by their folded spelling, open addressing. A spelling is
// known by its length and two 64-bit hashes of different functions: two
// spellings would have to collide in both, about 2^-128 per pair. A big
// profile repeats its frames millions of times and its names do not fit in
// a cache: comparing the bytes with a stored copy missed the cache on
// every token (a third of `ember convert`'s time at a million stacks).
class Spellings {
 public:
  static constexpr FrameId kAbsent = ~FrameId{0};
  struct Key {
    uint64_t hash, check;
    uint32_t length;
  };
  static Key key(std::string_view spelling) {
    // The check: 8 bytes at a time, multiply and fold (splitmix64's constants).
    uint64_t check = 0x9e3779b97f4a7c15ULL ^ spelling.size();
    size_t i = 0;
    for (uint64_t word; i + 8 <= spelling.size(); i += 8) {
      std::memcpy(&word, spelling.data() + i, 8);
      check = (check ^ word) * 0xbf58476d1ce4e5b9ULL;
      check ^= check >> 31;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, spelling.data() + i, spelling.size() - i);
    check = (check ^ tail) * 0x94d049bb133111ebULL;
    check ^= check >> 29;
    return {std::hash<std::string_view>{}(spelling), check, static_cast<uint32_t>(spelling.size())};
  }
  // Asks the memory for a line's slots before the lookups: the misses of
  // a line's tokens overlap instead of queueing.
  void prefetch(const Key& k) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[k.hash & (slots_.size() - 1)]);
  }
  // The id the spelling of key `k` was given, or kAbsent; `slot` is where
  // to add it.
  FrameId find(const Key& k, size_t& slot) {
    if (used_ * 2 >= slots_.size()) grow();
    size_t mask = slots_.size() - 1;
    for (size_t i = k.hash & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.id == kAbsent) {
        slot = i;
        return kAbsent;
      }
      if (s.key.hash == k.hash && s.key.check == k.check && s.key.length == k.length) return s.id;
    }
  }
  // After find() said kAbsent for key `k`.
  void add(size_t slot, const Key& k, FrameId id) {
    slots_[slot] = {k, id};
    ++used_;
  }

 private:
  struct Slot {
    Key key{};
    FrameId id = kAbsent;
  };
  void grow() {
    std::vector<Slot> old(std::max<size_t>(slots_.size() * 2, 1024));
    old.swap(slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id == kAbsent) continue;
      size_t i = s.key.hash & mask;
      while (slots_[i].id != kAbsent) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace

std::string folded_name(const Frame& frame) {
  std::string name = frame.name;
  for (char& c : name)
    if (c == ';') c = ':';
    else if (c == '\n' || c == '\r') c = ' ';
  for (const Suffix& s : kSuffixes)
    if (s.kind == frame.kind) name += s.text;
  return name;
}

Frame parse_folded_frame(std::string_view text, bool is_root) {
  for (const Suffix& s : kSuffixes)
    if (text.size() > s.text.size() && text.ends_with(s.text))
      return Frame{std::string(text.substr(0, text.size() - s.text.size())), s.kind, {}};
  if (is_thread_frame(text)) return Frame{std::string(text), FrameKind::Thread, {}};
  if (is_python_frame(text)) return Frame{std::string(text), FrameKind::Python, {}};
  if (is_javascript_frame(text)) return Frame{std::string(text), FrameKind::JavaScript, {}};
  if (is_root && is_process_frame(text)) return Frame{std::string(text), FrameKind::Process, {}};
  FrameKind kind = text.find("::") != std::string_view::npos ? FrameKind::Cpp : FrameKind::Native;
  return Frame{std::string(text), kind, {}};
}

void write_folded(const Profile& profile, std::ostream& out) {
  std::vector<std::string> names;
  names.reserve(profile.frames().size());
  for (const Frame& f : profile.frames()) names.push_back(folded_name(f));
  std::string line;
  for (const Stack* s : profile.sorted_stacks()) {
    line.clear();
    for (size_t i = 0; i < s->frames.size(); ++i) {
      if (i) line += ';';
      line += names[s->frames[i]];
    }
    line += ' ';
    line += std::to_string(s->weight);  // locale-independent
    line += '\n';
    out << line;
  }
}

std::string folded_text(const Profile& profile) {
  std::ostringstream out;
  write_folded(profile, out);
  return std::move(out).str();
}

namespace {

// Reads lines of folded stacks into a profile. Warnings keep the line
// number within what this parser read, so that parts of one file read
// apart can number them in the whole.
class FoldedParser {
 public:
  void line(std::string& line) {
    ++lines_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') return;
    if (line.size() > kMaxLineBytes) return warn("line longer than " + std::to_string(kMaxLineBytes) + " bytes, skipped");
    size_t space = line.find_last_of(' ');
    if (space == std::string::npos) return warn("no count after the stack, skipped");
    std::string_view count_text(line.data() + space + 1, line.size() - space - 1);
    uint64_t weight = 0;
    auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), weight);
    if (ec != std::errc() || end != count_text.data() + count_text.size() || count_text.empty())
      return warn("count '" + std::string(count_text.substr(0, 32)) + "' is not a non-negative integer, skipped");
    std::string_view stack(line.data(), space);
    tokens_.clear();
    bool empty_frame = false;
    for (size_t pos = 0; pos <= stack.size();) {
      size_t semi = stack.find(';', pos);
      if (semi == std::string_view::npos) semi = stack.size();
      tokens_.push_back(stack.substr(pos, semi - pos));
      empty_frame |= tokens_.back().empty();
      pos = semi + 1;
    }
    if (empty_frame) return warn("empty frame name, skipped");
    keys_.resize(tokens_.size());
    for (size_t i = 1; i < tokens_.size(); ++i) spelled_.prefetch(keys_[i] = Spellings::key(tokens_[i]));
    ids_.clear();
    // The root: a process frame only there, with frames above it.
    ids_.push_back(profile_.intern(parse_folded_frame(tokens_[0], tokens_.size() > 1)));
    for (size_t i = 1; i < tokens_.size(); ++i) {
      size_t slot = 0;
      FrameId id = spelled_.find(keys_[i], slot);
      if (id == Spellings::kAbsent) {
        id = profile_.intern(parse_folded_frame(tokens_[i], false));
        spelled_.add(slot, keys_[i], id);
      }
      ids_.push_back(id);
    }
    profile_.add(ids_, weight);
  }
  size_t lines() const { return lines_; }
  Profile& profile() { return profile_; }
  // The warnings, numbered from `first_line` on.
  std::vector<std::string> warnings(size_t first_line) const {
    std::vector<std::string> out;
    for (const auto& [at, why] : warnings_) out.push_back("line " + std::to_string(first_line + at - 1) + ": " + why);
    return out;
  }

 private:
  void warn(std::string why) { warnings_.emplace_back(lines_, std::move(why)); }
  Profile profile_;
  // The frame each spelling below the root names: a hit makes no Frame.
  Spellings spelled_;
  std::vector<std::string_view> tokens_;
  std::vector<Spellings::Key> keys_;
  std::vector<FrameId> ids_;
  std::vector<std::pair<size_t, std::string>> warnings_;
  size_t lines_ = 0;
};

}  // namespace

std::expected<FoldedReadResult, std::string> read_folded(std::istream& in) {
  FoldedParser parser;
  std::string line;
  while (std::getline(in, line)) parser.line(line);
  if (in.bad()) return std::unexpected("read error after line " + std::to_string(parser.lines()));
  return FoldedReadResult{std::move(parser.profile()), parser.warnings(1)};
}

std::expected<FoldedReadResult, std::string> read_folded_file(const std::string& path, size_t size,
                                                              size_t part_bytes) {
  const size_t parts =
      std::clamp<size_t>(size / std::max<size_t>(part_bytes, 1), 1, std::max(1u, std::thread::hardware_concurrency()));
  // Where each part begins: just after a newline.
  std::vector<size_t> begin{0};
  for (size_t k = 1; k < parts; ++k) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(k * size / parts));
    std::string rest;
    if (!std::getline(in, rest)) break;
    begin.push_back(std::clamp(k * size / parts + rest.size() + 1, begin.back(), size));
  }
  begin.push_back(size);
  std::vector<FoldedParser> parsers(begin.size() - 1);
  std::vector<std::string> errors(parsers.size());
  auto read_part = [&](size_t k) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(begin[k]));
    std::string line;
    for (size_t at = begin[k]; at < begin[k + 1] && std::getline(in, line);) {
      at += line.size() + 1;  // before line() drops a '\r'
      parsers[k].line(line);
    }
    if (!in && !in.eof()) errors[k] = "read error after line " + std::to_string(parsers[k].lines()) + " of its part";
  };
  std::vector<std::thread> threads;
  for (size_t k = 1; k < parsers.size(); ++k) threads.emplace_back(read_part, k);
  read_part(0);
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) return std::unexpected(e);
  // In file order: the first part's frames and stacks, then what each next
  // part adds, as one reader would have met them.
  FoldedReadResult result{std::move(parsers[0].profile()), parsers[0].warnings(1)};
  size_t first_line = 1 + parsers[0].lines();
  std::vector<FrameId> ids, frames;
  for (size_t k = 1; k < parsers.size(); ++k) {
    const Profile& part = parsers[k].profile();
    ids.clear();
    for (const Frame& f : part.frames()) ids.push_back(result.profile.intern(f));
    for (const Stack& s : part.stacks()) {
      frames.clear();
      for (FrameId f : s.frames) frames.push_back(ids[f]);
      result.profile.add(frames, s.weight);
    }
    for (std::string& w : parsers[k].warnings(first_line)) result.warnings.push_back(std::move(w));
    first_line += parsers[k].lines();
    parsers[k] = {};  // its memory, before the next part is merged
  }
  return result;
}

}  // namespace ember::flamegraph
