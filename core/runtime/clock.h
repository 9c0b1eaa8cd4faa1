// Clock: virtual or real time, the first part of the Env seam (DESIGN.md, "The seam").
//
// Core code reads time only through a Clock and waits only through the runtime primitives, which
// arm Clock timers for their deadlines. Boost.Fiber's own timed waits read the real steady_clock
// and are never used. In the simulator time is virtual and moves only when every fiber is blocked.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace dagsim::runtime {

using Duration = std::chrono::nanoseconds;

// A point on a Clock's own time line (virtual time since the world started, or steady time).
struct TimePoint {
  Duration since_epoch{0};

  static constexpr TimePoint max() { return TimePoint{Duration::max()}; }
  friend constexpr auto operator<=>(TimePoint, TimePoint) = default;
  friend constexpr TimePoint operator+(TimePoint t, Duration d) {
    // Saturates, so `now() + a long timeout` never overflows into the past.
    if (d > Duration::zero() && t.since_epoch > Duration::max() - d) return max();
    return TimePoint{t.since_epoch + d};
  }
  friend constexpr Duration operator-(TimePoint a, TimePoint b) { return a.since_epoch - b.since_epoch; }
  // May go before the epoch (a look-back window near the start of a run); max() stays max().
  friend constexpr TimePoint operator-(TimePoint t, Duration d) {
    if (t == max()) return t;
    return TimePoint{t.since_epoch - d};
  }
  int64_t ns() const { return since_epoch.count(); }
};

using TimerId = uint64_t;

class Clock {
 public:
  virtual ~Clock() = default;

  virtual TimePoint now() const = 0;

  // Calls `fire` once, at or after `deadline`. `fire` runs outside any node fiber (in the
  // simulator, on the driver) and must not block: it may only wake waiters. Returns an id for
  // cancel(). A deadline in the past fires at the next opportunity.
  virtual TimerId call_at(TimePoint deadline, std::function<void()> fire) = 0;

  // Cancels a timer that has not fired; a no-op for one that fired or was cancelled.
  virtual void cancel(TimerId id) = 0;

  // Blocks the calling fiber until `deadline` (throws node_killed if its node dies meanwhile).
  void sleep_until(TimePoint deadline);
  void sleep(Duration d) { sleep_until(now() + d); }
};

}  // namespace dagsim::runtime
