// block_until: the one place a fiber blocks. Every runtime primitive (Event, Future, Channel,
// Mutex, Clock::sleep_until) waits through it, so all of them time out through the Clock, and all
// of them unwind with node_killed when the fiber's node dies, or with `cancelled` when the scope
// the wait belongs to is cancelled (cancel_scope.h; DESIGN.md, "Blocking, errors and
// cancellation"). It uses only Boost.Fiber's untimed condition_variable::wait: a deadline is a
// Clock timer that wakes the waiter, never a Boost timed wait (those read the real clock).
#pragma once

#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "core/base/open_op_scope.h"
#include "core/runtime/clock.h"
#include "core/runtime/fiber_context.h"

namespace dagsim::runtime {

using FiberMutex = boost::fibers::mutex;
using FiberCondition = boost::fibers::condition_variable;
using FiberLock = std::unique_lock<FiberMutex>;

// Arms the wake-ups of one wait: a Clock timer for the deadline and a cancel hook on the fiber's
// current scope (whose cancellation, or the node's death, ends the wait). Disarmed on destruction.
//
// Note [wake-ups under the lock]: a timer callback or a cancel sets its flag while holding the
// mutex the waiter reads it under (the one `lock` holds), then notifies. A waiter checks the flags
// under that mutex before cv.wait releases it, so a wake-up can never fall between the check and
// the wait, whichever thread the wake-up runs on. The wake-up may have to wait for the mutex (a
// fiber inside the primitive); never for long, as nobody suspends holding a primitive's mutex
// except in cv.wait, which releases it (the primitives run no user code under it). In the
// simulator the mutex is always free when the driver fires a timer. The callbacks capture the
// guard: Clock::cancel and unregister_waiter, called on the node's thread (clock.h, spawner.h),
// guarantee that neither runs after the guard is gone.
class WaitGuard {
 public:
  // REQUIRES: `lock` owns the mutex the waiter's predicate reads under.
  WaitGuard(FiberLock& lock, FiberCondition& cv, std::optional<TimePoint> deadline, const char* what);
  ~WaitGuard();
  WaitGuard(const WaitGuard&) = delete;
  WaitGuard& operator=(const WaitGuard&) = delete;

  // REQUIRES (both): the caller holds the lock.
  bool timed_out() const { return timed_out_; }
  // Throws node_killed when the fiber's node died, `cancelled` when only its scope was cancelled.
  void throw_if_cancelled() const;

 private:
  // Sets `flag` under the wait's mutex and wakes the waiter (see Note [wake-ups under the lock]).
  void wake(bool& flag);

  FiberMutex& mutex_;
  FiberCondition& cv_;
  FiberContext* self_;
  const char* previous_what_ = nullptr;
  Clock* clock_ = nullptr;
  TimerId timer_ = 0;
  ScopeState* scope_ = nullptr;
  detail::StepOutOfScopes op_scopes_;  // while the fiber is away (core/base/open_op_scope.h)
  uint64_t cancel_token_ = 0;
  bool timed_out_ = false;
  bool cancelled_ = false;
};

// How many fibers of this OS thread are blocked in block_until right now. A runtime at
// quiescence compares it with its live fibers: any difference is a fiber blocked outside the
// primitives (a Boost timed wait, which would wake on real time), and that is a bug.
size_t fibers_blocked_in_primitives();

// Asserts, at a runtime's quiescent point, that all `live_fibers` are blocked in the primitives;
// `stuck_report` is called only on failure, to name them.
void assert_quiescent(size_t live_fibers, const std::function<std::string()>& stuck_report);

// Throws node_killed if the running fiber's node is dead, `cancelled` if only its current scope
// was cancelled. Primitives call it on entry, so a cancelled fiber stops at its next blocking
// point even when it would not have to wait.
void throw_if_cancelled();

// Blocks until `ready()` holds (true), or `deadline` passes first (false).
// Throws node_killed when the fiber's node dies meanwhile, `cancelled` when its scope is cancelled.
// REQUIRES: `lock` holds the mutex `ready()` reads under; `what` is a string literal.
template <typename Pred>
bool block_until(FiberCondition& cv, FiberLock& lock, Pred ready, std::optional<TimePoint> deadline,
                 const char* what) {
  throw_if_cancelled();
  if (ready()) return true;
  WaitGuard guard(lock, cv, deadline, what);
  while (!ready()) {
    guard.throw_if_cancelled();
    if (guard.timed_out()) return false;
    const detail::FiberSwitch away;
    cv.wait(lock);
    away.resumed();
  }
  // A cancellation and a wake-up in the same instant (a kill also closes the node's inbox):
  // cancellation wins, so the fiber unwinds instead of acting on what it was waiting for.
  guard.throw_if_cancelled();
  return true;
}

}  // namespace dagsim::runtime
