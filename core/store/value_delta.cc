#include "core/store/value_delta.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string.h>  // memmem (GNU)
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/rpc/wire.h"

namespace dagsim::store {

namespace {

constexpr uint8_t kCopyOp = 1;
constexpr uint8_t kAddOp = 2;
// The longest rewrite in place looked for at a mismatch (a heartbeat's time is 8 bytes).
constexpr size_t kResyncSide = 32;
// A run this long after a resync is taken as the true alignment without looking further.
constexpr size_t kLongRun = 64;
// A rewrite this short is taken after the insertions and deletions, whatever run follows it (a
// rank or a heartbeat, rewritten in every record).
constexpr size_t kShortRewrite = 8;

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
  // REQUIRES: both positions within their values (the callers' loops and lines_up check them).
  DAGSIM_ASSERT(i <= base.size());
  DAGSIM_ASSERT(j <= target.size());
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
    uint64_t x;
    uint64_t y;
    std::memcpy(&x, base.data() + i, 8);
    std::memcpy(&y, target.data() + j, 8);
    if (x != y) return false;
    return common_run(base, i, target, j) >= kMinCopy;
  }
  return left_base == left_target && std::memcmp(base.data() + i, target.data() + j, left_target) == 0;
}

// Whether the skip (a, b) lines up a long run: kLongRun bytes, or the rest of both values.
bool long_run(std::span<const uint8_t> base, size_t i, std::span<const uint8_t> target, size_t j) {
  if (!lines_up(base, i, target, j)) return false;
  const size_t run = common_run(base, i, target, j);
  return run >= kLongRun || (i + run == base.size() && j + run == target.size());
}

// The shortest skip d in [1, reach] of `hay` past `at` at which `needle`'s 8 bytes at `from`
// recur and line up a long run (`skip_in_target`: an insertion, else a deletion); memmem finds the
// recurrences, so a miss costs one vector scan, not `reach` compares.
std::optional<size_t> shortest_skip(std::span<const uint8_t> hay, size_t at, std::span<const uint8_t> needle,
                                    size_t from, bool skip_in_target, std::span<const uint8_t> base,
                                    std::span<const uint8_t> target, size_t i, size_t j, size_t reach) {
  if (from + 8 > needle.size() || at + 1 >= hay.size()) return std::nullopt;
  const uint8_t* const begin = hay.data() + at + 1;
  const uint8_t* const end = hay.data() + std::min(hay.size(), at + reach + 8);
  for (const uint8_t* p = begin; p + 8 <= end;) {
    const void* hit = memmem(p, static_cast<size_t>(end - p), needle.data() + from, 8);
    if (hit == nullptr) return std::nullopt;
    const size_t d = static_cast<size_t>(static_cast<const uint8_t*>(hit) - hay.data()) - at;
    if (skip_in_target ? long_run(base, i, target, j + d) : long_run(base, i + d, target, j)) return d;
    p = static_cast<const uint8_t*>(hit) + 1;
  }
  return std::nullopt;
}

// Where base[i..] and target[j..] line up again after a mismatch: a skip of `a` bytes in base and
// `b` in target, or nullopt. Records that look alike (sorted node names, numbers) line up for a
// few bytes at many wrong skips, and once a wrong one is taken every record after it mismatches
// too (at 1,000 nodes, searching on through such a cascade cost more than the rendezvous itself).
// So only the edits a store value sees are tried, the first two only where they line up a long
// run (kLongRun, or the rest of both):
//  1. a rewrite in place of up to kResyncSide bytes (a heartbeat);
//  2. a pure insertion or deletion of up to kMaxResync bytes (a record joined or left), the
//     shorter first;
//  3. a rewrite of up to kShortRewrite bytes, however short the run after it (every rank of a
//     round assigned at once).
// Anything else ends the search: the rest of the value goes literally.
std::optional<std::pair<size_t, size_t>> resync(std::span<const uint8_t> base, size_t i, std::span<const uint8_t> target,
                                                size_t j) {
  for (size_t s = 1; s <= kResyncSide; ++s) {
    if (long_run(base, i + s, target, j + s)) return std::pair{s, s};
  }
  const std::optional<size_t> inserted = shortest_skip(target, j, base, i, true, base, target, i, j, kMaxResync);
  const std::optional<size_t> deleted = shortest_skip(base, i, target, j, false, base, target, i, j, kMaxResync);
  if (inserted && (!deleted || *inserted <= *deleted)) return std::pair{size_t{0}, *inserted};
  if (deleted) return std::pair{*deleted, size_t{0}};
  for (size_t s = 1; s <= kShortRewrite; ++s) {
    if (lines_up(base, i + s, target, j + s)) return std::pair{s, s};
  }
  return std::nullopt;
}

}  // namespace

std::optional<runtime::Bytes> make_delta(std::span<const uint8_t> base, std::span<const uint8_t> target,
                                         size_t max_size) {
  runtime::Bytes out;
  put_varint(out, target.size());
  size_t i = 0;          // in base
  size_t j = 0;          // in target
  size_t literal = 0;    // target[literal, j) is owed as an add op
  size_t copied_to = 0;  // where the last copy ended in base
  auto flush = [&](size_t end) {
    DAGSIM_ASSERT(literal <= end);  // literal bytes are owed from behind the cursor, never ahead
    if (end == literal) return;
    out.push_back(kAddOp);
    put_varint(out, end - literal);
    out.insert(out.end(), target.begin() + static_cast<ptrdiff_t>(literal), target.begin() + static_cast<ptrdiff_t>(end));
  };
  while (j < target.size() && i < base.size()) {
    // Bytes still owed count too: a delta that cannot come in under max_size stops early.
    if (out.size() + (j - literal) > max_size) return std::nullopt;
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
    // A resync always moves forward (else the loop would spin on one mismatch).
    DAGSIM_ASSERT(skip->first + skip->second > 0);
    i += skip->first;
    j += skip->second;
  }
  flush(target.size());
  if (out.size() > max_size) return std::nullopt;
  // Every byte of the target is covered: by copies up to `literal`, then by the last add.
  DAGSIM_ASSERT(j <= target.size());
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
