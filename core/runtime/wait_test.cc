// Tests of block_until's wake-ups: a timer callback or a cancellation sets its flag under the
// waiter's mutex (Note [wake-ups under the lock] in wait.h), so it can never fall between the
// waiter's check and its wait, whichever thread a future runtime runs it on.
#include <gtest/gtest.h>

#include <boost/fiber/operations.hpp>
#include <map>

#include "core/fibers/local_runtime.h"
#include "core/runtime/wait.h"

namespace dagsim::runtime {
namespace {

using fibers::LocalRuntime;

// A Clock whose timers fire only when a test calls fire_all(), from whichever fiber calls it.
class ManualClock final : public Clock {
 public:
  TimePoint now() const override { return TimePoint{}; }
  TimePoint wall_now() const override { return TimePoint{}; }
  TimerId call_at(TimePoint, std::function<void()> fire) override {
    timers_.emplace(++next_, std::move(fire));
    return next_;
  }
  void cancel(TimerId id) override { timers_.erase(id); }
  void fire_all() {
    std::map<TimerId, std::function<void()>> due = std::move(timers_);
    timers_.clear();
    for (auto& [id, fire] : due) fire();
  }
  size_t armed() const { return timers_.size(); }

 private:
  TimerId next_ = 0;
  std::map<TimerId, std::function<void()>> timers_;
};

TEST(BlockUntil, ATimerWakeUpWaitsForTheWaitersMutex) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  ManualClock manual;
  FiberMutex mutex;
  FiberCondition cv;
  std::vector<std::string> events;
  env.spawner.spawn("waiter", [&] {
    current_fiber()->clock = &manual;  // its deadline is a timer of the manual clock
    FiberLock lock(mutex);
    const bool ready = block_until(cv, lock, [] { return false; }, TimePoint{std::chrono::seconds(1)}, "test");
    events.push_back(ready ? "waiter ready" : "waiter timed out");
  });
  env.spawner.spawn("holder", [&] {
    FiberLock lock(mutex);  // free: the waiter released it in cv.wait
    events.push_back("holder locked");
    boost::this_fiber::yield();  // the timer fires now, on another fiber, while this one holds the mutex
    events.push_back("holder unlocks");
  });
  env.spawner.spawn("timer", [&] {
    ASSERT_EQ(manual.armed(), 1u);
    manual.fire_all();
    events.push_back("timer returned");
  });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  // The wake-up could only set the flag once the holder let go of the mutex.
  EXPECT_EQ(events, (std::vector<std::string>{"holder locked", "holder unlocks", "timer returned", "waiter timed out"}));
}

}  // namespace
}  // namespace dagsim::runtime
