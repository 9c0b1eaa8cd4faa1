// WireWriter / WireReader: the little-endian primitives every frame and payload is written with,
// and the one way a payload struct describes its layout for both directions.
//
// The reader trusts nothing: every read checks what is left, every length is bounded by the
// caller's limit before anything is allocated, and a short or oversized field throws
// protocol_error naming the field ("call.function: needs 12 bytes, 3 left"), never reads past the
// buffer. Both sides are byte-order explicit, so frames mean the same on any host.
//
// Payload structs (call_messages.h, autograd_messages.h, termination.h) write their layout once:
//   struct ProbeRequest {
//     static constexpr const char* kName = "termination_probe_req";
//     ContextId context = 0; uint64_t wave = 0;
//     template <class Io, class Self> static void fields(Io& io, Self& m) {
//       io.num("probe.context_id", m.context);
//       io.num("probe.wave", m.wave);
//     }
//   };
// and to_bytes / from_bytes run that one description through a WireWriter or a WireReader, so the
// two directions cannot disagree. Both classes offer the same field methods (num, str, blob,
// tensor, flags, list, dict) with the same bounds: the writer refuses (invalid_argument: the peer
// would refuse it) what the reader would reject (protocol_error).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/transport.h"
#include "core/tensor/tensor.h"

namespace dagsim::rpc {

using runtime::Bytes;

inline constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
// The largest rank a tensor may have inside a payload (frames have CodecLimits::max_rank).
inline constexpr uint32_t kMaxPayloadRank = 16;

// The fixed-width values num() carries, and their width on the wire.
template <typename T>
concept WireNumber = std::same_as<T, bool> || std::same_as<T, uint8_t> || std::same_as<T, uint16_t> ||
                     std::same_as<T, uint32_t> || std::same_as<T, uint64_t> || std::same_as<T, int64_t> ||
                     std::same_as<T, double>;

// The dtype byte's top bit: a GPU ordinal follows (WireWriter::tensor_data).
inline constexpr uint8_t kTensorOnDevice = 0x80;

class WireWriter {
 public:
  explicit WireWriter(Bytes& out) : out_(out) {}

  void u8(uint8_t v) { put(v, 1); }
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
    DAGSIM_ASSERT(s.size() <= UINT32_MAX);
    const size_t before = out_.size();
    u32(static_cast<uint32_t>(s.size()));
    bytes(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
    DAGSIM_ASSERT_EQ(out_.size(), before + 4 + s.size());  // WireReader::string reads exactly this
  }
  void bytes(std::span<const uint8_t> b) {
    const size_t before = out_.size();
    out_.insert(out_.end(), b.begin(), b.end());
    DAGSIM_ASSERT_EQ(out_.size(), before + b.size());
  }
  size_t size() const { return out_.size(); }

  // dtype u8 (its top bit set when a GPU ordinal u8 follows: the device the receiver places it
  // on), rank u8, rank x dim i64, then the data (host order: little-endian, see codec.cc).
  void tensor_data(const Tensor& t, Device target = Device::cpu()) {
    DAGSIM_ASSERT_MSG(t.defined(), "an undefined tensor on the wire");
    DAGSIM_ASSERT_MSG(t.dim() <= UINT8_MAX, "a rank travels in one byte");
    DAGSIM_ASSERT_MSG(t.device().is_cpu(), "a device tensor is staged to the host before it is encoded");
    DAGSIM_ASSERT(target.is_cpu() || (target.index >= 0 && target.index <= UINT8_MAX));
    const size_t before = out_.size();
    if (target.is_cpu()) {
      u8(static_cast<uint8_t>(t.dtype()));
    } else {
      u8(static_cast<uint8_t>(t.dtype()) | kTensorOnDevice);
      u8(static_cast<uint8_t>(target.index));
    }
    u8(static_cast<uint8_t>(t.dim()));
    for (int64_t size : t.shape()) i64(size);
    bytes(std::span(static_cast<const uint8_t*>(t.raw_data()), t.nbytes()));
    // Paired with WireReader::tensor_data, which needs exactly numel x dtype-size data bytes.
    DAGSIM_ASSERT_EQ(t.nbytes(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
    DAGSIM_ASSERT_EQ(out_.size(), before + (target.is_cpu() ? 2 : 3) + 8 * static_cast<size_t>(t.dim()) + t.nbytes());
  }

  // The field methods (see the file comment); `max` bounds a length or a count.
  template <WireNumber T>
  void num(const char*, const T& v) {
    [[maybe_unused]] const size_t before = out_.size();
    if constexpr (std::same_as<T, bool>) {
      u8(v ? 1 : 0);
    } else if constexpr (std::same_as<T, double>) {
      f64(v);
    } else if constexpr (std::same_as<T, int64_t>) {
      i64(v);
    } else {
      put(static_cast<uint64_t>(v), sizeof(T));
    }
    // bool travels in one byte; every other number in its own width (WireReader::num reads it).
    DAGSIM_ASSERT_EQ(out_.size(), before + (std::same_as<T, bool> ? 1 : sizeof(T)));
  }
  void str(const char* field, const std::string& v, size_t max) {
    check(field, "length", v.size(), max);
    string(v);
  }
  void blob(const char* field, const Bytes& v, size_t max) {
    check(field, "length", v.size(), max);
    const size_t before = out_.size();
    u32(static_cast<uint32_t>(v.size()));
    bytes(v);
    DAGSIM_ASSERT_EQ(out_.size(), before + 4 + v.size());  // WireReader::blob reads exactly this
  }
  void tensor(const char* field, const Tensor& t) {
    check(field, "rank", static_cast<size_t>(t.dim()), kMaxPayloadRank);
    tensor_data(t);
  }
  void flags(const char* field, const std::vector<bool>& v, size_t max) {
    check(field, "count", v.size(), max);
    const size_t before = out_.size();
    u32(static_cast<uint32_t>(v.size()));
    for (bool b : v) u8(b ? 1 : 0);
    // One byte per flag: the reader's count check (at least 1 byte each) holds.
    DAGSIM_ASSERT_EQ(out_.size(), before + 4 + v.size());
  }
  template <typename T, typename Each>
  void list(const char* field, const std::vector<T>& v, size_t max, Each each) {
    check(field, "count", v.size(), max);
    const size_t before = out_.size();
    u32(static_cast<uint32_t>(v.size()));
    for (const T& e : v) each(e);
    // Every element wrote at least one byte: the reader's count check (count <= bytes left) holds.
    DAGSIM_ASSERT(out_.size() >= before + 4 + v.size());
  }
  template <typename Map, typename Each>
  void dict(const char* field, const Map& m, size_t max, size_t max_key, Each each) {
    check(field, "count", m.size(), max);
    const size_t before = out_.size();
    u32(static_cast<uint32_t>(m.size()));
    for (const auto& [key, value] : m) {
      str(field, key, max_key);
      each(value);
    }
    // Every entry wrote at least its key's length: the reader's count check (4 bytes each) holds.
    DAGSIM_ASSERT(out_.size() >= before + 4 + 4 * m.size());
  }

 private:
  // What the reader would refuse is refused here, where the caller can still be told.
  static void check(const char* field, const char* what, size_t n, size_t max) {
    if (n > max || n > UINT32_MAX) {
      throw errors::invalid_argument(std::string(field) + ": " + what + " " + std::to_string(n) + " exceeds the limit of " +
                                     std::to_string(std::min<size_t>(max, UINT32_MAX)) + " (the peer would refuse it)");
    }
  }
  void put(uint64_t v, size_t n) {
    DAGSIM_ASSERT(n == 1 || n == 2 || n == 4 || n == 8);
    // The value fits its width: nothing is silently cut (the callers' types guarantee it).
    DAGSIM_ASSERT(n == 8 || (v >> (8 * n)) == 0);
    for (size_t i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
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
    const uint32_t n = length(field, "length", max_length);
    const std::span<const uint8_t> b = bytes(n, field);
    DAGSIM_ASSERT(b.size() == n && n <= max_length);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::span<const uint8_t> bytes(size_t n, const char* field) {
    need(n, field);
    std::span<const uint8_t> out = in_.subspan(pos_, n);
    pos_ += n;
    DAGSIM_ASSERT(pos_ <= in_.size() && out.size() == n);  // never past the buffer
    return out;
  }
  size_t remaining() const {
    DAGSIM_ASSERT(pos_ <= in_.size());  // never read past the buffer, so this never wraps
    return in_.size() - pos_;
  }
  size_t position() const { return pos_; }
  // Throws unless everything was read: trailing bytes mean the two sides disagree on the layout.
  void expect_end(const char* what) const {
    if (remaining() != 0) {
      throw errors::protocol_error(std::string(what) + ": " + std::to_string(remaining()) + " unexpected trailing bytes");
    }
  }
  // A u32 count or length, refused above `max`.
  uint32_t length(const char* field, const char* what, size_t max) {
    const uint32_t n = u32(field);
    if (n > max) {
      throw errors::protocol_error(std::string(field) + ": " + what + " " + std::to_string(n) + " exceeds the limit of " +
                                   std::to_string(max));
    }
    return n;
  }

  // A tensor (WireWriter::tensor_data), checked against the bytes present before allocating, so
  // a forged shape cannot make us allocate. `where` names it in errors ("tensor 3").
  // `target`, where given, gets the device the sender placed it on; a payload's tensors (null
  // target) are the cpu's, and one marked for a device is a protocol error.
  Tensor tensor_data(const std::string& where, uint32_t max_rank, Device* target = nullptr);

  // The field methods, mirroring WireWriter's.
  template <WireNumber T>
  void num(const char* field, T& v) {
    if constexpr (std::same_as<T, bool>) {
      const uint8_t b = u8(field);
      if (b > 1) throw errors::protocol_error(std::string(field) + ": " + std::to_string(b) + " is not 0 or 1");
      v = b == 1;
    } else if constexpr (std::same_as<T, double>) {
      v = f64(field);
    } else {
      v = static_cast<T>(get(sizeof(T), field));
    }
  }
  void str(const char* field, std::string& v, size_t max) {
    v = string(field, max);
    DAGSIM_ASSERT(v.size() <= max);  // paired with WireWriter::str's check
  }
  void blob(const char* field, Bytes& v, size_t max) {
    const uint32_t n = length(field, "length", max);
    const std::span<const uint8_t> b = bytes(n, field);
    v.assign(b.begin(), b.end());
    DAGSIM_ASSERT(v.size() == n && v.size() <= max);
  }
  void tensor(const char* field, Tensor& t) {
    t = tensor_data(field, kMaxPayloadRank);
    DAGSIM_ASSERT(t.defined() && static_cast<size_t>(t.dim()) <= kMaxPayloadRank);
  }
  void flags(const char* field, std::vector<bool>& v, size_t max) {
    const uint32_t n = count(field, max, 1);
    v.clear();
    for (uint32_t i = 0; i < n; ++i) {
      bool b = false;
      num(field, b);
      v.push_back(b);
    }
    DAGSIM_ASSERT(v.size() == n && n <= max);
  }
  template <typename T, typename Each>
  void list(const char* field, std::vector<T>& v, size_t max, Each each) {
    const uint32_t n = count(field, max, 1);
    v.clear();
    v.resize(n);  // at most one element per byte left: bounded by the frame
    for (T& e : v) each(e);
    DAGSIM_ASSERT(v.size() == n && n <= max);
  }
  template <typename Map, typename Each>
  void dict(const char* field, Map& m, size_t max, size_t max_key, Each each) {
    const uint32_t n = count(field, max, 4);
    m.clear();
    for (uint32_t i = 0; i < n; ++i) {
      std::string key = string(field, max_key);
      typename Map::mapped_type value{};
      each(value);
      if (!m.emplace(std::move(key), std::move(value)).second) {
        throw errors::protocol_error(std::string(field) + ": a key appears twice");
      }
    }
    DAGSIM_ASSERT(m.size() == n && n <= max);
  }

 private:
  // A count of elements that take at least `min_bytes` each: refused when they cannot fit.
  uint32_t count(const char* field, size_t max, size_t min_bytes) {
    const uint32_t n = length(field, "count", max);
    if (n > remaining() / min_bytes) {
      throw errors::protocol_error(std::string(field) + ": count " + std::to_string(n) + " cannot fit in " +
                                   std::to_string(remaining()) + " bytes (truncated or forged)");
    }
    // What the caller may now allocate is bounded by the bytes present (min_bytes each).
    DAGSIM_ASSERT(min_bytes > 0 && size_t{n} * min_bytes <= remaining());
    return n;
  }
  // On every field read: kept small so it inlines; the error is built out of line.
  void need(size_t n, const char* field) const {
    DAGSIM_ASSERT(pos_ <= in_.size());
    if (n > remaining()) [[unlikely]] truncated(n, field);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void truncated(size_t n, const char* field) const {
    throw errors::protocol_error(std::string(field) + ": needs " + std::to_string(n) + " bytes, " +
                                 std::to_string(remaining()) + " left (truncated)");
  }
  uint64_t get(size_t n, const char* field) {
    DAGSIM_ASSERT(n >= 1 && n <= 8);
    need(n, field);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += n;
    DAGSIM_ASSERT(pos_ <= in_.size());
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

// A payload struct (see the file comment): its name and its one layout description.
template <typename T>
concept WirePayload = requires(WireWriter& w, WireReader& r, T& m, const T& c) {
  { T::kName } -> std::convertible_to<const char*>;
  T::fields(w, c);
  T::fields(r, m);
};

inline constexpr size_t kTypicalPayloadBytes = 256;

template <WirePayload T>
Bytes to_bytes(const T& value) {
  // Most payloads are small: one allocation instead of the vector's growth steps.
  Bytes out;
  out.reserve(kTypicalPayloadBytes);
  WireWriter w(out);
  T::fields(w, value);
  return out;
}

// Throws protocol_error naming the field for a short, oversized or malformed payload, and for
// trailing bytes.
template <WirePayload T>
T from_bytes(std::span<const uint8_t> in) {
  WireReader r(in);
  T value{};
  T::fields(r, value);
  r.expect_end(T::kName);
  DAGSIM_ASSERT(r.remaining() == 0 && r.position() == in.size());  // the whole payload was read
  return value;
}

}  // namespace dagsim::rpc
