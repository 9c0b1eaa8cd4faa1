// Tests of whole rendezvous rounds through RendezvousHandler (and so the executor, the state holder
// and the backend) on LocalRuntime's virtual time: the built-in store on node 0 ("store") and 2-5
// participant nodes ("worker1".."worker5") each with its own StoreClient and handler. Formation with
// min = max (ranks in node order, one round for all) and min < max (after the last call), a late
// joiner on the wait list causing the next round, a spare in the redundancy list taking a freed
// seat, a killed participant expiring after interval x attempts (re-rendezvous on and off), close
// and shutdown, a killed store failing every waiter with a named error, and event-driven waits
// completing a round sooner than PyTorch's 1 s polling.
#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"
#include "core/rendezvous/rendezvous_test_cluster.h"

namespace dagsim::rendezvous {
namespace {

using namespace std::chrono_literals;
using fibers::LocalRuntime;
using namespace testing;

class HandlerTest : public ::testing::Test, public Cluster {};

// S2, S8, L1: min = max completes at the max-th join; ranks follow node order, not join order.
TEST_F(HandlerTest, MinEqualsMaxFormsOneRoundWithRanksInNodeOrder) {
  start(3, job(3, 3));
  join_at(3, at(0ms));
  join_at(1, at(100ms));
  join_at(2, at(200ms));
  run_until(at(10s));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(result(i).info) << result(i).what;
    EXPECT_EQ(*result(i).info, (RendezvousInfo{static_cast<uint32_t>(i - 1), 3, 0})) << "worker" << i;
  }
  EXPECT_EQ(latest_done(3), at(200ms)) << "every waiter woken by the completing write, no poll";
}

// L1: min < max completes just after the last call, 30 s after the min-th join, not before.
TEST_F(HandlerTest, MinBelowMaxCompletesAfterTheLastCall) {
  start(2, job(2, 3));
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  run_until(at(29s));
  EXPECT_FALSE(result(1).done_at || result(2).done_at);
  run_until(at(40s));
  ASSERT_TRUE(result(1).info && result(2).info);
  EXPECT_EQ(result(1).info->world_size, 2u);
  EXPECT_EQ(result(1).info->rank, 0u);
  EXPECT_EQ(result(2).info->rank, 1u);
  const TimePoint done = latest_done(2);
  EXPECT_GT(done, at(30s));
  EXPECT_LE(done, at(30s + 1ms));
}

// L5: a node that finds the round complete waits; the agents see it and restart; the next round
// has everyone in it.
TEST_F(HandlerTest, ALateJoinerWaitsAndTheRestartedAgentsFormTheNextRoundWithIt) {
  start(3, job(2, 3));
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  join_at(3, at(40s));
  uint64_t waiting = 0;
  at_time(1, at(41s), [&] { waiting = handler(1).num_nodes_waiting(); });
  run_until(at(41s));
  ASSERT_TRUE(result(1).info && result(2).info);
  EXPECT_FALSE(result(3).done_at) << "the late joiner waits for the next round";
  EXPECT_EQ(waiting, 1u);
  EXPECT_TRUE(handler(1).last_state().wait_list.contains(handler(3).node()));
  join_at(1, at(42s));
  join_at(2, at(43s));
  run_until(at(100s));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(result(i).info) << result(i).what;
    EXPECT_EQ(*result(i).info, (RendezvousInfo{static_cast<uint32_t>(i - 1), 3, 1})) << "worker" << i;
  }
  EXPECT_EQ(latest_done(3), at(43s)) << "max reached at the last restart's join";
}

// L3, S9: a (max + 1)-th node is a spare: it waits without timing out and is not counted as
// waiting; when a seat frees it moves to the wait list, and the next round takes it.
TEST_F(HandlerTest, ARedundantNodeWaitsAsASpareAndTakesAFreedSeat) {
  RendezvousSettings settings = job(2, 2);
  settings.timeout.join = 30s;  // the spare outwaits its join timeout: spares never time out
  start(3, settings);
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  join_at(3, at(1s));
  uint64_t waiting_with_spare = 99;
  at_time(2, at(60s), [&] { waiting_with_spare = handler(2).num_nodes_waiting(); });
  run_until(at(60s));
  EXPECT_FALSE(result(3).done_at) << result(3).what;
  EXPECT_TRUE(handler(2).last_state().redundancy_list.contains(handler(3).node()));
  EXPECT_EQ(waiting_with_spare, 0u);
  bool left = false;
  at_time(1, at(61s), [&] { left = handler(1).shutdown(); });
  uint64_t waiting_after = 0;
  at_time(2, at(62s), [&] { waiting_after = handler(2).num_nodes_waiting(); });
  run_until(at(62s));
  EXPECT_TRUE(left);
  EXPECT_EQ(waiting_after, 1u) << "the spare moved to the wait list";
  join_at(2, at(63s));
  run_until(at(120s));
  ASSERT_TRUE(result(2).info && result(3).info) << result(3).what;
  EXPECT_EQ(*result(2).info, (RendezvousInfo{0, 2, 1}));
  EXPECT_EQ(*result(3).info, (RendezvousInfo{1, 2, 1}));
}

// S10, L2 and Note [re-rendezvous on expiry]: a participant killed in a complete round is dropped
// strictly after interval x attempts (15 s) without a heartbeat, and the survivors' agents see a
// node waiting, so they re-form; with the setting off, PyTorch's gap (L6): nobody waits.
TEST_F(HandlerTest, AKilledParticipantExpiresAndTheSurvivorsAreToldToReform) {
  start(3, job(3, 3));
  for (int i = 1; i <= 3; ++i) join_at(i, at(0ms));
  rt_.env(3).spawner.spawn("death", [&] {
    rt_.env(3).clock.sleep_until(at(1s));
    rt_.kill(3);
  });
  uint64_t at_expiry = 99, after_expiry = 0;
  at_time(1, at(15s), [&] { at_expiry = handler(1).num_nodes_waiting(); });
  at_time(1, at(15s + 1ms), [&] { after_expiry = handler(1).num_nodes_waiting(); });
  run_until(at(16s));
  EXPECT_EQ(at_expiry, 0u) << "a heartbeat exactly 15 s old still counts (strict expiry)";
  EXPECT_EQ(after_expiry, 1u);
  EXPECT_EQ(handler(1).last_state().participants.size(), 2u);
  EXPECT_TRUE(handler(1).last_state().rerendezvous_requested);
  // The survivors restart and form round 1 without the dead node.
  join_at(1, at(17s));
  join_at(2, at(17s));
  run_until(at(18s));
  EXPECT_FALSE(result(1).done_at) << "min = max = 3: two survivors wait for a third";
}

TEST_F(HandlerTest, WithoutReRendezvousADeadParticipantIsDroppedSilently) {
  RendezvousSettings settings = job(3, 3);
  settings.rerendezvous_on_expiry = false;
  start(3, settings);
  for (int i = 1; i <= 3; ++i) join_at(i, at(0ms));
  rt_.env(3).spawner.spawn("death", [&] {
    rt_.env(3).clock.sleep_until(at(1s));
    rt_.kill(3);
  });
  uint64_t waiting = 99;
  at_time(1, at(20s), [&] { waiting = handler(1).num_nodes_waiting(); });
  run_until(at(21s));
  EXPECT_EQ(waiting, 0u) << "PyTorch's gap (#111646)";
  EXPECT_EQ(handler(1).last_state().participants.size(), 2u);
}

// S7, L4: after close a joiner fails at once with a named error; shutdown leaves and stops the
// keep-alive.
TEST_F(HandlerTest, CloseRefusesJoinersAndShutdownStopsTheKeepAlive) {
  start(3, job(2, 2));
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  bool closed_seen = false;
  at_time(1, at(1s), [&] { handler(1).set_closed(); });
  at_time(2, at(2s), [&] { closed_seen = handler(2).is_closed(); });
  join_at(3, at(3s));
  run_until(at(4s));
  EXPECT_TRUE(closed_seen);
  ASSERT_EQ(result(3).error, ErrorCode::rendezvous_closed) << result(3).what;
  EXPECT_NE(result(3).what.find("rendezvous run job, round 0, node worker3_0_0, join op"), std::string::npos)
      << result(3).what;
  EXPECT_EQ(result(3).done_at, at(3s));
  bool left = false;
  at_time(2, at(12s), [&] { left = handler(2).shutdown(); });
  run_until(at(12s));
  EXPECT_TRUE(left);
  EXPECT_FALSE(handler(2).last_state().participants.contains(handler(2).node()));
  const uint64_t beats = handler(2).keep_alives();
  EXPECT_EQ(beats, 2u) << "at 5 s and 10 s";
  run_until(at(60s));
  EXPECT_EQ(handler(2).keep_alives(), beats) << "no heartbeat after shutdown";
  EXPECT_GT(handler(1).keep_alives(), beats) << "the other node's keep-alive goes on";
}

// Issue 11 item 4: a store that dies fails every waiter with a named error within the store's
// timeout; nothing hangs.
TEST_F(HandlerTest, AKilledStoreFailsEveryWaiterWithANamedErrorWithinItsTimeout) {
  start(3, job(3, 3));
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  rt_.env(0).spawner.spawn("death", [&] {
    rt_.env(0).clock.sleep_until(at(2s));
    rt_.kill(0);
  });
  // Idle (no timer left) once every waiter has failed: nothing hangs.
  rt_.run(at(60s));
  for (int i = 1; i <= 2; ++i) {
    ASSERT_EQ(result(i).error, ErrorCode::rendezvous_connection_failed) << "worker" << i << ": " << result(i).what;
    EXPECT_NE(result(i).what.find("rendezvous run job, round 0, node worker" + std::to_string(i) + "_0_0, join op"),
              std::string::npos)
        << result(i).what;
    EXPECT_NE(result(i).what.find("store watch on node 0"), std::string::npos) << result(i).what;
    EXPECT_LE(*result(i).done_at, at(2s) + 10s + store::kReplyGrace);
  }
}

// Note [event-driven SYNC]: the same formation, event-driven and with PyTorch's 1 s polling; both
// form the round, event-driven at the last join, polling later.
TEST(HandlerTiming, EventDrivenCompletesSoonerThanPolling) {
  auto formation = [](Duration poll_interval) {
    Cluster c;
    RendezvousHandlerOptions options;
    options.poll_interval = poll_interval;
    c.start(3, job(3, 3), options);
    c.join_at(1, at(0ms));
    c.join_at(2, at(300ms));
    c.join_at(3, at(1700ms));
    c.run_until(at(20s));
    for (int i = 1; i <= 3; ++i) {
      EXPECT_TRUE(c.result(i).info) << c.result(i).what;
      if (c.result(i).info) {
        EXPECT_EQ(*c.result(i).info, (RendezvousInfo{static_cast<uint32_t>(i - 1), 3, 0}));
      }
    }
    return c.latest_done(3);
  };
  const TimePoint event_driven = formation(Duration::zero());
  const TimePoint polling = formation(1s);
  EXPECT_EQ(event_driven, at(1700ms));
  EXPECT_LT(event_driven, polling);
  EXPECT_LE(polling, at(1700ms) + 2s) << "PyTorch's 1 s poll behind a 1 s cache: at most 2 s late";
}

}  // namespace
}  // namespace dagsim::rendezvous
