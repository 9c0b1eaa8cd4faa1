#include "core/store/value_delta.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "core/base/error.h"
#include "core/rpc/wire.h"

namespace dagsim::store {

namespace {

constexpr uint8_t kCopyOp = 1;
constexpr uint8_t kAddOp = 2;
// At a mismatch, resync candidates take at most this many bytes off the shorter side: an
// insertion or deletion of up to kMaxResync bytes with up to this much replaced around it.
constexpr size_t kResyncSide = 32;
// A run this long after a resync is taken as the true alignment without looking further.
constexpr size_t kLongRun = 64;

// LEB128: 7 bits a byte, low first; a delta is mostly small numbers.
void put_varint(runtime::Bytes& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<uint8_t>(v | 0x80));
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t get_varint(rpc::WireReader& r, const char* field) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    const uint8_t byte = r.u8(field);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  throw errors::protocol_error(std::string(field) + ": a number longer than ten bytes");
}

// Copy offsets are told relative to where the last copy ended: mostly 0 or a record's length.
uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// How many bytes base[i..] and target[j..] have in common from the start; 8 at a time.
size_t common_run(std::span<const uint8_t> base, size_t i, std::span<const uint8_t> target, size_t j) {
  const size_t n = std::min(base.size() - i, target.size() - j);
  const uint8_t* a = base.data() + i;
  const uint8_t* b = target.data() + j;
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    uint64_t x;
    uint64_t y;
    std::memcpy(&x, a + k, 8);
    std::memcpy(&y, b + k, 8);
    if (x == y) continue;
    // The first differing byte in memory order is the lowest on a little-endian host.
    if constexpr (std::endian::native == std::endian::little) return k + std::countr_zero(x ^ y) / 8;
    break;
  }
  while (k < n && a[k] == b[k]) ++k;
  return k;
}

// Whether base[i..] and target[j..] agree for kMinCopy bytes, or to the end of both.
bool lines_up(std::span<const uint8_t> base, size_t i, std::span<const uint8_t> target, size_t j) {
  if (i >= base.size() || j >= target.size()) return false;
  const size_t left_base = base.size() - i;
  const size_t left_target = target.size() - j;
  if (left_base >= kMinCopy && left_target >= kMinCopy) {
    // Most candidates differ in their first bytes: one compare rejects them.
    if (std::memcmp(base.data() + i, target.data() + j, 8) != 0) return false;
    return common_run(base, i, target, j) >= kMinCopy;
  }
  return left_base == left_target && std::memcmp(base.data() + i, target.data() + j, left_target) == 0;
}

// Where base[i..] and target[j..] line up again after a mismatch: a skip of `a` bytes in base and
// `b` in target, or nullopt within kMaxResync. The smallest skip (a + b, then the shorter side)
// is taken unless the run it lines up is short and a pure insertion or deletion lines up a run
// at least twice as long: records that look alike (sorted node names, numbers) line up a record
// early after an insertion, for a few bytes, where skipping the inserted record lines up all the
// rest.
std::optional<std::pair<size_t, size_t>> resync(std::span<const uint8_t> base, size_t i, std::span<const uint8_t> target,
                                                size_t j) {
  std::optional<std::pair<size_t, size_t>> best;
  for (size_t t = 1; t <= kMaxResync && !best; ++t) {
    for (size_t small = 0; small <= std::min(t, kResyncSide) && !best; ++small) {
      if (lines_up(base, i + small, target, j + (t - small))) {
        best = std::pair{small, t - small};
      } else if (lines_up(base, i + (t - small), target, j + small)) {
        best = std::pair{t - small, small};
      }
    }
  }
  if (!best) return std::nullopt;
  auto run_after = [&](size_t a, size_t b) { return common_run(base, i + a, target, j + b); };
  size_t best_run = run_after(best->first, best->second);
  if (best_run >= kLongRun) return best;
  for (size_t d = 1; d <= kMaxResync; ++d) {
    for (const auto& [a, b] : {std::pair{size_t{0}, d}, std::pair{d, size_t{0}}}) {
      if (!lines_up(base, i + a, target, j + b)) continue;
      const size_t run = run_after(a, b);
      if (run >= 2 * best_run) {
        best = std::pair{a, b};
        best_run = run;
      }
    }
  }
  return best;
}

}  // namespace

runtime::Bytes make_delta(std::span<const uint8_t> base, std::span<const uint8_t> target) {
  runtime::Bytes out;
  put_varint(out, target.size());
  size_t i = 0;          // in base
  size_t j = 0;          // in target
  size_t literal = 0;    // target[literal, j) is owed as an add op
  size_t copied_to = 0;  // where the last copy ended in base
  auto flush = [&](size_t end) {
    if (end == literal) return;
    out.push_back(kAddOp);
    put_varint(out, end - literal);
    out.insert(out.end(), target.begin() + static_cast<ptrdiff_t>(literal), target.begin() + static_cast<ptrdiff_t>(end));
  };
  while (j < target.size() && i < base.size()) {
    const size_t run = common_run(base, i, target, j);
    if (run >= kMinCopy || (run > 0 && j + run == target.size())) {
      flush(j);
      out.push_back(kCopyOp);
      put_varint(out, zigzag(static_cast<int64_t>(i) - static_cast<int64_t>(copied_to)));
      put_varint(out, run);
      i += run;
      j += run;
      literal = j;
      copied_to = i;
      continue;
    }
    const auto skip = resync(base, i, target, j);
    if (!skip) break;  // no structure within reach: the rest goes literally
    i += skip->first;
    j += skip->second;
  }
  flush(target.size());
  return out;
}

runtime::Bytes apply_delta(std::span<const uint8_t> base, std::span<const uint8_t> delta, size_t max_length) {
  rpc::WireReader r(delta);
  const uint64_t length = get_varint(r, "store delta.length");
  if (length > max_length) {
    throw errors::protocol_error("store delta.length: " + std::to_string(length) + " bytes exceeds the limit of " +
                                 std::to_string(max_length));
  }
  runtime::Bytes out;
  out.reserve(length);
  auto room = [&](uint64_t n, const char* field) {
    if (n > length - out.size()) {
      throw errors::protocol_error(std::string(field) + ": " + std::to_string(n) + " bytes past the stated " +
                                   std::to_string(length) + " (" + std::to_string(out.size()) + " built)");
    }
  };
  uint64_t copied_to = 0;
  while (r.remaining() > 0) {
    const uint8_t op = r.u8("store delta.op");
    if (op == kCopyOp) {
      // Computed in 128 bits: a forged offset cannot wrap around into the base.
      const __int128 offset = static_cast<__int128>(copied_to) + unzigzag(get_varint(r, "store delta.copy.offset"));
      const uint64_t n = get_varint(r, "store delta.copy.length");
      if (offset < 0 || offset + n > base.size()) {
        throw errors::protocol_error("store delta.copy: bytes " + std::to_string(static_cast<int64_t>(offset)) + "+" +
                                     std::to_string(n) + " of a base of " + std::to_string(base.size()));
      }
      room(n, "store delta.copy.length");
      const auto from = base.begin() + static_cast<ptrdiff_t>(offset);
      out.insert(out.end(), from, from + static_cast<ptrdiff_t>(n));
      copied_to = static_cast<uint64_t>(offset) + n;
    } else if (op == kAddOp) {
      const uint64_t n = get_varint(r, "store delta.add.length");
      room(n, "store delta.add.length");
      const std::span<const uint8_t> bytes = r.bytes(static_cast<size_t>(n), "store delta.add.bytes");
      out.insert(out.end(), bytes.begin(), bytes.end());
    } else {
      throw errors::protocol_error("store delta.op: " + std::to_string(op) + " is neither copy (1) nor add (2)");
    }
  }
  if (out.size() != length) {
    throw errors::protocol_error("store delta: the ops build " + std::to_string(out.size()) + " bytes, " +
                                 std::to_string(length) + " stated");
  }
  return out;
}

}  // namespace dagsim::store
