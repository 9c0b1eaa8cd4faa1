// VirtualClock: virtual time and the timer queue of a runtime (LocalRuntime, the simulator's
// SimWorld). Time moves only when the runtime's driver fires the next timer, which it does only
// when every fiber is blocked, so simulated hours pass in microseconds of real time.
//
// Promises: timers fire in (deadline, arm order) order, so equal deadlines replay in the order
// they were armed; a deadline in the past fires at the current time, never earlier; cancel is
// O(log n) and a no-op for a timer that fired or was cancelled.
#pragma once

#include <functional>
#include <map>
#include <utility>

#include "core/runtime/clock.h"

namespace dagsim::runtime {

class VirtualClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  TimerId call_at(TimePoint deadline, std::function<void()> fire) override;
  void cancel(TimerId id) override;

  bool has_timers() const { return !queue_.empty(); }
  size_t pending_timers() const { return queue_.size(); }
  TimePoint next_deadline() const;
  // Moves time to the earliest timer and fires it. REQUIRES: has_timers().
  void fire_next();
  // Moves time forward to `t` without firing anything (a run that stops at a time limit).
  // REQUIRES: t >= now() and no timer is due before t.
  void advance_to(TimePoint t);
  // The id of the timer whose function is running (0 outside fire_next).
  TimerId firing_id() const { return firing_; }

 private:
  TimePoint now_;
  TimerId next_id_ = 0;
  TimerId firing_ = 0;
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> queue_;
  std::map<TimerId, TimePoint> deadlines_;
};

}  // namespace dagsim::runtime
