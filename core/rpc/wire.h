// WireWriter / WireReader: the little-endian primitives every frame and payload is written with.
//
// The reader trusts nothing: every read checks what is left, every length is bounded by the
// caller's limit before anything is allocated, and a short or oversized field throws
// protocol_error naming the field ("call.function: needs 12 bytes, 3 left"), never reads past the
// buffer. Both sides are byte-order explicit, so frames mean the same on any host.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "core/base/error.h"
#include "core/runtime/transport.h"

namespace dagsim::rpc {

using runtime::Bytes;

class WireWriter {
 public:
  explicit WireWriter(Bytes& out) : out_(out) {}

  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put(bits, 8);
  }
  // A u32 length, then the bytes.
  void string(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  size_t size() const { return out_.size(); }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  Bytes& out_;
};

class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> in) : in_(in) {}

  uint8_t u8(const char* field) { return static_cast<uint8_t>(get(1, field)); }
  uint16_t u16(const char* field) { return static_cast<uint16_t>(get(2, field)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(get(4, field)); }
  uint64_t u64(const char* field) { return get(8, field); }
  int64_t i64(const char* field) { return static_cast<int64_t>(get(8, field)); }
  double f64(const char* field) {
    const uint64_t bits = get(8, field);
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  // A u32 length (at most `max_length`), then the bytes.
  std::string string(const char* field, size_t max_length) {
    const uint32_t n = u32(field);
    if (n > max_length) {
      throw errors::protocol_error(std::string(field) + ": length " + std::to_string(n) + " exceeds the limit of " +
                                   std::to_string(max_length));
    }
    const std::span<const uint8_t> b = bytes(n, field);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::span<const uint8_t> bytes(size_t n, const char* field) {
    need(n, field);
    std::span<const uint8_t> out = in_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }
  // Throws unless everything was read: trailing bytes mean the two sides disagree on the layout.
  void expect_end(const char* what) const {
    if (remaining() != 0) {
      throw errors::protocol_error(std::string(what) + ": " + std::to_string(remaining()) + " unexpected trailing bytes");
    }
  }

 private:
  void need(size_t n, const char* field) const {
    if (n > remaining()) {
      throw errors::protocol_error(std::string(field) + ": needs " + std::to_string(n) + " bytes, " +
                                   std::to_string(remaining()) + " left (truncated)");
    }
  }
  uint64_t get(int n, const char* field) {
    need(static_cast<size_t>(n), field);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_ + static_cast<size_t>(i)]) << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

}  // namespace dagsim::rpc
