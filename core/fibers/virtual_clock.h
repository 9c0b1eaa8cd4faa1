// VirtualClock: virtual time and the timer queue of a runtime (LocalRuntime, the simulator's
// SimWorld). Time moves only when the runtime's driver fires the next timer, which it does only
// when every fiber is blocked, so simulated hours pass in microseconds of real time.
//
// Promises: timers fire in (deadline, arm order) order, so equal deadlines replay in the order
// they were armed; a deadline in the past fires at the current time, never earlier; cancel is
// O(1) and a no-op for a timer that fired or was cancelled.
//
// The queue is two sorted structures over (deadline, sequence), with the callbacks in a slab of
// slots. A timer whose deadline is no earlier than the last one armed there joins `run_`, a FIFO
// that is sorted by construction (deadlines non-decreasing, sequences increasing): with constant
// latency every message timer lands there, in O(1). Any other timer goes to a binary heap. The
// next timer is the smaller of the two fronts, so the order is exactly (deadline, arm order)
// either way. A timer id carries its sequence number and its slot, so cancel frees the slot at
// once and leaves a stale entry that is skipped when it surfaces (and swept when stale entries
// outnumber live ones), which keeps arm, fire and cancel free of tree rebalancing.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/runtime/clock.h"

namespace dagsim::fibers {

using runtime::Clock;
using runtime::Duration;
using runtime::TimePoint;
using runtime::TimerId;

class VirtualClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  // One time line for every node of the runtime: virtual time is shared, so it is also wall time.
  TimePoint wall_now() const override { return now_; }
  TimerId call_at(TimePoint deadline, std::function<void()> fire) override;
  void cancel(TimerId id) override;

  bool has_timers() const { return live_ > 0; }
  // REQUIRES: has_timers().
  TimePoint next_deadline();
  // Moves time to the earliest timer and fires it. REQUIRES: has_timers().
  void fire_next();
  // Moves time forward to `t` without firing anything (a run that stops at a time limit).
  // REQUIRES: t >= now() and no timer is due before t.
  void advance_to(TimePoint t);
  // The id of the timer whose function is running (0 outside fire_next).
  TimerId firing_id() const { return firing_; }

 private:
  static constexpr int kSlotBits = 24;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;

  struct Entry {
    TimePoint at;
    TimerId id;  // (sequence << kSlotBits) | slot: ordering ids orders by sequence
  };
  struct Slot {
    TimerId id = 0;  // 0: free
    std::function<void()> fire;
  };
  // Min-heap order: earliest deadline, then earliest armed.
  static bool later(const Entry& a, const Entry& b) { return a.at != b.at ? a.at > b.at : a.id > b.id; }
  bool stale(const Entry& e) const { return slots_[e.id & kSlotMask].id != e.id; }
  bool run_empty() const { return run_head_ == run_.size(); }
  void run_pop_front();
  // Pops stale entries off the fronts of the heap and the run.
  void skip_stale();
  // The earliest live entry is at the run's front (else at the heap's top). REQUIRES: live_ > 0,
  // skip_stale() done.
  bool next_in_run() const;
  void sweep();

  TimePoint now_;
  uint64_t next_sequence_ = 0;
  TimerId firing_ = 0;
  size_t live_ = 0;
  std::vector<Entry> heap_;
  // sorted: each entry armed no earlier than the one before. A vector read from run_head_: popping
  // the front is an index bump, and the vector is emptied (keeping its buffer) whenever the run is
  // drained, or its consumed prefix dropped once it outgrows the rest.
  std::vector<Entry> run_;
  size_t run_head_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace dagsim::fibers
