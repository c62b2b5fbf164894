// The protobuf wire format, just what ember writes and reads by hand:
// profile.proto (flamegraph/pprof.cpp), OTLP's profiles (flamegraph/otlp.cpp)
// and Pyroscope's push request (user/fleet/pyroscope.cpp). Varints,
// length-delimited fields and 64-bit fixed-width ones (OTLP's times); 32-bit
// fixed-width fields are skipped when read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::protobuf {

enum Wire { kVarint = 0, kFixed64 = 1, kLen = 2 };

class Writer {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>(v | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  void tag(int field, Wire wire) { varint(static_cast<uint64_t>(field) << 3 | wire); }
  void uint(int field, uint64_t v) {
    if (v == 0) return;  // proto3 default
    tag(field, kVarint);
    varint(v);
  }
  void bytes(int field, std::string_view s) {
    tag(field, kLen);
    varint(s.size());
    out_ += s;
  }
  void fixed64(int field, uint64_t v) {
    if (v == 0) return;  // proto3 default
    tag(field, kFixed64);
    little_endian(v);
  }
  void message(int field, const Writer& m) { bytes(field, m.out_); }
  void raw(std::string_view s) { out_ += s; }
  void packed(int field, const std::vector<uint64_t>& values) {
    if (values.empty()) return;
    Writer w;
    for (uint64_t v : values) w.varint(v);
    bytes(field, w.out_);
  }
  void packed_fixed64(int field, const std::vector<uint64_t>& values) {
    if (values.empty()) return;
    tag(field, kLen);
    varint(values.size() * 8);
    for (uint64_t v : values) little_endian(v);
  }
  const std::string& str() const { return out_; }
  bool empty() const { return out_.empty(); }

 private:
  void little_endian(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>(v >> (8 * i));
  }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  bool ok() const { return ok_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return fail();
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    return fail();
  }
  // Next field; false at the end or on error.
  bool next(int& field, int& wire) {
    if (done() || !ok_) return false;
    uint64_t key = varint();
    field = static_cast<int>(key >> 3);
    wire = static_cast<int>(key & 7);
    return ok_ && field > 0;
  }
  uint64_t fixed64() {
    if (data_.size() - pos_ < 8) return fail();
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
    pos_ += 8;
    return v;
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (!ok_ || n > data_.size() - pos_) {
      fail();
      return {};
    }
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void skip(int wire) {
    switch (wire) {
      case kVarint: varint(); break;
      case kLen: bytes(); break;
      case kFixed64: advance(8); break;
      case 5: advance(4); break;
      default: fail();
    }
  }
  // Repeated uint64: packed (one length-delimited run) or one varint.
  void repeated(int wire, std::vector<uint64_t>& out) {
    if (wire == kVarint) {
      out.push_back(varint());
    } else if (wire == kLen) {
      Reader r(bytes());
      while (ok_ && !r.done() && r.ok()) out.push_back(r.varint());
      ok_ = ok_ && r.ok();
    } else {
      fail();
    }
  }
  // Repeated fixed64: packed or one value.
  void repeated_fixed64(int wire, std::vector<uint64_t>& out) {
    if (wire == kFixed64) {
      out.push_back(fixed64());
    } else if (wire == kLen) {
      Reader r(bytes());
      while (ok_ && !r.done() && r.ok()) out.push_back(r.fixed64());
      ok_ = ok_ && r.ok();
    } else {
      fail();
    }
  }

 private:
  uint64_t fail() {
    ok_ = false;
    return 0;
  }
  void advance(size_t n) {
    if (n > data_.size() - pos_) fail();
    else pos_ += n;
  }
  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ember::protobuf
