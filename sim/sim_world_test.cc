// Tests of SimWorld: virtual time and per-node clocks, deterministic and seeded-random schedules,
// node lifecycle (fibers unwinding on death, restarts as fresh incarnations), every way a run
// ends, fiber failures reported without terminating the world, and the leaked-timed-wait assert.
#include <gtest/gtest.h>

#include <boost/fiber/operations.hpp>

#include "core/runtime/event.h"
#include "core/runtime/future.h"
#include "sim/sim_test_util.h"

namespace dagsim::sim {
namespace {

using namespace testing;

TEST(SimWorld, NodeClocksApplySkewAndDriftAndTimersFireOnLocalTime) {
  SimOptions options;
  options.seed = 11;
  options.clock_skew_max = 50ms;
  options.clock_drift_max_ppm = 1000;
  SimWorld world(options);
  std::vector<runtime::TimePoint> woke_world;
  for (int i = 0; i < 4; ++i) {
    world.add_node("n" + std::to_string(i), [&](runtime::Env& env) {
      const runtime::TimePoint local = env.clock.now();
      env.clock.sleep_until(local + std::chrono::seconds(10));
      EXPECT_GE(env.clock.now(), local + std::chrono::seconds(10));
      woke_world.push_back(world.now());
    });
    world.start(static_cast<WorkerId>(i));
  }
  world.run({});
  ASSERT_EQ(woke_world.size(), 4u);
  bool any_skewed = false;
  for (WorkerId i = 0; i < 4; ++i) {
    const NodeClock& clock = world.clock(i);
    EXPECT_GE(clock.skew(), Duration{0});
    EXPECT_LE(clock.skew(), Duration{50ms});
    EXPECT_LE(std::abs(clock.drift_ppm()), 1000);
    any_skewed |= clock.skew() != Duration{0} || clock.drift_ppm() != 0;
    // to_world is the least world time whose local reading reaches the local time.
    const runtime::TimePoint local = clock.to_local(at_ms(1234)) + Duration{1};
    const runtime::TimePoint w = clock.to_world(local);
    EXPECT_GE(clock.to_local(w), local);
    EXPECT_LT(clock.to_local(runtime::TimePoint{w.since_epoch - Duration{1}}), local);
  }
  EXPECT_TRUE(any_skewed);
  // A fast clock (positive drift) reaches 10 local seconds before 10 world seconds.
  EXPECT_NE(woke_world.front(), woke_world.back());
}

uint64_t ping_pong_hash(uint64_t seed, bool random_schedule) {
  SimOptions options;
  options.seed = seed;
  options.random_schedule = random_schedule;
  options.network.latency = LatencyModel::uniform(10us, 900us);
  SimWorld world(options);
  for (int i = 0; i < 3; ++i) {
    world.add_node("n" + std::to_string(i), [i](runtime::Env& env) {
      for (int f = 0; f < 3; ++f) {
        env.spawner.spawn("chatter", [&env, i, f] {
          for (int round = 0; round < 20; ++round) {
            env.transport.send(static_cast<WorkerId>((i + 1 + f % 2) % 3), runtime::Bytes{uint8_t(round)});
            env.log.event("round", std::to_string(round));
            boost::this_fiber::yield();
          }
        });
      }
      for (;;) env.transport.inbox().pop();
    });
    world.start(static_cast<WorkerId>(i));
  }
  world.run({.stop_at = at_ms(100)});
  return world.trace().hash();
}

TEST(SimWorld, SameSeedSameTraceHash) {
  EXPECT_EQ(ping_pong_hash(1, false), ping_pong_hash(1, false));
  EXPECT_EQ(ping_pong_hash(7, true), ping_pong_hash(7, true));
}

TEST(SimWorld, DifferentSeedsGiveDifferentRuns) {
  EXPECT_NE(ping_pong_hash(1, false), ping_pong_hash(2, false));
  EXPECT_NE(ping_pong_hash(1, true), ping_pong_hash(2, true));
  EXPECT_NE(ping_pong_hash(3, false), ping_pong_hash(3, true));
}

TEST(SimWorld, ForegroundFibersEndTheRunAndBackgroundFibersAreStopped) {
  SimWorld world({});
  int beats = 0;
  world.add_node("n0", [&](runtime::Env& env) {
    for (;;) {
      env.clock.sleep(1ms);
      ++beats;
    }
  });
  world.start(0);
  world.spawn_foreground(0, "work", [&world] { world.env(0).clock.sleep(10ms); });
  EXPECT_EQ(world.run({}), SimWorld::Outcome::finished);
  EXPECT_EQ(world.now(), at_ms(10));
  EXPECT_EQ(world.live_fibers(), 1u);
  world.shutdown();
  EXPECT_EQ(world.live_fibers(), 0u);
  EXPECT_EQ(world.state(0), NodeState::killed);
  EXPECT_GE(beats, 9);
}

TEST(SimWorld, DeadlockEndsWithAStuckReport) {
  runtime::Event never;  // outlives the world, whose shutdown unwinds the waiter
  SimWorld world({});
  world.add_node("n0");
  world.start(0);
  world.spawn_foreground(0, "waiter", [&never] { never.wait(); });
  EXPECT_EQ(world.run({}), SimWorld::Outcome::deadlock);
  const std::string report = world.stuck_report();
  EXPECT_NE(report.find("node n0"), std::string::npos) << report;
  EXPECT_NE(report.find("fiber waiter"), std::string::npos) << report;
  EXPECT_NE(report.find("waiting on Event::wait"), std::string::npos) << report;
}

TEST(SimWorld, MaxVirtualTimeEndsARunThatCannotFinish) {
  runtime::Event never;  // outlives the world, whose shutdown unwinds the waiter
  SimWorld world({});
  world.add_node("n0", [](runtime::Env& env) {
    for (;;) env.clock.sleep(std::chrono::seconds(1));
  });
  world.start(0);
  world.spawn_foreground(0, "waiter", [&never] { never.wait(); });
  EXPECT_EQ(world.run({.max_virtual_time = at_ms(5000)}), SimWorld::Outcome::time_limit);
  EXPECT_EQ(world.now(), at_ms(5000));
  EXPECT_NE(world.stuck_report().find("fiber waiter: waiting on Event::wait"), std::string::npos);
}

TEST(SimWorld, KilledNodesFibersUnwindAndRestartRunsMainAgain) {
  SimWorld world({});
  int starts = 0, unwound = 0;
  struct Unwind {
    int& count;
    ~Unwind() { ++count; }
  };
  world.add_node("n0", [&](runtime::Env& env) {
    ++starts;
    Unwind guard{unwound};
    env.spawner.spawn("child", [&env, &unwound] {
      Unwind child_guard{unwound};
      env.clock.sleep(std::chrono::hours(1));
    });
    env.transport.inbox().pop();
  });
  world.start(0);
  world.at(at_ms(5), "kill", [&] { world.kill(0); });
  world.at(at_ms(7), "restart", [&] { world.restart(0); });
  world.run({.stop_at = at_ms(10)});
  EXPECT_EQ(starts, 2);
  EXPECT_EQ(unwound, 2);  // both fibers of incarnation 0, by node_killed
  EXPECT_EQ(world.incarnation(0), 1u);
  EXPECT_EQ(world.live_fibers(), 2u);
  for (const FiberFailure& f : world.failures()) ADD_FAILURE() << f.node << "/" << f.fiber << ": " << f.what;
}

TEST(SimWorld, AnExceptionInANodeFiberIsReportedAgainstItsNode) {
  SimWorld world({});
  world.add_node("n0");
  world.add_node("n1", [](runtime::Env& env) {
    env.clock.sleep(3ms);
    throw std::runtime_error("boom");
  });
  world.start(0);
  world.start(1);
  world.spawn_foreground(0, "work", [&world] { world.env(0).clock.sleep(10ms); });
  EXPECT_EQ(world.run({}), SimWorld::Outcome::finished);
  ASSERT_EQ(world.failures().size(), 1u);
  EXPECT_EQ(world.failures()[0].node, "n1");
  EXPECT_EQ(world.failures()[0].fiber, "main");
  EXPECT_EQ(world.failures()[0].what, "boom");
  EXPECT_EQ(world.failures()[0].time, at_ms(3));
  EXPECT_EQ(world.trace().count(TraceKind::fiber_failed), 1u);
}

TEST(SimWorld, TimedWaitsOnFuturesUseTheNodeClock) {
  SimWorld world({});
  world.add_node("n0");
  world.start(0);
  bool timed_out = false;
  world.spawn_foreground(0, "waiter", [&] {
    runtime::Promise<int> promise;
    runtime::Future<int> future = promise.get_future();
    try {
      future.get_until(world.env(0).clock.now() + std::chrono::seconds(3));
    } catch (const Error& e) {
      timed_out = e.code() == ErrorCode::timed_out;
    }
  });
  world.run({});
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(world.now(), at_ms(3000));
}

TEST(SimWorld, AZeroDelayLoopIsALivelockNotAHang) {
  SimWorld world({});
  world.add_node("n0");
  world.start(0);
  world.spawn_foreground(0, "spinner", [&world] {
    for (;;) world.env(0).clock.sleep(Duration{0});
  });
  EXPECT_EQ(world.run({}), SimWorld::Outcome::livelock);
  EXPECT_EQ(world.now(), runtime::TimePoint{});
  EXPECT_NE(world.stuck_report().find("fiber spinner"), std::string::npos);
}

// The leaked wait is a day long, so the fiber is certainly still in Boost's sleep queue when the
// world next looks (a 1 ms wait could expire first on a loaded machine: the fiber then just ends
// and nothing asserts). The world asserts without waiting for real time, so the test stays fast.
TEST(SimWorldDeathTest, ABoostTimedWaitLeakingInIsAnAssertion) {
  EXPECT_DEATH(
      {
        SimWorld world({});
        world.add_node("n0", [](runtime::Env&) { boost::this_fiber::sleep_for(std::chrono::hours(24)); });
        world.start(0);
        world.run({});
      },
      "timed wait");
}

}  // namespace
}  // namespace dagsim::sim
