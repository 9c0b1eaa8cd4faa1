// block_until: the one place a fiber blocks. Every runtime primitive (Event, Future, Channel,
// Mutex, Clock::sleep_until) waits through it, so all of them time out through the Clock, and all
// of them unwind with node_killed when the fiber's node dies (DESIGN.md, "Blocking, errors and
// cancellation"). It uses only Boost.Fiber's untimed condition_variable::wait: a deadline is a
// Clock timer that wakes the waiter, never a Boost timed wait (those read the real clock).
#pragma once

#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "core/runtime/clock.h"
#include "core/runtime/fiber_context.h"

namespace dagsim::runtime {

using FiberMutex = boost::fibers::mutex;
using FiberCondition = boost::fibers::condition_variable;
using FiberLock = std::unique_lock<FiberMutex>;

// Arms the wake-ups of one wait: a Clock timer for the deadline and a kill hook on the node.
// Both only set a flag and notify `cv`. Disarmed on destruction.
class WaitGuard {
 public:
  WaitGuard(FiberCondition& cv, std::optional<TimePoint> deadline, const char* what);
  ~WaitGuard();
  WaitGuard(const WaitGuard&) = delete;
  WaitGuard& operator=(const WaitGuard&) = delete;

  bool timed_out() const { return timed_out_; }
  // Throws node_killed when the fiber's node died.
  void throw_if_killed() const;

 private:
  FiberCondition& cv_;
  FiberContext* self_;
  const char* previous_what_ = nullptr;
  Clock* clock_ = nullptr;
  TimerId timer_ = 0;
  uint64_t kill_token_ = 0;
  bool timed_out_ = false;
  bool killed_ = false;
};

// How many fibers of this OS thread are blocked in block_until right now. A runtime at
// quiescence compares it with its live fibers: any difference is a fiber blocked outside the
// primitives (a Boost timed wait, which would wake on real time), and that is a bug.
size_t fibers_blocked_in_primitives();

// Asserts, at a runtime's quiescent point, that all `live_fibers` are blocked in the primitives;
// `stuck_report` is called only on failure, to name them.
void assert_quiescent(size_t live_fibers, const std::function<std::string()>& stuck_report);

// Throws node_killed if the running fiber's node is dead. Primitives call it on entry, so a
// killed node's fiber stops at its next blocking point even when it would not have to wait.
void throw_if_node_killed();

// Blocks until `ready()` holds (true), or `deadline` passes first (false).
// Throws node_killed when the fiber's node dies meanwhile.
// REQUIRES: `lock` holds the mutex `ready()` reads under; `what` is a string literal.
template <typename Pred>
bool block_until(FiberCondition& cv, FiberLock& lock, Pred ready, std::optional<TimePoint> deadline,
                 const char* what) {
  throw_if_node_killed();
  if (ready()) return true;
  WaitGuard guard(cv, deadline, what);
  while (!ready()) {
    guard.throw_if_killed();
    if (guard.timed_out()) return false;
    cv.wait(lock);
  }
  // A death and a wake-up in the same instant (a kill also closes the node's inbox): death wins,
  // so the fiber unwinds instead of acting on what it was waiting for.
  guard.throw_if_killed();
  return true;
}

}  // namespace dagsim::runtime
