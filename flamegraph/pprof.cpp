#include "flamegraph/pprof.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "flamegraph/folded.h"
#include "flamegraph/gzip.h"
#include "flamegraph/protobuf.h"

namespace ember::flamegraph {
namespace {

using protobuf::kLen;
using protobuf::kVarint;
using protobuf::Reader;
using protobuf::Writer;

// A file that is a shared library ("libc.so.6", "x.cpython-311.so") or a
// pseudo-module ("[kernel]", "[vdso]", "[anon]"), not a program.
bool library_or_pseudo(std::string_view module) {
  if (module.empty() || module.front() == '[') return true;
  std::string_view base = module.substr(module.rfind('/') + 1);
  size_t so = base.find(".so");
  return so != std::string_view::npos && (so + 3 == base.size() || base[so + 3] == '.' || base[so + 3] == '_');
}

// The module pprof should call the profile's main binary: by its
// convention the first mapping, printed as "File:" by `pprof -top`.
// A profile does not record which file was each process's executable, so
// the candidates are the modules that are neither shared libraries nor
// pseudo-modules (pprof guesses the same way for its legacy formats).
// A whole-host profile has one executable per process: the main binary
// is the one whose stacks weigh most (each stack counted once per module),
// so for `record -- CMD` it is CMD's binary, and for a host it is the
// program that took most of the profile. The default sample type's
// profile decides; the next ones only if it names no program. Empty if
// no profile names one: the mappings then keep their plain order.
std::string main_binary(std::span<const Profile* const> profiles) {
  for (const Profile* p : profiles) {
    std::map<std::string_view, uint64_t> weight;
    std::vector<std::string_view> in_stack;
    for (const Stack& s : p->stacks()) {
      in_stack.clear();
      for (FrameId id : s.frames) {
        std::string_view module = p->frames()[id].module;
        if (!library_or_pseudo(module) && std::find(in_stack.begin(), in_stack.end(), module) == in_stack.end())
          in_stack.push_back(module);
      }
      for (std::string_view m : in_stack) weight[m] += s.weight;
    }
    auto heaviest = std::max_element(weight.begin(), weight.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
    if (heaviest != weight.end()) return std::string(heaviest->first);
  }
  return {};
}

bool cpu_time(const Profile& p) { return p.unit == "samples" && p.period_ns > 0; }

// One pprof of several profiles: each profile's sample types side by side
// (a sample carries values in its own profile's columns and zeros
// elsewhere), their frames in one table.
class PprofWriter {
 public:
  explicit PprofWriter(std::span<const Profile* const> profiles) : profiles_(profiles) {}

  std::string write(size_t* raw_bytes) {
    write_sample_types();
    write_frames();
    for (size_t p = 0; p < profiles_.size(); ++p) write_samples(p);
    write_facts();
    // The string table goes last: every string is known by now.
    for (const std::string& s : strings_) out_.bytes(6, s);
    if (raw_bytes) *raw_bytes = out_.str().size();
    return gzip(out_.str());
  }

 private:
  uint64_t str(const std::string& s) {
    auto [it, inserted] = string_ids_.try_emplace(s, strings_.size());
    if (inserted) strings_.push_back(s);
    return it->second;
  }

  void value_type(int field, const std::string& type, const std::string& unit) {
    Writer w;
    w.uint(1, str(type));
    w.uint(2, str(unit));
    out_.message(field, w);
  }

  void write_sample_types() {
    for (const Profile* p : profiles_) {
      first_column_.push_back(columns_);
      if (p->unit == "samples") {
        value_type(1, profiles_.size() == 1 ? "samples" : p->event, "count");
        if (cpu_time(*p)) value_type(1, "cpu", "nanoseconds");
        columns_ += cpu_time(*p) ? 2 : 1;
      } else {
        value_type(1, p->event, p->unit == "ns" ? "nanoseconds" : p->unit);
        columns_ += 1;
      }
    }
  }

  // A sample's values: `weight` in profile p's columns.
  std::vector<uint64_t> values_of(size_t p, uint64_t weight) const {
    std::vector<uint64_t> values(columns_, 0);
    values[first_column_[p]] = weight;
    if (cpu_time(*profiles_[p])) values[first_column_[p] + 1] = weight * profiles_[p]->period_ns;
    return values;
  }

  // Frames of all profiles in one table: locations and functions by frame,
  // mappings by module.
  void write_frames() {
    std::unordered_map<Frame, uint64_t, Profile::FrameHash> frame_ids;
    location_of_.resize(profiles_.size());
    std::vector<const Frame*> frames;
    std::set<std::string_view> modules;
    for (size_t i = 0; i < profiles_.size(); ++i)
      for (const Frame& f : profiles_[i]->frames()) {
        auto [it, inserted] = frame_ids.try_emplace(f, frames.size() + 1);
        if (inserted) {
          frames.push_back(&f);
          if (!f.module.empty()) modules.insert(f.module);
        }
        location_of_[i].push_back(it->second);
      }
    // Mappings by name, the main binary first; ids in that order.
    std::vector<std::string_view> mapping_order;
    std::string main_module = main_binary(profiles_);
    if (!main_module.empty()) mapping_order.push_back(main_module);
    for (std::string_view m : modules)
      if (m != main_module) mapping_order.push_back(m);
    std::unordered_map<std::string_view, uint64_t> mappings;
    for (std::string_view m : mapping_order) mappings.emplace(m, mappings.size() + 1);
    for (std::string_view module : mapping_order) {
      Writer m;
      m.uint(1, mappings[module]);
      m.uint(5, str(std::string(module)));
      m.uint(7, 1);  // has_functions
      out_.message(3, m);
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      const Frame& f = *frames[i];
      if (f.kind == FrameKind::Process || f.kind == FrameKind::Thread) continue;  // labels instead
      Writer fn;
      fn.uint(1, i + 1);
      fn.uint(2, str(f.name));
      fn.uint(3, str(folded_name(f)));
      out_.message(5, fn);
      Writer line;
      line.uint(1, i + 1);
      Writer loc;
      loc.uint(1, i + 1);
      if (!f.module.empty()) loc.uint(2, mappings[f.module]);
      loc.message(4, line);
      out_.message(4, loc);
    }
  }

  // Profile p's samples: one per stack; with a timeline, one per time, each
  // with a label "time": nanoseconds since the file's time_nanos (so that
  // `pprof -tagfocus=time=2s:4s` picks a range).
  void write_samples(size_t p) {
    const Profile& profile = *profiles_[p];
    std::vector<std::string> bodies(profile.timeline.empty() ? 0 : profile.stacks().size());
    for (const Stack* s : profile.sorted_stacks()) {
      Writer sample;
      std::vector<uint64_t> locations;
      for (auto it = s->frames.rbegin(); it != s->frames.rend(); ++it) {  // leaf first
        const Frame& f = profile.frames()[*it];
        if (f.kind == FrameKind::Process || f.kind == FrameKind::Thread) continue;
        locations.push_back(location_of_[p][*it]);
      }
      sample.packed(1, locations);
      auto label = [&](const std::string& key, const std::string* text, uint64_t num) {
        Writer l;
        l.uint(1, str(key));
        if (text) l.uint(2, str(*text));
        l.uint(3, num);
        sample.message(3, l);
      };
      for (FrameId id : s->frames) {
        const Frame& f = profile.frames()[id];
        if (f.kind == FrameKind::Process) {
          auto [comm, pid] = split_process_frame(f.name);
          label("comm", &comm, 0);
          if (pid) label("pid", nullptr, pid);
        } else if (f.kind == FrameKind::Thread) {
          auto [thread, tid] = split_thread_frame(f.name);
          label("thread", &thread, 0);
          if (tid) label("tid", nullptr, tid);
        }
      }
      if (!bodies.empty()) {
        bodies[s - profile.stacks().data()] = sample.str();
        continue;
      }
      sample.packed(2, values_of(p, s->weight));
      out_.message(2, sample);
    }
    const Profile& first = *profiles_.front();
    const uint64_t shift = profile.start_unix_ns > first.start_unix_ns ? profile.start_unix_ns - first.start_unix_ns : 0;
    for (const Timed& t : profile.timeline) {
      Writer sample;
      sample.raw(bodies[t.stack]);
      sample.packed(2, values_of(p, t.weight));
      Writer l;
      l.uint(1, str("time"));
      l.uint(3, t.time_ns + shift);
      l.uint(4, str("nanoseconds"));
      sample.message(3, l);
      out_.message(2, sample);
    }
  }

  // The first profile's time, period and facts; the default type.
  void write_facts() {
    const Profile& first = *profiles_.front();
    out_.uint(9, first.start_unix_ns);
    out_.uint(10, first.duration_ns);
    if (cpu_time(first)) {
      Writer period_type;
      period_type.uint(1, str("cpu"));
      period_type.uint(2, str("nanoseconds"));
      out_.message(11, period_type);
      out_.uint(12, first.period_ns);
    }
    // The recording's facts (samples, lost, host...) as "key: value"
    // comments: `pprof -comments` shows them and decode_pprof reads them back.
    for (const auto& [key, value] : first.info) out_.uint(13, str(key + ": " + value));
    // The default type: the first profile's first column.
    out_.uint(14, str(profiles_.size() == 1 && first.unit == "samples" ? "samples" : first.event));
  }

  std::span<const Profile* const> profiles_;
  Writer out_;
  std::vector<std::string> strings_{""};
  std::unordered_map<std::string, uint64_t> string_ids_{{"", 0}};
  std::vector<size_t> first_column_;  // per profile: its first column of values
  size_t columns_ = 0;
  std::vector<std::vector<uint64_t>> location_of_;  // per profile: frame id -> location id
};

}  // namespace

std::string encode_pprof(const Profile& profile, size_t* raw_bytes) {
  const Profile* one[] = {&profile};
  return encode_pprof(one, raw_bytes);
}

std::string encode_pprof(std::span<const Profile* const> profiles, size_t* raw_bytes) {
  return PprofWriter(profiles).write(raw_bytes);
}

namespace {

// A pprof's tables as read, views into its bytes: its samples are read
// once the tables they name are known.
struct PprofTables {
  struct Location {
    uint64_t mapping = 0;
    std::vector<uint64_t> functions;  // innermost first (pprof's line order)
  };
  std::vector<std::string_view> strings;
  std::vector<std::pair<uint64_t, uint64_t>> types;  // sample types: type, unit
  std::vector<std::string_view> samples;
  std::unordered_map<uint64_t, Location> locations;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> functions;  // name, system_name
  std::unordered_map<uint64_t, uint64_t> mappings;                        // id -> filename
  uint64_t default_type = 0, period = 0, time_nanos = 0, duration = 0;
  std::vector<uint64_t> comments;

  std::string_view text(uint64_t i) const { return i < strings.size() ? strings[i] : std::string_view(); }
};

// Fields `a` and `b` of message `m`, both varints.
std::pair<uint64_t, uint64_t> varint_pair(std::string_view m, int a, int b) {
  Reader s(m);
  std::pair<uint64_t, uint64_t> out{};
  int f, w;
  while (s.next(f, w)) {
    if (f == a && w == kVarint) out.first = s.varint();
    else if (f == b && w == kVarint) out.second = s.varint();
    else s.skip(w);
  }
  return out;
}

std::expected<PprofTables, std::string> read_tables(std::string_view bytes) {
  PprofTables t;
  Reader r(bytes);
  int field, wire;
  while (r.next(field, wire)) {
    if (wire != kLen) {
      uint64_t v = wire == kVarint ? r.varint() : (r.skip(wire), 0);
      if (field == 9) t.time_nanos = v;
      if (field == 10) t.duration = v;
      if (field == 12) t.period = v;
      if (field == 14) t.default_type = v;
      if (field == 13 && wire == kVarint) t.comments.push_back(v);
      continue;
    }
    std::string_view m = r.bytes();
    Reader s(m);
    int f, w;
    switch (field) {
      case 1: t.types.push_back(varint_pair(m, 1, 2)); break;
      case 2: t.samples.push_back(m); break;
      case 3: {
        auto [id, filename] = varint_pair(m, 1, 5);
        t.mappings[id] = filename;
        break;
      }
      case 4: {
        uint64_t id = 0;
        PprofTables::Location loc;
        while (s.next(f, w)) {
          if (f == 1 && w == kVarint) id = s.varint();
          else if (f == 2 && w == kVarint) loc.mapping = s.varint();
          else if (f == 4 && w == kLen) loc.functions.push_back(varint_pair(s.bytes(), 1, 2).first);
          else s.skip(w);
        }
        if (!s.ok()) return std::unexpected("pprof: corrupt location");
        t.locations[id] = std::move(loc);
        break;
      }
      case 5: {
        uint64_t id = 0, name = 0, system_name = 0;
        while (s.next(f, w)) {
          if (f == 1 && w == kVarint) id = s.varint();
          else if (f == 2 && w == kVarint) name = s.varint();
          else if (f == 3 && w == kVarint) system_name = s.varint();
          else s.skip(w);
        }
        if (!s.ok()) return std::unexpected("pprof: corrupt function");
        t.functions[id] = {name, system_name};
        break;
      }
      case 6: t.strings.push_back(m); break;
      case 13: s.repeated(kLen, t.comments); break;  // packed
      case 11: break;  // period_type: the period's unit, implied by the sample types
      default: break;
    }
  }
  if (!r.ok()) return std::unexpected("pprof: corrupt or truncated protobuf");
  if (t.types.empty()) return std::unexpected("pprof: no sample types: not a profile");
  return t;
}

// The samples' value `value_index` added to `profile`, under their process
// and thread frames; their times a timeline if every one has one.
std::expected<void, std::string> add_samples(const PprofTables& t, size_t value_index, Profile& profile) {
  // Frames are made once per location and per process or thread label,
  // not per sample: a day-long recording has millions of samples.
  std::unordered_map<uint64_t, std::vector<FrameId>> location_frames;  // root first
  auto frames_of = [&](uint64_t id) -> std::expected<const std::vector<FrameId>*, std::string> {
    auto [cached, added] = location_frames.try_emplace(id);
    if (!added) return &cached->second;
    auto loc = t.locations.find(id);
    if (loc == t.locations.end()) return std::unexpected("pprof: a sample names a missing location");
    auto mapping = t.mappings.find(loc->second.mapping);
    std::string module(mapping == t.mappings.end() ? std::string_view() : t.text(mapping->second));
    const auto& fns = loc->second.functions;
    for (size_t i = fns.size(); i-- > 0;) {  // outermost line last in pprof
      auto fn = t.functions.find(fns[i]);
      if (fn == t.functions.end()) return std::unexpected("pprof: a location names a missing function");
      std::string name(t.text(fn->second.first));
      Frame frame = parse_folded_frame(t.text(fn->second.second), false);
      if (frame.name != name) frame = parse_folded_frame(name, false);  // not written by ember
      frame.name = name;
      if (i + 1 < fns.size() && frame.kind == FrameKind::Jit) frame.kind = FrameKind::Inlined;  // inlined into the next line
      frame.module = module;
      cached->second.push_back(profile.intern(frame));
    }
    return &cached->second;
  };
  std::map<std::pair<uint64_t, uint64_t>, FrameId> process_frames, thread_frames;  // (name, pid or tid)

  std::vector<FrameId> frames;
  std::vector<uint64_t> location_ids, values;
  bool timed = true;  // every sample so far had a time
  for (std::string_view raw : t.samples) {
    location_ids.clear();
    values.clear();
    uint64_t comm = 0, pid = 0, thread = 0, tid = 0;
    std::optional<uint64_t> time;
    Reader s(raw);
    int f, w;
    while (s.next(f, w)) {
      if (f == 1) s.repeated(w, location_ids);
      else if (f == 2) s.repeated(w, values);
      else if (f == 3 && w == kLen) {
        Reader lr(s.bytes());
        uint64_t key = 0, str = 0, num = 0;
        while (lr.next(f, w)) {
          if (f == 1 && w == kVarint) key = lr.varint();
          else if (f == 2 && w == kVarint) str = lr.varint();
          else if (f == 3 && w == kVarint) num = lr.varint();
          else lr.skip(w);
        }
        std::string_view k = t.text(key);
        if (k == "comm") comm = str;
        else if (k == "pid") pid = num;
        else if (k == "thread") thread = str;
        else if (k == "tid") tid = num;
        else if (k == "time") time = num;
      } else s.skip(w);
    }
    if (!s.ok()) return std::unexpected("pprof: corrupt sample");
    if (value_index >= values.size()) continue;
    uint64_t v = values[value_index];
    if (static_cast<int64_t>(v) <= 0) continue;
    frames.clear();
    if (!t.text(comm).empty()) {
      auto [it, added] = process_frames.try_emplace({comm, pid});
      if (added) it->second = profile.intern(Frame{process_frame_name(t.text(comm), pid), FrameKind::Process, {}});
      frames.push_back(it->second);
    }
    if (!t.text(thread).empty()) {
      auto [it, added] = thread_frames.try_emplace({thread, tid});
      if (added) it->second = profile.intern(Frame{thread_frame_name(t.text(thread), tid), FrameKind::Thread, {}});
      frames.push_back(it->second);
    }
    for (auto id = location_ids.rbegin(); id != location_ids.rend(); ++id) {  // root first
      auto of = frames_of(*id);
      if (!of) return std::unexpected(of.error());
      frames.insert(frames.end(), (*of)->begin(), (*of)->end());
    }
    uint32_t stack = profile.add(frames, v);
    timed = timed && time;
    if (timed) profile.timeline.push_back({*time, v, stack});
  }
  // Times on some samples only: not a timeline of the whole.
  if (!timed) profile.timeline.clear();
  std::stable_sort(profile.timeline.begin(), profile.timeline.end(),
                   [](const Timed& a, const Timed& b) { return a.time_ns < b.time_ns; });
  return {};
}

}  // namespace

std::expected<Profile, std::string> decode_pprof(std::string_view bytes, std::string_view sample_type,
                                                 SampleTypes* sample_types) {
  std::string storage;
  auto raw = inflated(bytes, storage);
  if (!raw) return std::unexpected("pprof: " + raw.error());
  bytes = *raw;
  auto t = read_tables(bytes);
  if (!t) return std::unexpected(t.error());
  std::vector<std::string> type_names;
  for (auto [type, unit] : t->types) type_names.emplace_back(t->text(type));
  size_t value_index = t->types.size() - 1;  // pprof's rule without a default
  for (size_t i = 0; i < t->types.size(); ++i)
    if (sample_type.empty() ? t->default_type && t->types[i].first == t->default_type : type_names[i] == sample_type)
      value_index = i;
  if (!sample_type.empty() && type_names[value_index] != sample_type) {
    std::string known;
    for (const std::string& name : type_names) known += (known.empty() ? "" : ", ") + name;
    return std::unexpected("pprof: no sample type '" + std::string(sample_type) + "' in it; it holds " + known);
  }
  if (sample_types) *sample_types = {type_names, value_index};

  Profile profile;
  std::string_view type = t->text(t->types[value_index].first), unit = t->text(t->types[value_index].second);
  profile.unit = unit == "count" ? "samples" : unit == "nanoseconds" ? "ns" : std::string(unit);
  profile.event = type == "samples" ? "cpu-clock" : std::string(type);
  profile.period_ns = profile.unit == "samples" ? t->period : 0;
  profile.start_unix_ns = t->time_nanos;
  profile.duration_ns = t->duration;
  for (uint64_t c : t->comments) {
    std::string_view line = t->text(c);
    size_t colon = line.find(": ");
    if (colon != std::string_view::npos && colon > 0)
      profile.info.emplace_back(line.substr(0, colon), line.substr(colon + 2));
  }
  if (auto added = add_samples(*t, value_index, profile); !added) return std::unexpected(added.error());
  return profile;
}

}  // namespace ember::flamegraph
