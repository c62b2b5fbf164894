#include "symbolizer/jit_map.h"

#include <algorithm>
#include <charconv>

namespace ember::symbolizer {

namespace {

namespace protocol = agent::protocol;
namespace setting = agent::protocol::setting;

bool number(std::string_view& s, uint64_t& out, int base) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(p - s.data());
  return true;
}

constexpr uint64_t kPublishSlackNs = 1'000'000'000;

std::string_view rest_of(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

}  // namespace

void JitMap::feed(std::string_view text) {
  lines_.feed(text, [this](std::string_view l) { line(l); });
}

void JitMap::retire(std::map<uint64_t, Blob>::iterator it, uint64_t when) {
  it->second.unload_ns = when;
  max_retired_size_ = std::max(max_retired_size_, it->second.size);
  if (last_loaded_ == &it->second) last_loaded_ = nullptr;
  retired_.emplace(it->first, std::move(it->second));
  live_.erase(it);
}

void JitMap::line(std::string_view s) {
  if (s.empty() || s.front() == '#') return;
  char tag = s.front();
  s.remove_prefix(1);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  switch (tag) {
    case protocol::kMethod:
      if (number(s, a, 10) && a < (1u << 24)) {
        std::string_view name = rest_of(s);
        if (name_bytes_.size() + name.size() > UINT32_MAX) break;
        names_[static_cast<uint32_t>(a)] = {static_cast<uint32_t>(name_bytes_.size()), static_cast<uint32_t>(name.size())};
        name_bytes_ += name;
        return;
      }
      break;
    case protocol::kLoad:
    case protocol::kStub: {
      if (!number(s, a, 10) || !number(s, b, 16) || !number(s, c, 16) || b == 0 || c == 0) break;
      if (tag == protocol::kLoad && !number(s, d, 10)) break;
      // Whatever this code overlaps was freed before it was placed here.
      auto it = live_.lower_bound(b);
      if (it != live_.begin()) --it;
      while (it != live_.end() && it->first < b + c) {
        auto next = std::next(it);
        if (it->first + it->second.size > b) retire(it, a);
        it = next;
      }
      Blob& blob = live_[b];
      blob = Blob{b, c, a, UINT64_MAX, static_cast<uint32_t>(d), tag == protocol::kStub ? std::string(rest_of(s)) : "", {}, -1, -1, {}};
      last_loaded_ = tag == protocol::kLoad ? &blob : nullptr;
      ++code_version_;
      return;
    }
    case protocol::kFrame: {
      int64_t words = 0, complete = 0;
      auto signed_number = [&](int64_t& out) {
        s = rest_of(s);
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        if (ec != std::errc() || p == s.data()) return false;
        s.remove_prefix(p - s.data());
        return true;
      };
      if (!number(s, a, 16) || !signed_number(words) || !signed_number(complete)) break;
      auto it = live_.find(a);
      std::vector<FrameStep> steps;
      if (it == live_.end() || words < -1 || words > INT32_MAX || complete < -1 ||
          complete > static_cast<int64_t>(it->second.size) ||
          !frame_steps(s, static_cast<int32_t>(words), static_cast<int32_t>(complete), steps))
        break;
      it->second.frame_words = static_cast<int32_t>(words);
      it->second.complete = static_cast<int32_t>(complete);
      it->second.steps = std::move(steps);
      ++code_version_;
      return;
    }
    case protocol::kInline: {
      if (!last_loaded_ || !number(s, a, 16)) break;
      InlinePc pc{a, static_cast<uint32_t>(inline_ids_.size()), 0};
      s = rest_of(s);
      while (!s.empty()) {
        if (!number(s, b, 10)) break;
        inline_ids_.push_back(static_cast<uint32_t>(b));
        ++pc.count;
        if (!s.empty() && s.front() == ',') s.remove_prefix(1);
      }
      if (pc.count == 0) break;
      auto& pcs = last_loaded_->pcs;
      if (!pcs.empty() && pcs.back().offset > pc.offset)  // the JVM lists them in order; stay safe
        pcs.insert(std::upper_bound(pcs.begin(), pcs.end(), pc.offset,
                                    [](uint64_t o, const InlinePc& p) { return o < p.offset; }),
                   pc);
      else
        pcs.push_back(pc);
      return;
    }
    case protocol::kUnload: {
      if (!number(s, a, 10) || !number(s, b, 16)) break;
      if (auto it = live_.find(b); it != live_.end()) retire(it, a);
      ++code_version_;
      return;
    }
    case protocol::kMethodPointer:
      if (!number(s, a, 16) || !number(s, b, 10) || a == 0 || b == 0 || b >= (1u << 24)) break;
      method_pointers_[a] = static_cast<uint32_t>(b);
      return;
    case protocol::kOption: {
      std::string_view rest = rest_of(s);
      size_t space = rest.find(' ');
      std::string_view key = rest.substr(0, space), value = space == rest.npos ? "" : rest_of(rest.substr(space));
      if (key == setting::kFramesUnavailable) {
        frames_unavailable_ = value;
      } else if (key == setting::kMethodsUnavailable) {
        interpreter_methods_unavailable_ = value;
      } else if (key == setting::kMethodSlot) {
        int32_t slot = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), slot);
        if (ec != std::errc() || p == value.data() || slot >= 0 || slot < -64) break;
        method_slot_ = slot;
        ++code_version_;
      }
      return;  // the others: JavaEvents's
    }
    case protocol::kContinued: {
      // A name in the stream's directory, never a path.
      std::string_view name = rest_of(s);
      if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..") break;
      continued_in_ = std::string(name);
      return;
    }
    case protocol::kClass:
    case protocol::kThread:
    case protocol::kAlloc:
    case protocol::kFree:
    case protocol::kContended:
    case protocol::kCounter:
      return;  // Java events: JavaEvents's (user/java/java_events.h)
  }
  ++bad_lines_;
}

bool JitMap::frame_steps(std::string_view s, int32_t words, int32_t complete, std::vector<FrameStep>& out) {
  for (s = rest_of(s); !s.empty(); s = rest_of(s)) {
    FrameStep step;
    auto field = [&](auto& value, char after) {
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
      if (ec != std::errc() || p == s.data() || (after && (p == s.data() + s.size() || *p != after))) return false;
      s.remove_prefix(p - s.data() + (after ? 1 : 0));
      return true;
    };
    if (!field(step.offset, ':') || !field(step.cfa_words, ':') || !field(step.fp_slot, 0)) return false;
    // Inside the frame being built, in order, before it is complete; the
    // fp saved inside it.
    bool placed = step.offset < static_cast<uint32_t>(std::max(complete, 0)) &&
                  (out.empty() || step.offset > out.back().offset);
    bool sized = step.cfa_words >= 1 && step.cfa_words <= words;
    bool fp = step.fp_slot == 0 || (step.fp_slot <= -2 && step.fp_slot >= -step.cfa_words);
    if (!placed || !sized || !fp || out.size() == protocol::kMaxFrameSteps) return false;
    out.push_back(step);
  }
  return true;
}

std::vector<JitMap::Code> JitMap::live_code() const {
  std::vector<Code> code;
  code.reserve(live_.size());
  for (const auto& [start, b] : live_) {
    Code c{Code::Kind::Other, b.start, b.size, b.frame_words, b.complete, b.steps};
    if (b.method) {
      c.kind = Code::Kind::Compiled;
    } else if (b.stub == protocol::kInterpreter) {
      c.kind = Code::Kind::Interpreter;
      c.method_slot = method_slot_;
    } else if (b.stub == protocol::kCallStub) {
      c.kind = Code::Kind::CallStub;
    }
    code.push_back(c);
  }
  return code;
}

uint32_t JitMap::interpreted_method(uint64_t pointer) const {
  auto it = method_pointers_.find(pointer);
  return it == method_pointers_.end() ? 0 : it->second;
}

std::string_view JitMap::name(uint32_t id) const {
  auto it = names_.find(id);
  if (it == names_.end() || it->second.size == 0) return "[unknown method]";
  return std::string_view(name_bytes_).substr(it->second.offset, it->second.size);
}

const JitMap::Blob* JitMap::containing(const std::multimap<uint64_t, Blob>& blobs, uint64_t address,
                                       uint64_t time_ns, uint64_t max_size) {
  for (auto it = blobs.upper_bound(address); it != blobs.begin();) {
    --it;
    if (it->first + max_size <= address) break;
    const Blob& b = it->second;
    if (address < b.start + b.size && b.load_ns <= time_ns && time_ns < b.unload_ns) return &b;
  }
  return nullptr;
}

JitMap::Location JitMap::locate(uint64_t address, uint64_t time_ns) const {
  const Blob* blob = nullptr;
  auto it = live_.upper_bound(address);
  if (it != live_.begin()) {
    const Blob& b = std::prev(it)->second;
    // Code runs a little before it is published (JDK 17 posts the load
    // event from its service thread): allow a second of slack.
    if (address < b.start + b.size && time_ns + kPublishSlackNs >= b.load_ns) blob = &b;
  }
  if (const Blob* old = containing(retired_, address, time_ns, max_retired_size_))
    if (!blob || old->unload_ns <= blob->load_ns) blob = old;
  if (!blob) return {};
  Location at{blob->start, blob->load_ns, UINT32_MAX, blob->method != 0,
              blob->frame_words == 0 || (blob->frame_words >= 2 && blob->complete >= 0)};
  if (blob->method != 0) {
    // The inlining at the first debug-info pc at or after the address: call
    // sites record their return address, which is `address + 1` for a
    // caller frame (the collector looks up return address - 1).
    auto pc = std::lower_bound(blob->pcs.begin(), blob->pcs.end(), address - blob->start,
                               [](const InlinePc& p, uint64_t o) { return p.offset < o; });
    if (pc != blob->pcs.end()) at.pc = static_cast<uint32_t>(pc - blob->pcs.begin());
  }
  return at;
}

const JitMap::Blob* JitMap::find_blob(uint64_t start, uint64_t load_ns) const {
  if (auto it = live_.find(start); it != live_.end() && it->second.load_ns == load_ns) return &it->second;
  auto [from, to] = retired_.equal_range(start);
  for (auto it = from; it != to; ++it)
    if (it->second.load_ns == load_ns) return &it->second;
  return nullptr;
}

std::vector<Frame> JitMap::frames(const Location& at) const {
  const Blob* blob = find_blob(at.start, at.load_ns);
  if (!blob) return {};
  if (blob->method == 0) {
    bool interpreter = blob->stub == protocol::kInterpreter;
    return {Frame{blob->stub, interpreter ? FrameKind::Interpreted : FrameKind::Native, "[jvm generated code]"}};
  }
  std::vector<Frame> out;
  if (at.pc < blob->pcs.size()) {
    const InlinePc& pc = blob->pcs[at.pc];
    for (uint32_t i = 0; i < pc.count; ++i) {
      bool outermost = i + 1 == pc.count;
      out.push_back(Frame{std::string(name(inline_ids_[pc.first + i])), outermost ? FrameKind::Jit : FrameKind::Inlined, {}});
    }
  }
  if (out.empty()) out.push_back(Frame{std::string(name(blob->method)), FrameKind::Jit, {}});
  return out;
}

void JitMap::forget_before(uint64_t time_ns) {
  for (auto it = retired_.begin(); it != retired_.end();)
    it = it->second.unload_ns < time_ns ? retired_.erase(it) : std::next(it);
}

}  // namespace ember::symbolizer
