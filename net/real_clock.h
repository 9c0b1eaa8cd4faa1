// RealClock: the Clock of a real dagsim process (issue 10). now() reads steady_clock (monotonic,
// for deadlines), wall_now() reads system_clock since the Unix epoch (for timestamps other nodes
// read; see Note [two times] in core/runtime/clock.h). Timers are Asio steady timers on the
// process's io_context, so they fire from IoScheduler's I/O loop on the node's thread, outside
// any fiber, as the Clock contract requires.
//
// Promises: `fire` runs once, at or after its deadline, unless cancelled first; cancel(id), once
// returned, guarantees `fire` never runs (everything runs on one thread, so a timer whose wait
// completed but whose handler has not run yet finds itself cancelled and does nothing).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <memory>

#include "core/runtime/clock.h"

namespace dagsim::net {

class RealClock final : public runtime::Clock {
 public:
  explicit RealClock(boost::asio::io_context& io) : io_(io) {}
  ~RealClock() override;

  runtime::TimePoint now() const override;
  runtime::TimePoint wall_now() const override;
  runtime::TimerId call_at(runtime::TimePoint deadline, std::function<void()> fire) override;
  void cancel(runtime::TimerId id) override;

  size_t armed() const { return timers_.size(); }

 private:
  struct Timer {
    explicit Timer(boost::asio::io_context& io) : timer(io) {}
    boost::asio::steady_timer timer;
    std::function<void()> fire;
  };

  boost::asio::io_context& io_;
  // Handlers of timers destroyed with the clock still run (aborted) on the io_context: they check
  // this token before touching the clock.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  runtime::TimerId next_id_ = 0;
  std::map<runtime::TimerId, std::unique_ptr<Timer>> timers_;
};

}  // namespace dagsim::net
