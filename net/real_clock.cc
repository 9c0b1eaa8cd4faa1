#include "net/real_clock.h"

#include <algorithm>
#include <chrono>

namespace dagsim::net {

using runtime::Duration;
using runtime::TimePoint;
using runtime::TimerId;

RealClock::~RealClock() {
  for (auto& [id, t] : timers_) t->timer.cancel();
}

TimePoint RealClock::now() const {
  return TimePoint{std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch())};
}

TimePoint RealClock::wall_now() const {
  return TimePoint{std::chrono::duration_cast<Duration>(std::chrono::system_clock::now().time_since_epoch())};
}

TimerId RealClock::call_at(TimePoint deadline, std::function<void()> fire) {
  const TimerId id = ++next_id_;
  auto timer = std::make_unique<Timer>(io_);
  // TimePoint::max() (no deadline) stays far in the future rather than overflowing the timer.
  const auto at = std::chrono::steady_clock::time_point{
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::min(deadline.since_epoch, Duration{INT64_MAX / 2}))};
  timer->timer.expires_at(at);
  timer->fire = std::move(fire);
  timer->timer.async_wait([this, id, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code&) {
    if (alive.expired()) return;  // the clock is gone
    // Looked up, not captured: cancel() may have removed it after the wait completed.
    auto it = timers_.find(id);
    if (it == timers_.end()) return;
    std::function<void()> fire = std::move(it->second->fire);
    timers_.erase(it);
    fire();
  });
  timers_.emplace(id, std::move(timer));
  return id;
}

void RealClock::cancel(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  it->second->timer.cancel();
  timers_.erase(it);
}

}  // namespace dagsim::net
