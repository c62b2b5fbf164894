#include "flamegraph/otlp.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <unordered_map>

#include "flamegraph/folded.h"
#include "flamegraph/gzip.h"
#include "flamegraph/protobuf.h"

namespace ember::flamegraph {
namespace {

using protobuf::kFixed64;
using protobuf::kLen;
using protobuf::kVarint;
using protobuf::Reader;
using protobuf::Writer;

// Field numbers of profiles.proto, common.proto and resource.proto
// (opentelemetry-proto v1.10.0; v1.10 renumbered Sample's fields 2-4).
namespace field {
// ProfilesData
constexpr int kResourceProfiles = 1, kDictionary = 2;
// ProfilesDictionary
constexpr int kMappingTable = 1, kLocationTable = 2, kFunctionTable = 3, kLinkTable = 4, kStringTable = 5,
              kAttributeTable = 6, kStackTable = 7;
// ResourceProfiles, ScopeProfiles
constexpr int kResource = 1, kScopeProfiles = 2, kScope = 1, kProfiles = 2;
// Resource, InstrumentationScope
constexpr int kResourceAttributes = 1, kScopeName = 1;
// Profile
constexpr int kSampleType = 1, kSamples = 2, kTimeUnixNano = 3, kDurationNano = 4, kPeriodType = 5, kPeriod = 6,
              kProfileAttributes = 11;
// ValueType
constexpr int kTypeStrindex = 1, kUnitStrindex = 2;
// Sample
constexpr int kStackIndex = 1, kSampleAttributes = 2, kValues = 4, kTimestamps = 5;
// Mapping
constexpr int kMappingFilename = 4;
// Stack
constexpr int kLocationIndices = 1;
// Location, Line
constexpr int kMappingIndex = 1, kLines = 3, kLocationAttributes = 4, kFunctionIndex = 1;
// Function
constexpr int kNameStrindex = 1, kSystemNameStrindex = 2;
// KeyValueAndUnit (the attribute table), KeyValue (a resource's)
constexpr int kAttributeKeyStrindex = 1, kAttributeValue = 2, kKey = 1, kValue = 2, kKeyStrindex = 3;
// AnyValue
constexpr int kStringValue = 1, kIntValue = 3, kArrayValue = 5, kStringValueStrindex = 8;
// ArrayValue
constexpr int kArrayValues = 1;
}  // namespace field

// Semantic conventions' attribute names.
constexpr std::string_view kProcessPid = "process.pid", kExecutableName = "process.executable.name",
                           kThreadName = "thread.name", kThreadId = "thread.id", kFrameType = "profile.frame.type",
                           kComment = "pprof.profile.comment";

// A frame kind's profile.frame.type; empty for the allocated class (not code).
std::string_view frame_type(FrameKind kind) {
  switch (kind) {
    case FrameKind::Kernel: return "kernel";
    case FrameKind::Jit:
    case FrameKind::Inlined:
    case FrameKind::Interpreted: return "jvm";
    case FrameKind::Python: return "cpython";
    case FrameKind::JavaScript: return "v8js";
    case FrameKind::Alloc: return {};
    default: return "native";
  }
}

// The kind of a frame another tool wrote, from its profile.frame.type.
std::optional<FrameKind> kind_of_frame_type(std::string_view type) {
  if (type == "kernel") return FrameKind::Kernel;
  if (type == "jvm") return FrameKind::Jit;
  if (type == "cpython") return FrameKind::Python;
  if (type == "v8js") return FrameKind::JavaScript;
  return std::nullopt;
}

bool cpu_samples(const Profile& p) { return p.unit == "samples" && p.period_ns > 0; }

std::string_view unit_name(const std::string& unit) {
  return unit == "samples" ? "count" : unit == "ns" ? "nanoseconds" : std::string_view(unit);
}

// The dictionary every profile of a request shares: each table starts with
// its zero value, as the specification requires, and holds each entry once.
class Dictionary {
 public:
  Dictionary() {
    str("");
    Writer empty;
    mappings_.message(field::kMappingTable, empty);
    locations_.message(field::kLocationTable, empty);
    functions_.message(field::kFunctionTable, empty);
    stacks_.message(field::kStackTable, empty);
    attributes_.message(field::kAttributeTable, empty);
    stack_ids_.emplace(std::vector<uint64_t>{}, 0);
  }

  int32_t str(std::string_view s) {
    auto [it, added] = strings_.try_emplace(std::string(s), static_cast<int32_t>(strings_.size()));
    if (added) order_.push_back(&it->first);
    return it->second;
  }

  // A frame of code as a location: its function, its module's mapping, its
  // runtime.
  int32_t location(const Frame& f) {
    auto [it, added] = location_ids_.try_emplace(f, location_count_);
    if (!added) return it->second;
    ++location_count_;
    Writer fn;
    fn.uint(field::kNameStrindex, static_cast<uint32_t>(str(f.name)));
    fn.uint(field::kSystemNameStrindex, static_cast<uint32_t>(str(folded_name(f))));
    functions_.message(field::kFunctionTable, fn);
    Writer line;
    line.uint(field::kFunctionIndex, static_cast<uint32_t>(function_count_++));
    Writer loc;
    loc.uint(field::kMappingIndex, static_cast<uint32_t>(mapping(f.module)));
    loc.message(field::kLines, line);
    if (std::string_view type = frame_type(f.kind); !type.empty())
      loc.packed(field::kLocationAttributes, {static_cast<uint64_t>(attribute(kFrameType, std::string(type)))});
    locations_.message(field::kLocationTable, loc);
    return it->second;
  }

  int32_t stack(const std::vector<uint64_t>& locations) {
    auto [it, added] = stack_ids_.try_emplace(locations, stack_count_);
    if (!added) return it->second;
    ++stack_count_;
    Writer s;
    s.packed(field::kLocationIndices, locations);
    stacks_.message(field::kStackTable, s);
    return it->second;
  }

  int32_t attribute(std::string_view key, const std::variant<std::string, int64_t>& value) {
    auto [it, added] = attribute_ids_.try_emplace({std::string(key), value}, attribute_count_);
    if (!added) return it->second;
    ++attribute_count_;
    Writer kv;
    kv.uint(field::kAttributeKeyStrindex, static_cast<uint32_t>(str(key)));
    kv.message(field::kAttributeValue, any_value(value));
    attributes_.message(field::kAttributeTable, kv);
    return it->second;
  }

  // An attribute whose value is a list of strings (pprof.profile.comment).
  int32_t attribute_list(std::string_view key, const std::vector<std::string>& values) {
    Writer array;
    for (const std::string& v : values) array.message(field::kArrayValues, any_value(v));
    Writer any;
    any.message(field::kArrayValue, array);
    Writer kv;
    kv.uint(field::kAttributeKeyStrindex, static_cast<uint32_t>(str(key)));
    kv.message(field::kAttributeValue, any);
    attributes_.message(field::kAttributeTable, kv);
    return attribute_count_++;
  }

  static Writer any_value(const std::variant<std::string, int64_t>& value) {
    Writer any;
    if (auto* s = std::get_if<std::string>(&value)) {
      any.bytes(field::kStringValue, *s);
    } else {
      any.tag(field::kIntValue, kVarint);
      any.varint(static_cast<uint64_t>(std::get<int64_t>(value)));
    }
    return any;
  }

  // The ProfilesDictionary message; the string table last, once complete.
  Writer finish() {
    Writer d;
    d.raw(mappings_.str());
    d.raw(locations_.str());
    d.raw(functions_.str());
    Writer empty;
    d.message(field::kLinkTable, empty);
    for (const std::string* s : order_) d.bytes(field::kStringTable, *s);
    d.raw(attributes_.str());
    d.raw(stacks_.str());
    return d;
  }

 private:
  int32_t mapping(const std::string& module) {
    if (module.empty()) return 0;
    auto [it, added] = mapping_ids_.try_emplace(module, mapping_count_);
    if (!added) return it->second;
    ++mapping_count_;
    Writer m;
    m.uint(field::kMappingFilename, static_cast<uint32_t>(str(module)));
    mappings_.message(field::kMappingTable, m);
    return it->second;
  }

  struct VectorHash {
    size_t operator()(const std::vector<uint64_t>& v) const {
      size_t h = v.size();
      for (uint64_t x : v) h = h * 0x9e3779b97f4a7c15ull ^ x;
      return h;
    }
  };
  std::unordered_map<std::string, int32_t> strings_;
  std::vector<const std::string*> order_;
  std::unordered_map<Frame, int32_t, Profile::FrameHash> location_ids_;
  std::unordered_map<std::string, int32_t> mapping_ids_;
  std::unordered_map<std::vector<uint64_t>, int32_t, VectorHash> stack_ids_;
  std::map<std::pair<std::string, std::variant<std::string, int64_t>>, int32_t> attribute_ids_;
  int32_t location_count_ = 1, function_count_ = 1, mapping_count_ = 1, stack_count_ = 1, attribute_count_ = 1;
  Writer mappings_, locations_, functions_, stacks_, attributes_;
};

void add_attribute(Writer& out, int field_number, const Attribute& a) {
  Writer kv;
  kv.bytes(field::kKey, a.key);
  kv.message(field::kValue, Dictionary::any_value(a.value));
  out.message(field_number, kv);
}

}  // namespace

std::string encode_otlp(std::span<const OtlpResource> resources, const OtlpOptions& options) {
  Dictionary dict;
  Writer data;
  for (const OtlpResource& resource : resources) {
    // Each profile's samples, by the process at their root ("" for stacks
    // without one, and for all without process_resources), in the order
    // processes first appear.
    std::vector<std::string> processes;
    std::unordered_map<std::string, size_t> process_index;
    std::vector<std::vector<Writer>> samples;  // [process][profile]
    // The recording's facts, as pprof's comments ("key: value"), an
    // attribute per profile.
    std::vector<int32_t> comments(resource.profiles.size(), 0);
    for (size_t p = 0; p < resource.profiles.size(); ++p) {
      const Profile& profile = *resource.profiles[p];
      // Each stack's times and weights, where samples carry times.
      std::vector<std::vector<std::pair<uint64_t, uint64_t>>> times;
      if (options.timed && !profile.timeline.empty()) {
        times.resize(profile.stacks().size());
        for (const Timed& t : profile.timeline) times[t.stack].emplace_back(profile.start_unix_ns + t.time_ns, t.weight);
      }
      if (!profile.info.empty()) {
        std::vector<std::string> lines;
        for (const auto& [key, value] : profile.info) lines.push_back(key + ": " + value);
        comments[p] = dict.attribute_list(kComment, lines);
      }
      std::vector<int32_t> location_of(profile.frames().size(), -1);
      std::vector<uint64_t> locations, attributes, values, timestamps;
      for (const Stack* s : profile.sorted_stacks()) {
        std::string process;
        locations.clear();
        attributes.clear();
        for (auto it = s->frames.rbegin(); it != s->frames.rend(); ++it) {  // leaf first
          const Frame& f = profile.frames()[*it];
          if (f.kind == FrameKind::Process) {
            if (options.process_resources) {
              process = f.name;
            } else {
              auto [comm, pid] = split_process_frame(f.name);
              attributes.push_back(static_cast<uint64_t>(dict.attribute(kExecutableName, comm)));
              if (pid) attributes.push_back(static_cast<uint64_t>(dict.attribute(kProcessPid, static_cast<int64_t>(pid))));
            }
          } else if (f.kind == FrameKind::Thread) {
            auto [name, tid] = split_thread_frame(f.name);
            attributes.push_back(static_cast<uint64_t>(dict.attribute(kThreadName, name)));
            if (tid) attributes.push_back(static_cast<uint64_t>(dict.attribute(kThreadId, static_cast<int64_t>(tid))));
          } else {
            int32_t& id = location_of[*it];
            if (id < 0) id = dict.location(f);
            locations.push_back(static_cast<uint64_t>(id));
          }
        }
        auto [known, added] = process_index.try_emplace(process, processes.size());
        if (added) {
          processes.push_back(process);
          samples.emplace_back(resource.profiles.size());
        }
        Writer sample;
        sample.uint(field::kStackIndex, static_cast<uint32_t>(dict.stack(locations)));
        sample.packed(field::kSampleAttributes, attributes);
        values.clear();
        timestamps.clear();
        if (times.empty()) {
          values.push_back(s->weight);
        } else if (profile.unit == "samples") {  // a timestamp per sample, its value 1
          for (auto [t, w] : times[s - profile.stacks().data()]) timestamps.insert(timestamps.end(), w, t);
        } else {
          for (auto [t, w] : times[s - profile.stacks().data()]) {
            timestamps.push_back(t);
            values.push_back(w);
          }
        }
        sample.packed(field::kValues, values);
        sample.packed_fixed64(field::kTimestamps, timestamps);
        samples[known->second][p].message(field::kSamples, sample);
      }
    }

    for (size_t proc = 0; proc < processes.size(); ++proc) {
      Writer res;
      for (const Attribute& a : resource.attributes) add_attribute(res, field::kResourceAttributes, a);
      if (!processes[proc].empty()) {
        auto [comm, pid] = split_process_frame(processes[proc]);
        add_attribute(res, field::kResourceAttributes, {std::string(kExecutableName), comm});
        if (pid) add_attribute(res, field::kResourceAttributes, {std::string(kProcessPid), static_cast<int64_t>(pid)});
      }
      Writer scope;
      Writer scope_id;
      scope_id.bytes(field::kScopeName, "ember");
      scope.message(field::kScope, scope_id);
      for (size_t p = 0; p < resource.profiles.size(); ++p) {
        if (samples[proc][p].empty()) continue;
        const Profile& profile = *resource.profiles[p];
        Writer out;
        auto value_type = [&](int f, std::string_view type, std::string_view unit) {
          Writer vt;
          vt.uint(field::kTypeStrindex, static_cast<uint32_t>(dict.str(type)));
          vt.uint(field::kUnitStrindex, static_cast<uint32_t>(dict.str(unit)));
          out.message(f, vt);
        };
        // CPU samples as OpenTelemetry's eBPF profiler sends them (and
        // Pyroscope's receiver knows them): samples/count every cpu period.
        bool cpu = cpu_samples(profile);
        value_type(field::kSampleType, cpu && profile.event == "cpu-clock" ? "samples" : std::string_view(profile.event),
                   unit_name(profile.unit));
        out.raw(samples[proc][p].str());
        out.fixed64(field::kTimeUnixNano, profile.start_unix_ns);
        out.uint(field::kDurationNano, profile.duration_ns);
        if (cpu) {
          value_type(field::kPeriodType, "cpu", "nanoseconds");
          out.uint(field::kPeriod, profile.period_ns);
        } else if (!options.timed) {
          value_type(field::kPeriodType, series_name(profile.event), unit_name(profile.unit));
          out.uint(field::kPeriod, 1);
        }
        if (comments[p]) out.packed(field::kProfileAttributes, {static_cast<uint64_t>(comments[p])});
        scope.message(field::kProfiles, out);
      }
      Writer resource_profiles;
      resource_profiles.message(field::kResource, res);
      resource_profiles.message(field::kScopeProfiles, scope);
      data.message(field::kResourceProfiles, resource_profiles);
    }
  }
  data.message(field::kDictionary, dict.finish());
  return data.str();
}

namespace {

// A value of the attribute table or of a resource's attributes.
struct Value {
  std::string_view text;
  int64_t number = 0;
  std::vector<std::string_view> list;  // an array of strings
};

// The tables of a request's dictionary, read (indices are checked at use).
struct ReadTables {
  std::vector<std::string_view> strings;
  std::vector<int64_t> mapping_files;  // filename string index
  std::vector<std::pair<int64_t, int64_t>> functions;  // name, system name
  struct Location {
    int64_t mapping = 0;
    std::vector<uint64_t> functions;  // its lines' functions, innermost first
    std::vector<uint64_t> attributes;
  };
  std::vector<Location> locations;
  std::vector<std::vector<uint64_t>> stacks;  // leaf first
  std::vector<std::pair<std::string_view, Value>> attributes;

  std::string_view text(int64_t i) const {
    return i >= 0 && static_cast<size_t>(i) < strings.size() ? strings[static_cast<size_t>(i)] : std::string_view();
  }
};

Value read_any_value(std::string_view m, const ReadTables& t) {
  Value v;
  Reader r(m);
  int f, w;
  while (r.next(f, w)) {
    if (f == field::kStringValue && w == kLen) v.text = r.bytes();
    else if (f == field::kIntValue && w == kVarint) v.number = static_cast<int64_t>(r.varint());
    else if (f == field::kStringValueStrindex && w == kVarint) v.text = t.text(static_cast<int64_t>(r.varint()));
    else if (f == field::kArrayValue && w == kLen) {
      Reader a(r.bytes());
      int af, aw;
      while (a.next(af, aw)) {
        if (af == field::kArrayValues && aw == kLen) v.list.push_back(read_any_value(a.bytes(), t).text);
        else a.skip(aw);
      }
    } else r.skip(w);
  }
  return v;
}

// A KeyValue (a resource's attribute) or a KeyValueAndUnit (the attribute
// table's): its key, by name or by string index, and its value.
std::pair<std::string_view, Value> read_key_value(std::string_view m, const ReadTables& t, bool indexed_key) {
  std::pair<std::string_view, Value> kv;
  Reader r(m);
  int f, w;
  while (r.next(f, w)) {
    if (!indexed_key && f == field::kKey && w == kLen) kv.first = r.bytes();
    else if (f == (indexed_key ? field::kAttributeKeyStrindex : field::kKeyStrindex) && w == kVarint)
      kv.first = t.text(static_cast<int64_t>(r.varint()));
    else if (f == field::kValue && w == kLen) kv.second = read_any_value(r.bytes(), t);
    else r.skip(w);
  }
  return kv;
}

std::expected<ReadTables, std::string> read_dictionary(std::string_view m) {
  ReadTables t;
  std::vector<std::string_view> mappings, locations, functions, stacks, attributes;
  Reader r(m);
  int f, w;
  while (r.next(f, w)) {
    if (w != kLen) {
      r.skip(w);
      continue;
    }
    std::string_view b = r.bytes();
    switch (f) {
      case field::kMappingTable: mappings.push_back(b); break;
      case field::kLocationTable: locations.push_back(b); break;
      case field::kFunctionTable: functions.push_back(b); break;
      case field::kStringTable: t.strings.push_back(b); break;
      case field::kAttributeTable: attributes.push_back(b); break;
      case field::kStackTable: stacks.push_back(b); break;
      default: break;
    }
  }
  if (!r.ok()) return std::unexpected("otlp: corrupt dictionary");
  for (std::string_view b : mappings) {
    Reader s(b);
    int64_t file = 0;
    while (s.next(f, w))
      if (f == field::kMappingFilename && w == kVarint) file = static_cast<int64_t>(s.varint());
      else s.skip(w);
    t.mapping_files.push_back(file);
  }
  for (std::string_view b : functions) {
    Reader s(b);
    std::pair<int64_t, int64_t> fn{};
    while (s.next(f, w))
      if (f == field::kNameStrindex && w == kVarint) fn.first = static_cast<int64_t>(s.varint());
      else if (f == field::kSystemNameStrindex && w == kVarint) fn.second = static_cast<int64_t>(s.varint());
      else s.skip(w);
    t.functions.push_back(fn);
  }
  for (std::string_view b : locations) {
    Reader s(b);
    ReadTables::Location loc;
    while (s.next(f, w)) {
      if (f == field::kMappingIndex && w == kVarint) loc.mapping = static_cast<int64_t>(s.varint());
      else if (f == field::kLines && w == kLen) {
        Reader line(s.bytes());
        uint64_t fn = 0;
        int lf, lw;
        while (line.next(lf, lw))
          if (lf == field::kFunctionIndex && lw == kVarint) fn = line.varint();
          else line.skip(lw);
        if (!line.ok()) return std::unexpected("otlp: corrupt line");
        loc.functions.push_back(fn);
      } else if (f == field::kLocationAttributes) s.repeated(w, loc.attributes);
      else s.skip(w);
    }
    if (!s.ok()) return std::unexpected("otlp: corrupt location");
    t.locations.push_back(std::move(loc));
  }
  for (std::string_view b : stacks) {
    Reader s(b);
    std::vector<uint64_t> ids;
    while (s.next(f, w))
      if (f == field::kLocationIndices) s.repeated(w, ids);
      else s.skip(w);
    if (!s.ok()) return std::unexpected("otlp: corrupt stack");
    t.stacks.push_back(std::move(ids));
  }
  for (std::string_view b : attributes) t.attributes.push_back(read_key_value(b, t, true));
  return t;
}

// A Profile message, read.
struct ReadProfile {
  size_t resource = 0;
  std::string event, unit;
  uint64_t period_ns = 0, time_ns = 0, duration_ns = 0;
  std::vector<uint64_t> attributes;
  std::vector<std::string_view> samples;
};

// The event a sample type names: ember's own names, OpenTelemetry's CPU
// samples (samples/count) and off-CPU time as ember's.
std::pair<std::string, std::string> event_of(std::string_view type, std::string_view unit) {
  std::string e = type == "samples" ? "cpu-clock" : type == "off_cpu" ? "offcpu" : std::string(type);
  std::string u = unit == "count" ? "samples" : unit == "nanoseconds" ? "ns" : std::string(unit);
  return {e, u};
}

std::expected<ReadProfile, std::string> read_profile(std::string_view m, const ReadTables& t) {
  ReadProfile p;
  std::pair<int64_t, int64_t> sample_type{}, period_type{};
  uint64_t period = 0;
  auto pair_of = [](std::string_view b) {
    Reader s(b);
    std::pair<int64_t, int64_t> out{};
    int f, w;
    while (s.next(f, w))
      if (f == field::kTypeStrindex && w == kVarint) out.first = static_cast<int64_t>(s.varint());
      else if (f == field::kUnitStrindex && w == kVarint) out.second = static_cast<int64_t>(s.varint());
      else s.skip(w);
    return out;
  };
  Reader r(m);
  int f, w;
  while (r.next(f, w)) {
    if (f == field::kSampleType && w == kLen) sample_type = pair_of(r.bytes());
    else if (f == field::kSamples && w == kLen) p.samples.push_back(r.bytes());
    else if (f == field::kTimeUnixNano && w == kFixed64) p.time_ns = r.fixed64();
    else if (f == field::kDurationNano && w == kVarint) p.duration_ns = r.varint();
    else if (f == field::kPeriodType && w == kLen) period_type = pair_of(r.bytes());
    else if (f == field::kPeriod && w == kVarint) period = r.varint();
    else if (f == field::kProfileAttributes) r.repeated(w, p.attributes);
    else r.skip(w);
  }
  if (!r.ok()) return std::unexpected("otlp: corrupt profile");
  if (!sample_type.first) return std::unexpected("otlp: a profile without a sample type");
  std::tie(p.event, p.unit) = event_of(t.text(sample_type.first), t.text(sample_type.second));
  if (p.unit == "samples" && t.text(period_type.first) == "cpu" && t.text(period_type.second) == "nanoseconds")
    p.period_ns = period;
  return p;
}

}  // namespace

bool is_otlp(std::string_view bytes) {
  Reader r(bytes);
  int f, w;
  bool any = false;
  while (r.next(f, w)) {
    if ((f != field::kResourceProfiles && f != field::kDictionary) || w != kLen) return false;
    r.skip(w);
    any = true;
  }
  return any && r.ok();
}

namespace {

// The profiles of an OTLP request, and each resource's process:
// "comm (pid)", or empty.
struct OtlpResources {
  std::vector<ReadProfile> profiles;
  std::vector<std::string> process_names;  // per resource
};

std::expected<OtlpResources, std::string> read_resources(const std::vector<std::string_view>& resources,
                                                         const ReadTables& t) {
  OtlpResources read;
  std::vector<ReadProfile>& profiles = read.profiles;
  std::vector<std::string>& process_names = read.process_names;
  int f, w;
  for (std::string_view rp : resources) {
    std::string_view comm, path;
    int64_t pid = 0;
    Reader rr(rp);
    while (rr.next(f, w)) {
      if (f == field::kResource && w == kLen) {
        Reader res(rr.bytes());
        int af, aw;
        while (res.next(af, aw)) {
          if (af != field::kResourceAttributes || aw != kLen) {
            res.skip(aw);
            continue;
          }
          auto [key, value] = read_key_value(res.bytes(), t, false);
          if (key == kExecutableName) comm = value.text;
          else if (key == "process.executable.path") path = value.text;
          else if (key == kProcessPid) pid = value.number;
        }
        if (!res.ok()) return std::unexpected("otlp: corrupt resource");
      } else if (f == field::kScopeProfiles && w == kLen) {
        Reader scope(rr.bytes());
        int sf, sw;
        while (scope.next(sf, sw)) {
          if (sf != field::kProfiles || sw != kLen) {
            scope.skip(sw);
            continue;
          }
          auto p = read_profile(scope.bytes(), t);
          if (!p) return std::unexpected(p.error());
          p->resource = process_names.size();
          profiles.push_back(std::move(*p));
        }
        if (!scope.ok()) return std::unexpected("otlp: corrupt scope");
      } else {
        rr.skip(w);
      }
    }
    if (!rr.ok()) return std::unexpected("otlp: corrupt resource");
    if (comm.empty()) comm = path.substr(path.rfind('/') + 1);
    process_names.push_back(comm.empty() ? std::string() : process_frame_name(comm, static_cast<uint64_t>(pid)));
  }
  return read;
}

// The samples of `wanted`'s profiles added to `out`, under their process
// and thread frames, with a timeline (times since `start`) if every one
// has times.
std::expected<void, std::string> add_samples(const ReadTables& t, const OtlpResources& read, const std::string& wanted,
                                             uint64_t start, Profile& out) {
  const std::vector<std::string>& process_names = read.process_names;
  int f, w;
  // Frames are made once per location, process and thread, not per sample.
  std::vector<std::optional<std::vector<FrameId>>> location_frames(t.locations.size());  // root first
  auto frames_of = [&](uint64_t id) -> std::expected<const std::vector<FrameId>*, std::string> {
    if (id >= t.locations.size()) return std::unexpected("otlp: a stack names a missing location");
    auto& cached = location_frames[id];
    if (cached) return &*cached;
    cached.emplace();
    const ReadTables::Location& loc = t.locations[id];
    std::optional<FrameKind> runtime;
    for (uint64_t a : loc.attributes)
      if (a < t.attributes.size() && t.attributes[a].first == kFrameType)
        runtime = kind_of_frame_type(t.attributes[a].second.text);
    if (loc.mapping < 0 || static_cast<size_t>(loc.mapping) >= std::max<size_t>(t.mapping_files.size(), 1))
      return std::unexpected("otlp: a location names a missing mapping");
    std::string module(loc.mapping > 0 ? t.text(t.mapping_files[static_cast<size_t>(loc.mapping)]) : "");
    for (size_t i = loc.functions.size(); i-- > 0;) {  // the outermost line last
      if (loc.functions[i] >= t.functions.size()) return std::unexpected("otlp: a location names a missing function");
      auto [name_index, system_index] = t.functions[loc.functions[i]];
      std::string name(t.text(name_index));
      Frame frame = parse_folded_frame(t.text(system_index), false);
      if (frame.name != name) {  // not written by ember
        frame = parse_folded_frame(name, false);
        if (runtime) frame.kind = *runtime;
      }
      frame.name = name;
      if (i + 1 < loc.functions.size() && frame.kind == FrameKind::Jit) frame.kind = FrameKind::Inlined;
      frame.module = module;
      cached->push_back(out.intern(frame));
    }
    return &*cached;
  };
  std::vector<std::optional<FrameId>> process_frames(process_names.size());
  std::map<std::pair<std::string_view, int64_t>, FrameId> thread_frames, sample_processes;

  std::vector<FrameId> frames;
  std::vector<uint64_t> attributes, values, timestamps;
  bool timed = true;  // every sample so far had times
  for (const ReadProfile& p : read.profiles) {
    if (p.event != wanted) continue;
    for (std::string_view raw : p.samples) {
      uint64_t stack = 0;
      attributes.clear();
      values.clear();
      timestamps.clear();
      Reader s(raw);
      while (s.next(f, w)) {
        if (f == field::kStackIndex && w == kVarint) stack = s.varint();
        else if (f == field::kSampleAttributes) s.repeated(w, attributes);
        else if (f == field::kValues) s.repeated(w, values);
        else if (f == field::kTimestamps) s.repeated_fixed64(w, timestamps);
        else s.skip(w);
      }
      if (!s.ok()) return std::unexpected("otlp: corrupt sample");
      if (stack >= t.stacks.size()) return std::unexpected("otlp: a sample names a missing stack");
      if (!values.empty() && !timestamps.empty() && values.size() != timestamps.size())
        return std::unexpected("otlp: a sample's values and timestamps differ in number");
      std::string_view thread, comm;
      int64_t tid = 0, pid = 0;
      for (uint64_t a : attributes) {
        if (a >= t.attributes.size()) return std::unexpected("otlp: a sample names a missing attribute");
        const auto& [key, value] = t.attributes[a];
        if (key == kThreadName) thread = value.text;
        else if (key == kThreadId) tid = value.number;
        else if (key == kExecutableName) comm = value.text;
        else if (key == kProcessPid) pid = value.number;
      }
      frames.clear();
      if (!comm.empty()) {  // the sample's process, not its resource's
        auto [it, added] = sample_processes.try_emplace({comm, pid});
        if (added)
          it->second = out.intern(Frame{process_frame_name(comm, static_cast<uint64_t>(pid)), FrameKind::Process, {}});
        frames.push_back(it->second);
      } else if (!process_names[p.resource].empty()) {
        auto& id = process_frames[p.resource];
        if (!id) id = out.intern(Frame{process_names[p.resource], FrameKind::Process, {}});
        frames.push_back(*id);
      }
      if (!thread.empty()) {
        auto [it, added] = thread_frames.try_emplace({thread, tid});
        if (added)
          it->second = out.intern(
              Frame{thread_frame_name(thread, static_cast<uint64_t>(tid)), FrameKind::Thread, {}});
        frames.push_back(it->second);
      }
      const std::vector<uint64_t>& locations = t.stacks[stack];
      for (auto id = locations.rbegin(); id != locations.rend(); ++id) {  // root first
        auto of = frames_of(*id);
        if (!of) return std::unexpected(of.error());
        frames.insert(frames.end(), (*of)->begin(), (*of)->end());
      }
      auto weight = [&](size_t i) {
        int64_t v = values.empty() ? 1 : static_cast<int64_t>(values[i]);
        return v > 0 ? static_cast<uint64_t>(v) : 0;
      };
      if (timestamps.empty()) {
        uint64_t sum = 0;
        for (size_t i = 0; i < values.size(); ++i) sum += weight(i);
        out.add(frames, sum);
        timed = timed && sum == 0;
        continue;
      }
      for (size_t i = 0; i < timestamps.size(); ++i) {
        uint32_t id = out.add(frames, weight(i));
        if (id != Profile::kNoStack)
          out.timeline.push_back({timestamps[i] > start ? timestamps[i] - start : 0, weight(i), id});
      }
    }
  }
  // Times on some samples only: not a timeline of the whole.
  if (!timed) out.timeline.clear();
  std::stable_sort(out.timeline.begin(), out.timeline.end(),
                   [](const Timed& a, const Timed& b) { return a.time_ns < b.time_ns; });
  return {};
}

}  // namespace

std::expected<Profile, std::string> decode_otlp(std::string_view bytes, std::string_view event,
                                                std::vector<std::string>* events) {
  std::string storage;
  auto raw = inflated(bytes, storage);
  if (!raw) return std::unexpected("otlp: " + raw.error());
  bytes = *raw;
  std::vector<std::string_view> resources;
  std::string_view dictionary;
  Reader r(bytes);
  int f, w;
  while (r.next(f, w)) {
    if (f == field::kResourceProfiles && w == kLen) resources.push_back(r.bytes());
    else if (f == field::kDictionary && w == kLen) dictionary = r.bytes();
    else r.skip(w);
  }
  if (!r.ok()) return std::unexpected("otlp: corrupt or truncated protobuf");
  auto tables = read_dictionary(dictionary);
  if (!tables) return std::unexpected(tables.error());
  const ReadTables& t = *tables;

  auto read = read_resources(resources, t);
  if (!read) return std::unexpected(read.error());
  const std::vector<ReadProfile>& profiles = read->profiles;
  if (profiles.empty()) return std::unexpected("otlp: no profiles in it");

  std::vector<std::string> found;
  for (const ReadProfile& p : profiles)
    if (std::find(found.begin(), found.end(), p.event) == found.end()) found.push_back(p.event);
  std::string wanted = event.empty() ? found.front() : std::string(event);
  if (std::find(found.begin(), found.end(), wanted) == found.end()) {
    std::string known;
    for (const std::string& e : found) known += (known.empty() ? "" : ", ") + e;
    return std::unexpected("otlp: no profile of event '" + wanted + "' in it; it holds " + known);
  }
  if (events) *events = found;

  Profile out;
  const ReadProfile* first = nullptr;
  uint64_t start = UINT64_MAX, end = 0;
  for (const ReadProfile& p : profiles) {
    if (p.event != wanted) continue;
    if (!first) first = &p;
    start = std::min(start, p.time_ns);
    end = std::max(end, p.time_ns + p.duration_ns);
  }
  out.event = wanted;
  out.unit = first->unit;
  out.period_ns = first->period_ns;
  out.start_unix_ns = start;
  out.duration_ns = end - start;
  for (uint64_t a : first->attributes)
    if (a < t.attributes.size() && t.attributes[a].first == kComment)
      for (std::string_view line : t.attributes[a].second.list) {
        size_t colon = line.find(": ");
        if (colon != std::string_view::npos && colon > 0)
          out.info.emplace_back(line.substr(0, colon), line.substr(colon + 2));
      }

  if (auto added = add_samples(t, *read, wanted, start, out); !added) return std::unexpected(added.error());
  return out;
}

}  // namespace ember::flamegraph
