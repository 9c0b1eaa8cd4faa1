#include "core/fibers/scheduler.h"

#include <boost/fiber/operations.hpp>

#include "core/base/assert.h"

namespace dagsim::fibers {

namespace {
thread_local DeterministicScheduler* this_thread_scheduler = nullptr;
}  // namespace

DeterministicScheduler& DeterministicScheduler::for_this_thread() {
  if (this_thread_scheduler == nullptr) {
    boost::fibers::use_scheduling_algorithm<DeterministicScheduler>();
    DAGSIM_ASSERT(this_thread_scheduler != nullptr);
  }
  return *this_thread_scheduler;
}

DeterministicScheduler::DeterministicScheduler() {
  DAGSIM_ASSERT_MSG(this_thread_scheduler == nullptr, "one DeterministicScheduler per thread");
  this_thread_scheduler = this;
}

DeterministicScheduler::~DeterministicScheduler() {
  if (this_thread_scheduler == this) this_thread_scheduler = nullptr;
}

void DeterministicScheduler::awakened(boost::fibers::context* ctx) noexcept {
  if (ctx->is_context(boost::fibers::type::main_context)) {
    main_ = ctx;
  } else if (ctx->is_context(boost::fibers::type::dispatcher_context)) {
    dispatcher_ = ctx;
  } else {
    ready_.push_back(ctx);
  }
}

boost::fibers::context* DeterministicScheduler::pick_next() noexcept {
  boost::fibers::context* next = nullptr;
  if (!ready_.empty()) {
    size_t index = 0;
    if (random_.has_value() && ready_.size() > 1) index = random_->uniform_u64(ready_.size());
    next = ready_[index];
    if (index == 0) {
      ready_.pop_front();  // FIFO, and most random picks of a short queue: no general erase
    } else {
      ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(index));
    }
  } else if (dispatcher_ != nullptr) {
    // Before the driver: the dispatcher frees terminated fibers, then picks the driver itself.
    next = dispatcher_;
    dispatcher_ = nullptr;
  } else if (main_ != nullptr) {
    next = main_;
    main_ = nullptr;
  }
  return next;
}

bool DeterministicScheduler::has_ready_fibers() const noexcept {
  return !ready_.empty() || main_ != nullptr || dispatcher_ != nullptr;
}

void DeterministicScheduler::suspend_until(std::chrono::steady_clock::time_point const& time_point) noexcept {
  DAGSIM_ASSERT_MSG(time_point == std::chrono::steady_clock::time_point::max(),
                    "a Boost.Fiber timed wait (sleep_for, wait_for, wait_until, ...) leaked in: it reads "
                    "the real clock; wait through the runtime primitives and the Clock instead");
  DAGSIM_ASSERT_MSG(false,
                    "deadlock: every fiber is blocked, the driver included, and nothing can wake them "
                    "(a fiber waited on the main fiber outside a runtime's run loop?)");
}

void DeterministicScheduler::notify() noexcept {
  // Fibers are woken only from this thread; nothing to do.
}

}  // namespace dagsim::fibers
