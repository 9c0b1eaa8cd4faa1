// Globally unique ids for autograd contexts, messages and RRefs, as PyTorch builds them:
// `worker_id << 48 | counter`. PyTorch's counter restarts at 0 when a process restarts, so a
// restarted worker can reuse an id its earlier life handed out; ours cannot (DESIGN.md, delivery
// contract): the counter's high 16 bits are the node's incarnation, the low 32 its sequence.
//
//   63        48 47          32 31                   0
//   | worker_id | incarnation  |      sequence        |
#pragma once

#include <cstdint>
#include <optional>

#include <string>

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim {

using WorkerId = uint16_t;

constexpr int kWorkerIdShift = 48;
// The largest incarnation ids carry; a transport refuses a peer that claims more.
inline constexpr uint32_t kMaxIncarnation = UINT16_MAX;
constexpr int kIncarnationShift = 32;
constexpr uint64_t kCounterMask = (uint64_t{1} << kWorkerIdShift) - 1;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kIncarnationShift) - 1;

inline constexpr uint64_t make_global_id(WorkerId worker, uint64_t counter) {
  return (uint64_t{worker} << kWorkerIdShift) | (counter & kCounterMask);
}
inline constexpr WorkerId worker_of(uint64_t id) { return static_cast<WorkerId>(id >> kWorkerIdShift); }
inline constexpr uint16_t incarnation_of(uint64_t id) {
  return static_cast<uint16_t>((id & kCounterMask) >> kIncarnationShift);
}
inline constexpr uint32_t sequence_of(uint64_t id) { return static_cast<uint32_t>(id & kSequenceMask); }
// An id as messages print it, short: "WORKER:SEQUENCE" ("1:218" for 281474976710874), with the
// incarnation when it is not the first ("1:218 (life 3)").
inline std::string short_id(uint64_t id) {
  std::string out = std::to_string(worker_of(id)) + ":" + std::to_string(sequence_of(id));
  if (incarnation_of(id) != 0) out += " (life " + std::to_string(incarnation_of(id) + 1) + ")";
  return out;
}

// Hands out ids for one incarnation of one worker. Not shared between fibers of different nodes.
class IdGenerator {
 public:
  IdGenerator(WorkerId worker, uint16_t incarnation) : worker_(worker), incarnation_(incarnation) {}

  // Throws overloaded once 2^32 - 1 ids were drawn in this incarnation (a peer's traffic can draw
  // them: every served autograd call takes a message id; about 6 hours at 200,000 a second).
  uint64_t next() {
    if (sequence_ >= kSequenceMask) {
      throw errors::overloaded("node " + std::to_string(worker_) + " has used all 2^32 - 1 ids of this life; restart it");
    }
    ++sequence_;
    return make_global_id(worker_, (uint64_t{incarnation_} << kIncarnationShift) | sequence_);
  }

  WorkerId worker() const { return worker_; }
  uint16_t incarnation() const { return incarnation_; }

 private:
  WorkerId worker_;
  uint16_t incarnation_;
  uint64_t sequence_ = 0;  // 0 is never handed out, so an id of 0 means "none"
};

// Request ids of one life of one node: its incarnation in the high 16 bits and a 48-bit sequence
// below, so a node runs out only after 2^48 - 1 requests in one life (89 years at 100,000 a
// second). The worker id is not in them: a reply is matched only against the requests this node
// has pending, which names their target, and the incarnation tells a reply meant for an earlier
// life. Request ids are not global ids (worker_of and incarnation_of do not apply).
class RequestIds {
 public:
  static constexpr int kIncarnationShift = 48;
  static constexpr uint64_t kSequenceMask = (uint64_t{1} << kIncarnationShift) - 1;

  // `first` (tests only) starts the sequence further on, to show what happens near its end.
  explicit RequestIds(uint16_t incarnation, uint64_t first = 1) : incarnation_(incarnation), next_(first) {
    DAGSIM_ASSERT(first >= 1 && first <= kSequenceMask);
  }

  // The next id, or nullopt once the sequence is spent (the caller says so in an error).
  std::optional<uint64_t> next() {
    if (next_ > kSequenceMask) return std::nullopt;
    return (uint64_t{incarnation_} << kIncarnationShift) | next_++;
  }
  // Whether `id` is one this life could have handed out (a reply's id, off the wire).
  bool is_ours(uint64_t id) const {
    const uint64_t sequence = id & kSequenceMask;
    return id >> kIncarnationShift == incarnation_ && sequence != 0 && sequence < next_;
  }

 private:
  uint16_t incarnation_;
  uint64_t next_;  // 0 is never handed out, so a request id of 0 means "none"
};

}  // namespace dagsim
