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
// outnumber live ones), which keeps arm, fire and cancel free of tree rebalancing. A posted timer
// (post_at: never cancelled) keeps a plain function and two words in its slot, no std::function.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/ring_queue.h"

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
  // A timer that is never cancelled, whose action is a plain function of two words, called as
  // action(context, argument): nothing to build, move or destroy, for the simulator's per-message
  // events. Same order rules as call_at.
  using RawAction = void (*)(void* context, uint64_t argument);
  void post_at(TimePoint deadline, RawAction action, void* context, uint64_t argument);
  void cancel(TimerId id) override;

  bool has_timers() const { return live_ > 0; }
  // REQUIRES: has_timers().
  TimePoint next_deadline();
  // Moves time to the earliest timer and fires it. REQUIRES: has_timers().
  void fire_next();
  // Fires the earliest timer if it is due at `instant` and returns whether it did: a driver that
  // drains one instant looks at the queue once per timer, not twice. REQUIRES: instant >= now().
  bool fire_next_at(TimePoint instant);
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
  // Entries stay 16 bytes (the heap sifts them), so a posted timer's action lives in its slot.
  struct Slot {
    TimerId id = 0;  // 0: free
    RawAction raw = nullptr;  // set: a posted timer, raw(context, argument); `fire` is empty
    void* context = nullptr;
    uint64_t argument = 0;
    std::function<void()> fire;
  };
  // Takes a free slot for a new timer and returns its id; the caller fills the slot's action.
  TimerId take_slot(uint32_t& slot);
  // Queues `entry` (its `at` not yet clamped to now) and counts it live.
  void enqueue(Entry entry);
  // Min-heap order: earliest deadline, then earliest armed.
  static bool later(const Entry& a, const Entry& b) { return a.at != b.at ? a.at > b.at : a.id > b.id; }
  bool stale(const Entry& e) const { return slots_[e.id & kSlotMask].id != e.id; }
  bool run_empty() const { return run_.empty(); }
  // Pops stale entries off the fronts of the heap and the run.
  void skip_stale();
  // The earliest live entry is at the run's front (else at the heap's top). REQUIRES: live_ > 0,
  // skip_stale() done.
  bool next_in_run() const;
  void sweep();
  // Takes the earliest live entry off its queue. REQUIRES: live_ > 0, skip_stale() done.
  Entry pop_next();
  // Moves time to `entry` and runs its action.
  void fire(const Entry& entry);

  TimePoint now_;
  uint64_t next_sequence_ = 0;
  TimerId firing_ = 0;
  size_t live_ = 0;
  std::vector<Entry> heap_;
  // sorted: each entry armed no earlier than the one before. A ring: push and pop move nothing
  // else and, once it has grown to the high-water mark, allocate nothing.
  runtime::RingQueue<Entry> run_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace dagsim::fibers
