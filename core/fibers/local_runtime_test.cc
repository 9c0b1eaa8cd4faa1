// Tests of LocalRuntime: virtual time, deterministic schedules, deadlock and failure reports,
// the loopback transport, and clean teardown of blocked fibers.
#include <gtest/gtest.h>

#include <boost/fiber/operations.hpp>

#include "core/runtime/channel.h"
#include "core/runtime/event.h"
#include "core/fibers/local_runtime.h"

namespace dagsim::fibers {
namespace {

using namespace std::chrono_literals;
using runtime::current_fiber;
using runtime::Delivery;
using runtime::Event;

TEST(LocalRuntime, VirtualTimeJumpsAndSleepersWakeInDeadlineOrder) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::vector<int> order;
  for (int i : {3, 1, 2}) {
    env.spawner.spawn("sleeper", [&, i] {
      env.clock.sleep(std::chrono::hours(i));
      order.push_back(i);
    });
  }
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(rt.now().since_epoch, std::chrono::hours(3));
}

// Records the interleaving of fibers that yield to each other.
std::vector<int> interleaving(LocalRuntimeOptions options) {
  LocalRuntime rt(options);
  Env& env = rt.add_node("n0");
  std::vector<int> trace;
  for (int f = 0; f < 4; ++f) {
    env.spawner.spawn("worker", [&, f] {
      for (int step = 0; step < 5; ++step) {
        trace.push_back(f);
        boost::this_fiber::yield();
      }
    });
  }
  rt.run();
  return trace;
}

TEST(LocalRuntime, FifoScheduleIsRoundRobin) {
  std::vector<int> trace = interleaving({});
  ASSERT_EQ(trace.size(), 20u);
  for (size_t i = 0; i < trace.size(); ++i) EXPECT_EQ(trace[i], static_cast<int>(i % 4));
}

TEST(LocalRuntime, RandomScheduleReplaysBySeed) {
  LocalRuntimeOptions a{.seed = 7, .random_schedule = true};
  LocalRuntimeOptions b{.seed = 8, .random_schedule = true};
  EXPECT_EQ(interleaving(a), interleaving(a));
  EXPECT_NE(interleaving(a), interleaving(b));
}

TEST(LocalRuntime, DeadlockIsReportedWithWhatEachFiberWaitsOn) {
  Event never;  // declared first: it must outlive the fibers that wait on it
  LocalRuntime rt;
  Env& env = rt.add_node("alpha");
  env.spawner.spawn("stuck-one", [&] { never.wait(); });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::deadlock);
  const std::string report = rt.stuck_report();
  EXPECT_NE(report.find("node alpha"), std::string::npos) << report;
  EXPECT_NE(report.find("stuck-one"), std::string::npos) << report;
  EXPECT_NE(report.find("Event::wait"), std::string::npos) << report;
  // Destruction kills and joins the stuck fiber.
}

TEST(LocalRuntime, RunStopsAtTheTimeLimit) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  env.spawner.spawn("ticker", [&] {
    for (;;) env.clock.sleep(1s);
  });
  EXPECT_EQ(rt.run(TimePoint{10s}), LocalRuntime::Outcome::time_limit);
  EXPECT_EQ(rt.now().since_epoch, 10s);
}

TEST(LocalRuntime, AnExceptionEndsOnlyItsFiberAndIsReported) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  bool other_finished = false;
  env.spawner.spawn("thrower", [] { throw errors::invalid_argument("bad thing"); });
  env.spawner.spawn("other", [&] {
    env.clock.sleep(1ms);
    other_finished = true;
  });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_TRUE(other_finished);
  ASSERT_EQ(rt.failures().size(), 1u);
  EXPECT_EQ(rt.failures()[0].fiber, "thrower");
  EXPECT_NE(rt.failures()[0].what.find("bad thing"), std::string::npos);
}

TEST(LocalRuntime, RunOnRethrowsAndReportsNeverFinishing) {
  Event never;  // outlives the runtime, whose destructor unwinds the fiber waiting on it
  LocalRuntime rt;
  rt.add_node("n0");
  EXPECT_THROW(rt.run_on(0, [] { throw errors::invalid_argument("x"); }), Error);
  try {
    rt.run_on(0, [&] { never.wait(); });
    FAIL() << "expected internal_error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal_error);
    EXPECT_NE(std::string(e.what()).find("Event::wait"), std::string::npos);
  }
}

TEST(LocalRuntime, LoopbackDeliversInOrderAndReportsDeadPeers) {
  LocalRuntime rt;
  Env& a = rt.add_node("a");
  Env& b = rt.add_node("b");
  std::vector<int> got;
  b.spawner.spawn("receiver", [&] {
    for (int i = 0; i < 3; ++i) got.push_back(b.transport.inbox().pop().payload.at(0));
  });
  a.spawner.spawn("sender", [&] {
    for (uint8_t i = 0; i < 3; ++i) a.transport.send(1, Bytes{i});
  });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));

  rt.kill(1);
  Delivery notice = rt.run_on(0, [&] {
    a.transport.send(1, Bytes{9});
    return a.transport.inbox().pop();
  });
  EXPECT_EQ(notice.kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(notice.peer, 1);
}

TEST(LocalRuntime, ADeliveryToAClosedInboxIsDroppedNotThrownAtTheDriver) {
  LocalRuntime rt;
  Env& a = rt.add_node("a");
  Env& b = rt.add_node("b");
  rt.run_on(1, [&] {
    b.transport.close();
    b.transport.close();  // idempotent
    EXPECT_THROW(b.transport.send(0, Bytes{1}), Error);
  });
  // The driver delivers into b's closed inbox: before offer(), push threw channel_closed here.
  rt.run_on(0, [&] { a.transport.send(1, Bytes{2}); });
  EXPECT_TRUE(b.transport.inbox().empty());
  EXPECT_TRUE(rt.failures().empty());
}

TEST(LocalRuntime, WallTimeIsItsVirtualTime) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  rt.run_on(0, [&] {
    env.clock.sleep(std::chrono::seconds(3));
    EXPECT_EQ(env.clock.wall_now(), env.clock.now());
    EXPECT_EQ(env.clock.wall_now().since_epoch, std::chrono::seconds(3));
  });
}

TEST(LocalRuntime, ContextsAreFiberLocal) {
  LocalRuntime rt;
  rt.add_node("a");
  rt.add_node("b");
  std::vector<std::string> names;
  for (WorkerId n : {0, 1}) {
    rt.env(n).spawner.spawn("probe", [&] {
      boost::this_fiber::yield();
      names.push_back(current_fiber()->node_name);
    });
  }
  rt.run();
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(current_fiber(), nullptr);
}

// The scheduler sees a Boost timed wait when it next has nothing ready: a wait that has run out by
// then (1 ms, on a busy machine) is already over and never reaches it, so the leak here is long.
TEST(SchedulerDeathTest, BoostTimedWaitAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        LocalRuntime rt;
        rt.add_node("n0");
        rt.env(0).spawner.spawn("leak", [] { boost::this_fiber::sleep_for(std::chrono::hours(1)); });
        rt.run();
      },
      "timed wait");
}


// A one_thread channel (LocalRuntime's and SimWorld's inboxes) skips its mutex and notifies only
// when a fiber may have gone to sleep since the last notify. Two poppers sleep; a burst of offers
// wakes both, one takes everything and the other finds it empty and sleeps again: a later offer
// must still wake it (a notify skipped wrongly deadlocks the run). Items pass the ring buffer's
// growth and wrap-around in order.
TEST(OneThreadChannel, ABurstWakesEverySleeperAndALaterOfferWakesOneThatSleptAgain) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  runtime::Channel<std::string> channel(0, runtime::ChannelThreads::one_thread);
  std::vector<std::string> got_a, got_b;
  env.spawner.spawn("a", [&] {
    got_a.push_back(channel.pop());
    while (std::optional<std::string> more = channel.try_pop()) got_a.push_back(*more);
  });
  env.spawner.spawn("b", [&] { got_b.push_back(channel.pop()); });
  env.spawner.spawn("producer", [&] {
    env.clock.sleep(1ms);
    for (int i = 0; i < 40; ++i) EXPECT_TRUE(channel.offer("item " + std::to_string(i)));  // a takes them all
    env.clock.sleep(1ms);
    channel.push("late");  // b slept again after the burst
  });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  std::vector<std::string> expected;
  for (int i = 0; i < 40; ++i) expected.push_back("item " + std::to_string(i));
  EXPECT_EQ(got_a, expected);
  EXPECT_EQ(got_b, (std::vector<std::string>{"late"}));
}

TEST(OneThreadChannel, FifoAcrossGrowthWhileWrappedAndCloseWakesASleeper) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  runtime::Channel<std::string> channel(0, runtime::ChannelThreads::one_thread);
  std::vector<std::string> got;
  bool closed_seen = false;
  rt.run_on(0, [&] {
    int next_in = 0;
    // Keep 10 items queued while cycling, so the head moves round the 16-slot buffer, then grow
    // it (to 32, then 64) while the queue wraps.
    for (int round = 0; round < 50; ++round) {
      while (next_in < round + 10) channel.push(std::to_string(next_in++));
      got.push_back(channel.pop());
    }
    for (int i = 0; i < 40; ++i) channel.push(std::to_string(next_in++));
    while (!channel.empty()) got.push_back(channel.pop());
    env.spawner.spawn("closer", [&] {
      env.clock.sleep(1ms);
      channel.close();
    });
    try {
      channel.pop();
    } catch (const Error&) {
      closed_seen = true;
    }
    EXPECT_FALSE(channel.offer("after close"));
  });
  ASSERT_EQ(got.size(), 99u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], std::to_string(i));
  EXPECT_TRUE(closed_seen);
}

}  // namespace
}  // namespace dagsim::fibers
