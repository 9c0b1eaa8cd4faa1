// DeterministicScheduler: the Boost.Fiber scheduling algorithm of every dagsim runtime thread.
//
// Ready worker fibers run in FIFO order, or in a seeded random order to explore interleavings.
// The main fiber (the driver that moves time) and Boost's dispatcher run only when no worker is
// ready, so a driver that yields gets control back exactly when the world is quiescent.
// suspend_until with a finite time means someone used a Boost timed wait, which reads the real
// clock: that is a bug and asserts. suspend_until(max) means every fiber, the driver included,
// is blocked: a deadlock, which asserts too instead of hanging the process.
//
// One instance per OS thread, installed on first use and kept for the thread's life.
#pragma once

#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/context.hpp>
#include <deque>
#include <optional>

#include "core/base/prng.h"

namespace dagsim::fibers {

class DeterministicScheduler final : public boost::fibers::algo::algorithm {
 public:
  // The calling thread's scheduler, installed if needed.
  static DeterministicScheduler& for_this_thread();

  DeterministicScheduler();
  ~DeterministicScheduler() override;

  // FIFO (nullopt) or seeded random picks.
  void set_random_order(std::optional<Prng> prng) { random_ = std::move(prng); }
  size_t ready_workers() const { return ready_.size(); }

  void awakened(boost::fibers::context* ctx) noexcept override;
  boost::fibers::context* pick_next() noexcept override;
  bool has_ready_fibers() const noexcept override;
  void suspend_until(std::chrono::steady_clock::time_point const& time_point) noexcept override;
  void notify() noexcept override;

 private:
  std::deque<boost::fibers::context*> ready_;
  boost::fibers::context* main_ = nullptr;
  boost::fibers::context* dispatcher_ = nullptr;
  std::optional<Prng> random_;
};

}  // namespace dagsim::fibers
