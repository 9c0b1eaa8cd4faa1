// IoScheduler: the Boost.Fiber scheduling algorithm of a real dagsim process (issue 10): one OS
// thread runs every fiber of the node and its I/O. Ready fibers run in FIFO order; when none is
// ready, the thread runs the io_context (socket completions, timers) until one handler has run,
// and handlers only wake fibers. So a message costs no thread handoff, and no Boost.Fiber timed
// wait ever reads the clock: time reaches fibers only through RealClock's Asio timers.
//
// One instance per OS thread, installed by for_this_thread() and kept for the thread's life. It
// owns the thread's io_context, which must outlive the scheduler's work guard, and Boost.Fiber
// destroys the scheduler last, at thread exit: sockets and timers on io() are destroyed first.
// notify() may be called from another thread (a fiber made ready remotely): it posts an empty
// handler so that a thread blocked in the io_context wakes and picks the fiber.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/context.hpp>
#include <boost/fiber/scheduler.hpp>

#include <chrono>
#include <cstdint>

namespace dagsim::net {

class IoScheduler final : public boost::fibers::algo::algorithm {
 public:
  // The calling thread's scheduler, installed if needed.
  // REQUIRES: no other algorithm was installed on this thread.
  static IoScheduler& for_this_thread();

  IoScheduler();
  ~IoScheduler() override;

  void awakened(boost::fibers::context* ctx) noexcept override;
  boost::fibers::context* pick_next() noexcept override;
  bool has_ready_fibers() const noexcept override;
  void suspend_until(std::chrono::steady_clock::time_point const& time_point) noexcept override;
  void notify() noexcept override;

  // The thread's io_context: sockets and timers of the thread's fibers live on it.
  boost::asio::io_context& io() { return io_; }

  // How many times the thread ran the io_context because no fiber was ready (for benchmarks).
  uint64_t io_waits() const { return io_waits_; }

 private:
  boost::asio::io_context io_;
  // Keeps run_one() blocking while there is nothing to do, instead of returning at once.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::fibers::scheduler::ready_queue_type ready_;
  uint64_t io_waits_ = 0;
};

}  // namespace dagsim::net
