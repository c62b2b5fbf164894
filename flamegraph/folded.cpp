#include "flamegraph/folded.h"

#include <charconv>
#include <istream>
#include <ostream>
#include <sstream>
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

// "[name tid=123]"
bool is_thread_frame(std::string_view s) {
  size_t at = s.rfind(" tid=");
  return s.size() > 7 && s.front() == '[' && s.back() == ']' && at != std::string_view::npos &&
         all_digits(s.substr(at + 5, s.size() - at - 6));
}

// "name (123)"
bool is_process_frame(std::string_view s) {
  size_t at = s.rfind(" (");
  return at != std::string_view::npos && at > 0 && s.back() == ')' && all_digits(s.substr(at + 2, s.size() - at - 3));
}

// Frame ids by their folded spelling: open addressing over one arena of
// the spellings' bytes. A big profile repeats its frames millions of times
// and its names do not fit in a cache: a lookup here touches its slot and,
// on a hash match, the arena, where a node-based map touched three places.
class Spellings {
 public:
  static constexpr FrameId kAbsent = ~FrameId{0};
  static uint64_t hash(std::string_view spelling) { return std::hash<std::string_view>{}(spelling); }
  // Asks the memory for a line's slots, then for their spellings, before
  // the lookups: the misses of a line's tokens overlap instead of queueing
  // (bench/fleet_profile.mjs's million stacks: `ember convert` 22 s -> 16.5-19.7 s).
  void prefetch_slot(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  }
  void prefetch_spelling(uint64_t hash) const {
    if (slots_.empty()) return;
    const Slot& s = slots_[hash & (slots_.size() - 1)];
    if (s.hash == hash && s.id != kAbsent) __builtin_prefetch(arena_.data() + s.offset);
  }
  // The id `spelling` (of hash `hash`) was given, or kAbsent; `slot` is
  // where to add it.
  FrameId find(std::string_view spelling, uint64_t hash, size_t& slot) {
    if (used_ * 2 >= slots_.size()) grow();
    size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.id == kAbsent) {
        slot = i;
        hash_ = hash;
        return kAbsent;
      }
      if (s.hash == hash && s.length == spelling.size() &&
          std::string_view(arena_.data() + s.offset, s.length) == spelling)
        return s.id;
    }
  }
  // After find() said kAbsent for `spelling`.
  void add(size_t slot, std::string_view spelling, FrameId id) {
    slots_[slot] = {hash_, arena_.size(), static_cast<uint32_t>(spelling.size()), id};
    arena_ += spelling;
    ++used_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    size_t offset = 0;
    uint32_t length = 0;
    FrameId id = kAbsent;
  };
  void grow() {
    std::vector<Slot> old(std::max<size_t>(slots_.size() * 2, 1024));
    old.swap(slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id == kAbsent) continue;
      size_t i = s.hash & mask;
      while (slots_[i].id != kAbsent) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t used_ = 0;
  uint64_t hash_ = 0;  // of the spelling find() last missed
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

std::expected<FoldedReadResult, std::string> read_folded(std::istream& in) {
  FoldedReadResult result;
  std::string line;
  std::vector<FrameId> ids;
  // The frame each spelling below the root names: a hit makes no Frame.
  Spellings spelled;
  std::vector<std::string_view> tokens;
  std::vector<uint64_t> hashes;
  size_t lineno = 0;
  auto warn = [&](const std::string& why) {
    result.warnings.push_back("line " + std::to_string(lineno) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.size() > kMaxLineBytes) {
      warn("line longer than " + std::to_string(kMaxLineBytes) + " bytes, skipped");
      continue;
    }
    size_t space = line.find_last_of(' ');
    if (space == std::string::npos) {
      warn("no count after the stack, skipped");
      continue;
    }
    std::string_view count_text(line.data() + space + 1, line.size() - space - 1);
    uint64_t weight = 0;
    auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), weight);
    if (ec != std::errc() || end != count_text.data() + count_text.size() || count_text.empty()) {
      warn("count '" + std::string(count_text.substr(0, 32)) + "' is not a non-negative integer, skipped");
      continue;
    }
    std::string_view stack(line.data(), space);
    tokens.clear();
    bool empty_frame = false;
    for (size_t pos = 0; pos <= stack.size();) {
      size_t semi = stack.find(';', pos);
      if (semi == std::string_view::npos) semi = stack.size();
      tokens.push_back(stack.substr(pos, semi - pos));
      empty_frame |= tokens.back().empty();
      pos = semi + 1;
    }
    if (empty_frame) {
      warn("empty frame name, skipped");
      continue;
    }
    hashes.resize(tokens.size());
    for (size_t i = 1; i < tokens.size(); ++i) spelled.prefetch_slot(hashes[i] = Spellings::hash(tokens[i]));
    for (size_t i = 1; i < tokens.size(); ++i) spelled.prefetch_spelling(hashes[i]);
    ids.clear();
    // The root: a process frame only there.
    ids.push_back(result.profile.intern(parse_folded_frame(tokens[0], true)));
    for (size_t i = 1; i < tokens.size(); ++i) {
      size_t slot = 0;
      FrameId id = spelled.find(tokens[i], hashes[i], slot);
      if (id == Spellings::kAbsent) {
        id = result.profile.intern(parse_folded_frame(tokens[i], false));
        spelled.add(slot, tokens[i], id);
      }
      ids.push_back(id);
    }
    result.profile.add(ids, weight);
  }
  if (in.bad()) return std::unexpected("read error after line " + std::to_string(lineno));
  return result;
}

}  // namespace ember::flamegraph
