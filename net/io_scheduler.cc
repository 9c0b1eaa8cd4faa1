#include "net/io_scheduler.h"

#include <boost/asio/post.hpp>
#include <boost/fiber/operations.hpp>

#include "core/base/assert.h"

namespace dagsim::net {

namespace {
thread_local IoScheduler* this_thread_scheduler = nullptr;
}  // namespace

IoScheduler& IoScheduler::for_this_thread() {
  if (this_thread_scheduler == nullptr) {
    boost::fibers::use_scheduling_algorithm<IoScheduler>();
    DAGSIM_ASSERT(this_thread_scheduler != nullptr);
  }
  return *this_thread_scheduler;
}

IoScheduler::IoScheduler() : work_(boost::asio::make_work_guard(io_)) {
  DAGSIM_ASSERT_MSG(this_thread_scheduler == nullptr, "one IoScheduler per thread");
  this_thread_scheduler = this;
}

IoScheduler::~IoScheduler() {
  if (this_thread_scheduler == this) this_thread_scheduler = nullptr;
}

void IoScheduler::awakened(boost::fibers::context* ctx) noexcept {
  DAGSIM_ASSERT(ctx != nullptr && !ctx->ready_is_linked());
  ctx->ready_link(ready_);
}

boost::fibers::context* IoScheduler::pick_next() noexcept {
  if (ready_.empty()) return nullptr;
  boost::fibers::context* next = &ready_.front();
  ready_.pop_front();
  return next;
}

bool IoScheduler::has_ready_fibers() const noexcept { return !ready_.empty(); }

void IoScheduler::suspend_until(std::chrono::steady_clock::time_point const& time_point) noexcept {
  DAGSIM_ASSERT_MSG(time_point == std::chrono::steady_clock::time_point::max(),
                    "a Boost.Fiber timed wait leaked in: wait through the runtime primitives and the Clock");
  // Nothing is ready: run I/O and timers until one handler has run. Handlers only wake fibers,
  // which makes them ready here, on this thread; a remote wake-up arrives as a posted handler.
  ++io_waits_;
  if (io_.stopped()) io_.restart();
  io_.run_one();
}

void IoScheduler::notify() noexcept { boost::asio::post(io_, [] {}); }

}  // namespace dagsim::net
