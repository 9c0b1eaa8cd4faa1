// Globally unique ids for autograd contexts, messages and RRefs, as PyTorch builds them:
// `worker_id << 48 | counter`. PyTorch's counter restarts at 0 when a process restarts, so a
// restarted worker can reuse an id its earlier life handed out; ours cannot (DESIGN.md, delivery
// contract): the counter's high 16 bits are the node's incarnation, the low 32 its sequence.
//
//   63        48 47          32 31                   0
//   | worker_id | incarnation  |      sequence        |
#pragma once

#include <cstdint>

#include "core/base/assert.h"

namespace dagsim {

using WorkerId = uint16_t;

constexpr int kWorkerIdShift = 48;
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

// Hands out ids for one incarnation of one worker. Not shared between fibers of different nodes.
class IdGenerator {
 public:
  IdGenerator(WorkerId worker, uint16_t incarnation) : worker_(worker), incarnation_(incarnation) {}

  // REQUIRES: fewer than 2^32 - 1 ids drawn in this incarnation.
  uint64_t next() {
    DAGSIM_ASSERT_MSG(sequence_ < kSequenceMask, "id sequence exhausted for this incarnation");
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

}  // namespace dagsim
