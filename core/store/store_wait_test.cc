// A store wait's life (store_wait.h): each end is reached from pending with what it means holding;
// a second end, or an end whose meaning does not hold, dies.
#include "core/store/store_wait.h"

#include <gtest/gtest.h>

namespace dagsim::store {
namespace {

TEST(StoreWait, APendingWaitEndsOnceInEachWay) {
  WaitState satisfied = WaitState::pending;
  transition(satisfied, WaitState::satisfied, WaitFacts{true, true, false});
  EXPECT_EQ(wait_state_name(satisfied), "satisfied");
  WaitState timed_out = WaitState::pending;
  transition(timed_out, WaitState::timed_out, WaitFacts{false, true, false});
  EXPECT_EQ(timed_out, WaitState::timed_out);
  WaitState cancelled = WaitState::pending;
  transition(cancelled, WaitState::cancelled, WaitFacts{false, false, true});
  EXPECT_EQ(cancelled, WaitState::cancelled);
}

TEST(StoreWaitDeathTest, AnEndedWaitCannotEndAgain) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  WaitState s = WaitState::timed_out;
  EXPECT_DEATH(transition(s, WaitState::satisfied, WaitFacts{true, true, false}), "store wait timed_out -> satisfied");
  WaitState pending = WaitState::pending;
  EXPECT_DEATH(transition(pending, WaitState::pending, WaitFacts{}), "store wait pending -> pending");
}

TEST(StoreWaitDeathTest, AnEndWhoseMeaningDoesNotHoldDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  WaitState s = WaitState::pending;
  EXPECT_DEATH(transition(s, WaitState::satisfied, WaitFacts{false, true, false}), "condition_holds");
  EXPECT_DEATH(transition(s, WaitState::timed_out, WaitFacts{true, true, false}), "condition_holds");
  EXPECT_DEATH(transition(s, WaitState::timed_out, WaitFacts{false, false, false}), "had_deadline");
  EXPECT_DEATH(transition(s, WaitState::cancelled, WaitFacts{false, true, false}), "abandoned");
}

}  // namespace
}  // namespace dagsim::store
