#include "core/runtime/wait.h"

#include <utility>

#include "core/base/open_op_scope.h"

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim::runtime {

namespace {
thread_local size_t blocked_count = 0;
}  // namespace

size_t fibers_blocked_in_primitives() { return blocked_count; }

void assert_quiescent(size_t live_fibers, const std::function<std::string()>& stuck_report) {
  DAGSIM_ASSERT_MSG(blocked_count == live_fibers,
                    "a fiber is blocked outside dagsim's runtime primitives: a Boost.Fiber timed wait "
                    "(sleep_for, wait_for, ...) leaked in, which would wake on real time:\n" +
                        stuck_report());
}

void throw_if_cancelled() {
  FiberContext* self = current_fiber();
  if (self != nullptr && self->scope != nullptr && self->scope->cancelled()) self->scope->throw_cancelled();
}

WaitGuard::WaitGuard(FiberLock& lock, FiberCondition& cv, std::optional<TimePoint> deadline, const char* what)
    : mutex_(*lock.mutex()), cv_(cv), self_(current_fiber()) {
  DAGSIM_ASSERT(lock.owns_lock());
  // What allocates comes first, undone if it throws (std::bad_alloc under a memory limit): a
  // constructor that throws runs no destructor, so nothing may stay armed or counted by then.
  if (deadline.has_value() && *deadline != TimePoint::max()) {
    DAGSIM_ASSERT_MSG(self_ != nullptr && self_->clock != nullptr,
                      "a wait with a deadline needs a fiber started by a Spawner (it owns the Clock)");
    clock_ = self_->clock;
    timer_ = clock_->call_at(*deadline, [this] { wake(timed_out_); });
  }
  if (self_ != nullptr && self_->scope != nullptr) {
    try {
      cancel_token_ = self_->scope->register_waiter([this] { wake(cancelled_); });
    } catch (...) {
      if (clock_ != nullptr) clock_->cancel(timer_);
      throw;
    }
    scope_ = self_->scope.get();
  }
  ++blocked_count;
  if (self_ != nullptr) {
    previous_what_ = self_->waiting_on;
    self_->waiting_on = what;
  }
}

WaitGuard::~WaitGuard() {
  --blocked_count;
  if (clock_ != nullptr) clock_->cancel(timer_);
  if (scope_ != nullptr) scope_->unregister_waiter(cancel_token_);
  if (self_ != nullptr) self_->waiting_on = previous_what_;
}

void WaitGuard::wake(bool& flag) {
  // See Note [wake-ups under the lock]. The mutex is free here: the waiter released it in
  // cv.wait, and no fiber suspends holding it, so this never blocks the caller.
  FiberLock lock(mutex_);
  flag = true;
  cv_.notify_all();
}

void WaitGuard::throw_if_cancelled() const {
  if (cancelled_) scope_->throw_cancelled();
}

void Clock::sleep_until(TimePoint deadline) {
  // The wait arms its timer on the fiber's own clock, which must be this one.
  FiberContext* self = current_fiber();
  DAGSIM_ASSERT_MSG(self == nullptr || self->clock == this, "sleep_until on another node's clock");
  FiberMutex mutex;
  FiberCondition cv;
  FiberLock lock(mutex);
  // Never ready: the only way out is the deadline (or a cancellation).
  const bool ready = block_until(cv, lock, [] { return false; }, deadline, "Clock::sleep_until");
  DAGSIM_ASSERT(!ready);
}

}  // namespace dagsim::runtime
