// Clock: virtual or real time, the first part of the Env seam (DESIGN.md, "The seam").
//
// Core code reads time only through a Clock and waits only through the runtime primitives, which
// arm Clock timers for their deadlines. Boost.Fiber's own timed waits read the real steady_clock
// and are never used. In the simulator time is virtual and moves only when every fiber is blocked.
//
// Note [two times]: a Clock has two readings, and each use takes one.
//  - now(): local and monotonic, for timeouts, deadlines, intervals and everything a node measures
//    for itself. Never compared with another node's now(). Sim: the node's host clock (world time
//    with its skew and drift); LocalRuntime: virtual time; TCP: steady_clock.
//  - wall_now(): comparable across nodes (up to their clock error), for timestamps written for
//    other nodes to read, such as heartbeats in a store or the last-seen time of a rendezvous
//    participant. Not monotonic in a real runtime (NTP steps it), so never a deadline.
//    Sim: world time plus the node's skew and drift (so two nodes differ by exactly their skews,
//    and drift × elapsed); LocalRuntime: its virtual time; TCP: system_clock since the Unix epoch.
//
// Threading: now() and wall_now() may be read anywhere on the node's thread. call_at and cancel
// are called from the node's fibers (and the runtime's driver). `fire` runs on the node's thread,
// outside any node fiber, and only wakes waiters: it sets a flag under the waiter's mutex and
// notifies (see Note [wake-ups under the lock] in wait.h); it never blocks, spawns, sends or
// completes promises (whose continuations would spawn fibers from the driver). cancel(id), once
// returned, guarantees `fire` is not running and never will, so a callback may capture a waiter
// that disarms it with cancel before it goes away.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace dagsim::runtime {

using Duration = std::chrono::nanoseconds;

// A point on a Clock's time line: now()'s (local) or wall_now()'s (shared); see Note [two times].
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

  // Local, monotonic time: for deadlines and timeouts (Note [two times]).
  virtual TimePoint now() const = 0;
  // Time comparable across nodes: for timestamps other nodes read (Note [two times]). Its epoch
  // is the runtime's (the simulated world's start, the Unix epoch), not now()'s.
  virtual TimePoint wall_now() const = 0;

  // Calls `fire` once, at or after `deadline` (now()'s time line). `fire` runs outside any node
  // fiber (in the simulator, on the driver) and must not block: it may only wake waiters. Returns
  // an id for cancel(). A deadline in the past fires at the next opportunity.
  virtual TimerId call_at(TimePoint deadline, std::function<void()> fire) = 0;

  // Cancels a timer that has not fired; a no-op for one that fired or was cancelled.
  virtual void cancel(TimerId id) = 0;

  // Blocks the calling fiber until `deadline` on now()'s time line (throws node_killed if its node
  // dies meanwhile, `cancelled` if the scope of the wait is cancelled).
  void sleep_until(TimePoint deadline);
  void sleep(Duration d) { sleep_until(now() + d); }
};

}  // namespace dagsim::runtime
