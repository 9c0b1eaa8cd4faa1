#include "core/runtime/wait.h"

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

void throw_if_node_killed() {
  FiberContext* self = current_fiber();
  if (self != nullptr && self->lifetime != nullptr && self->lifetime->killed()) {
    throw errors::node_killed(self->node_name);
  }
}

WaitGuard::WaitGuard(FiberCondition& cv, std::optional<TimePoint> deadline, const char* what)
    : cv_(cv), self_(current_fiber()) {
  ++blocked_count;
  if (self_ != nullptr) {
    previous_what_ = self_->waiting_on;
    self_->waiting_on = what;
  }
  if (deadline.has_value() && *deadline != TimePoint::max()) {
    DAGSIM_ASSERT_MSG(self_ != nullptr && self_->clock != nullptr,
                      "a wait with a deadline needs a fiber started by a Spawner (it owns the Clock)");
    clock_ = self_->clock;
    timer_ = clock_->call_at(*deadline, [this] {
      timed_out_ = true;
      cv_.notify_all();
    });
  }
  if (self_ != nullptr && self_->lifetime != nullptr) {
    kill_token_ = self_->lifetime->register_waiter([this] {
      killed_ = true;
      cv_.notify_all();
    });
  }
}

WaitGuard::~WaitGuard() {
  --blocked_count;
  if (clock_ != nullptr) clock_->cancel(timer_);
  if (kill_token_ != 0) self_->lifetime->unregister_waiter(kill_token_);
  if (self_ != nullptr) self_->waiting_on = previous_what_;
}

void WaitGuard::throw_if_killed() const {
  if (killed_) throw errors::node_killed(self_->node_name);
}

void Clock::sleep_until(TimePoint deadline) {
  // The wait arms its timer on the fiber's own clock, which must be this one.
  FiberContext* self = current_fiber();
  DAGSIM_ASSERT_MSG(self == nullptr || self->clock == this, "sleep_until on another node's clock");
  FiberMutex mutex;
  FiberCondition cv;
  FiberLock lock(mutex);
  // Never ready: the only way out is the deadline (or the node's death).
  const bool ready = block_until(cv, lock, [] { return false; }, deadline, "Clock::sleep_until");
  DAGSIM_ASSERT(!ready);
}

}  // namespace dagsim::runtime
