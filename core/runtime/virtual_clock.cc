#include "core/runtime/virtual_clock.h"

#include <algorithm>

#include "core/base/assert.h"

namespace dagsim::runtime {

TimerId VirtualClock::call_at(TimePoint deadline, std::function<void()> fire) {
  const TimerId id = ++next_id_;
  const TimePoint at = std::max(deadline, now_);
  queue_.emplace(std::make_pair(at, id), std::move(fire));
  deadlines_.emplace(id, at);
  return id;
}

void VirtualClock::cancel(TimerId id) {
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return;
  queue_.erase({it->second, id});
  deadlines_.erase(it);
}

TimePoint VirtualClock::next_deadline() const {
  DAGSIM_ASSERT(!queue_.empty());
  return queue_.begin()->first.first;
}

void VirtualClock::fire_next() {
  DAGSIM_ASSERT(!queue_.empty());
  auto it = queue_.begin();
  DAGSIM_ASSERT(it->first.first >= now_);
  now_ = it->first.first;
  std::function<void()> fire = std::move(it->second);
  firing_ = it->first.second;
  deadlines_.erase(it->first.second);
  queue_.erase(it);
  fire();
  firing_ = 0;
}

void VirtualClock::advance_to(TimePoint t) {
  DAGSIM_ASSERT(t >= now_);
  DAGSIM_ASSERT(queue_.empty() || next_deadline() >= t);
  now_ = t;
}

}  // namespace dagsim::runtime
