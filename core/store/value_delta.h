// Value deltas: a store value told as the edits that turn an older value of the same key into it,
// so a client that already holds the older one receives only what changed (issue 25 item 4).
//
// A rendezvous state at 1,000 nodes is about 100 KB, and every waiter woken by a join, every
// joiner that loses a compare-and-set and every read after a back-off used to receive all of it:
// 2.4 GB of replies to form one round. A join changes two records of it; a heartbeat eight bytes.
// The store keeps a few older values of each key (KeyValueTable's history); a request names the
// version whose bytes the client holds, and the reply may be a delta against it.
//
// The format: the result's length, then ops until the end, each a u8 tag:
//   1 copy: offset, length: that range of the base, the offset told as the signed distance from
//           where the previous copy ended (0 at first), zigzag-coded;
//   2 add:  length, then that many bytes.
// Numbers are LEB128 varints (7 bits a byte, low first): most are under 128.
// apply_delta() trusts nothing: a range past the base, a length past the delta, ops that do not
// add up to the stated length or a result over the caller's limit throw protocol_error naming
// the field; nothing is allocated beyond the stated length, itself bounded first.
//
// make_delta() is generic (any bytes) and greedy, at memory speed: it copies the longest run the
// base has at its current position, and at a mismatch looks for where the two line up again: a
// rewrite in place, or an insertion or deletion of up to kMaxResync bytes (resync() in the .cc
// says in which order and why). Other edits, and bytes with no such structure, end the search and
// go as literal bytes, so the delta is never much longer than the value itself (the store then
// sends the value instead). The output is a pure function of the two inputs (deterministic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "core/runtime/transport.h"

namespace dagsim::store {

// Values shorter than this are always sent whole: a delta would save too little to pay for itself.
inline constexpr size_t kMinDeltaBytes = 256;
// The farthest make_delta() looks ahead, in either value, to line the two up after a mismatch.
inline constexpr size_t kMaxResync = 256;
// The shortest run of equal bytes make_delta() copies instead of repeating it literally.
inline constexpr size_t kMinCopy = 16;

// The edits that turn `base` into `target`; nullopt as soon as they are seen to take more than
// `max_size` bytes (the caller sends the value instead, and no time goes into the rest).
std::optional<runtime::Bytes> make_delta(std::span<const uint8_t> base, std::span<const uint8_t> target,
                                         size_t max_size = SIZE_MAX);

// `base` with `delta` applied. Throws protocol_error ("store delta: ...") for a delta that does
// not fit `base` or would build more than `max_length` bytes.
runtime::Bytes apply_delta(std::span<const uint8_t> base, std::span<const uint8_t> delta, size_t max_length);

}  // namespace dagsim::store
