// VirtualClock's ordering promise under any mix of arms, cancels and fires: timers fire in
// (deadline, arm order) order whether armed with call_at or posted, a past deadline fires at the
// current time, cancel removes exactly its timer, fire_next_at fires only what is due. Checked against a reference model (an ordered set) over generated operation streams
// that mix the two queues' cases: deadlines at or after the last one armed (the FIFO run), earlier
// ones (the heap), many equal deadlines, past deadlines, and cancels of armed, fired and unknown ids.
#include "core/fibers/virtual_clock.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/base/prng.h"

namespace dagsim::fibers {
namespace {

using namespace std::chrono_literals;

// One generated stream of `steps` operations: op (0..9) below `arm_below` arms, below
// `cancel_below` cancels, else fires; checked against the ordered-set model at every step.
void check_against_model(uint64_t seed, int steps, uint64_t arm_below, uint64_t cancel_below) {
  {
    SCOPED_TRACE(seed);
    Prng prng(seed);
    VirtualClock clock;
    std::set<std::pair<TimePoint, uint64_t>> model;  // (effective deadline, arm number)
    std::map<uint64_t, TimerId> ids;                   // arm number -> id, while armed
    std::vector<uint64_t> fired;
    uint64_t armed = 0;
    TimePoint last_deadline = clock.now();
    for (int step = 0; step < steps; ++step) {
      const uint64_t op = prng.uniform_int(0, 9);
      if (op < arm_below) {
        // Deadlines: the last one again (equal), later, earlier, or in the past.
        TimePoint at;
        switch (prng.uniform_int(0, 3)) {
          case 0: at = last_deadline; break;
          case 1: at = last_deadline + std::chrono::microseconds(prng.uniform_int(1, 50)); break;
          case 2: at = clock.now() + std::chrono::microseconds(prng.uniform_int(0, 100)); break;
          default: at = clock.now() - 5us; break;
        }
        last_deadline = at;
        const uint64_t n = ++armed;
        if (prng.uniform_int(0, 2) == 0) {
          // A posted timer: no id, never cancelled, same order.
          clock.post_at(
              at, [](void* log, uint64_t number) { static_cast<std::vector<uint64_t>*>(log)->push_back(number); },
              &fired, n);
        } else {
          ids[n] = clock.call_at(at, [&fired, n] { fired.push_back(n); });
        }
        model.insert({std::max(at, clock.now()), n});
      } else if (op < cancel_below && !ids.empty()) {
        // Cancel a random armed timer (and now and then one that is gone already).
        auto it = ids.begin();
        std::advance(it, static_cast<long>(prng.uniform_int(0, ids.size() - 1)));
        clock.cancel(it->second);
        std::erase_if(model, [&](const auto& e) { return e.second == it->first; });
        if (prng.uniform_int(0, 1) == 0) clock.cancel(it->second);  // twice: a no-op
        ids.erase(it);
      } else if (clock.has_timers()) {
        ASSERT_FALSE(model.empty());
        const auto want = *model.begin();
        ASSERT_EQ(clock.next_deadline(), want.first);
        if (want.first > clock.now()) {
          ASSERT_FALSE(clock.fire_next_at(clock.now()));  // not due yet
        }
        if (prng.uniform_int(0, 1) == 0) {
          clock.fire_next();
        } else {
          ASSERT_TRUE(clock.fire_next_at(want.first));
        }
        ASSERT_EQ(fired.back(), want.second);
        ASSERT_EQ(clock.now(), want.first);
        model.erase(model.begin());
        ids.erase(want.second);
      }
      ASSERT_EQ(clock.has_timers(), !model.empty());
    }
    while (clock.has_timers()) {
      const auto want = *model.begin();
      clock.fire_next();
      ASSERT_EQ(fired.back(), want.second);
      model.erase(model.begin());
    }
    EXPECT_TRUE(model.empty());
  }
}

TEST(VirtualClock, FiresInDeadlineThenArmOrderLikeAnOrderedSetUnderAnyMix) {
  for (uint64_t seed = 1; seed <= 40; ++seed) check_against_model(seed, 3000, 6, 8);
}

// Long streams with many fires: the FIFO run's ring wraps and grows while partly consumed, and
// sweeps of cancelled entries go round a ring whose front has moved.
TEST(VirtualClock, KeepsTheOrderOverLongRunsWhoseRingWraps) {
  for (uint64_t seed = 1; seed <= 4; ++seed) check_against_model(seed, 40000, 5, 6);
}

}  // namespace
}  // namespace dagsim::fibers
