// Tests of the seam's contracts as the simulator keeps them: wall time (world time plus each
// node's skew and drift), cancellation scopes under node death and restart, stuck reports that
// name scopes, and Transport::close.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "core/runtime/cancel_scope.h"
#include "core/runtime/event.h"
#include "sim/sim_test_util.h"

namespace dagsim::sim {
namespace {

using namespace testing;

// Each node's wall_now() (through its Env's Clock) at world time `when`, read on the driver.
std::vector<runtime::TimePoint> wall_times_at(SimWorld& world, size_t nodes, runtime::TimePoint when) {
  std::vector<runtime::Clock*> clocks(nodes);
  for (size_t i = 0; i < nodes; ++i) {
    world.add_node("n" + std::to_string(i), [&clocks, i](runtime::Env& env) { clocks[i] = &env.clock; });
    world.start(static_cast<WorkerId>(i));
  }
  std::vector<runtime::TimePoint> wall(nodes);
  world.at(when, "read wall clocks", [&] {
    EXPECT_EQ(world.now(), when);
    for (size_t i = 0; i < nodes; ++i) wall[i] = clocks[i]->wall_now();
  });
  world.run({});
  return wall;
}

TEST(SimWallTime, NodesDifferByExactlyTheirConfiguredSkew) {
  SimOptions options;
  options.seed = 5;
  options.clock_skew_max = 40ms;
  SimWorld world(options);
  const runtime::TimePoint when = at_ms(2500);
  const std::vector<runtime::TimePoint> wall = wall_times_at(world, 4, when);
  std::set<int64_t> skews;
  for (WorkerId i = 0; i < 4; ++i) {
    const Duration skew = world.clock(i).skew();
    skews.insert(skew.count());
    EXPECT_EQ(world.clock(i).drift_ppm(), 0);
    EXPECT_EQ(wall[i] - when, skew) << "node " << i;
    for (WorkerId j = 0; j < 4; ++j) EXPECT_EQ(wall[i] - wall[j], skew - world.clock(j).skew());
  }
  EXPECT_GT(skews.size(), 1u);  // the seed gave the nodes different skews
}

TEST(SimWallTime, DriftAddsDriftTimesElapsedWorldTime) {
  SimOptions options;
  options.seed = 9;
  options.clock_skew_max = 10ms;
  options.clock_drift_max_ppm = 500;
  SimWorld world(options);
  const runtime::TimePoint when = at_ms(60'000);
  const std::vector<runtime::TimePoint> wall = wall_times_at(world, 3, when);
  bool any_drift = false;
  for (WorkerId i = 0; i < 3; ++i) {
    const int64_t ppm = world.clock(i).drift_ppm();
    any_drift |= ppm != 0;
    // A minute at `ppm` parts per million: ppm × 60 µs, exactly (60 s × 1e9 ns is a multiple of 1e6).
    const Duration expected = world.clock(i).skew() + Duration{when.ns() / 1'000'000 * ppm};
    EXPECT_EQ(wall[i] - when, expected) << "node " << i << ", drift " << ppm << " ppm";
  }
  EXPECT_TRUE(any_drift);
}

TEST(SimScopes, ScopeCancelUnwindsOnlyItsFibersAndDeathStillWins) {
  std::map<std::string, std::string> ended;
  std::unique_ptr<runtime::CancelScope> keepalive;
  SimWorld world(SimOptions{});  // after what its fibers use: destroyed (and joined) first
  auto record = [&ended](std::string what) {
    return [&ended, what] {
      try {
        runtime::Event().wait();
        ended[what] = "ok";
      } catch (const Error& e) {
        ended[what] = std::string(error_name(e.code()));
        throw;
      }
    };
  };
  world.add_node("n0", [&](runtime::Env& env) {
    keepalive = std::make_unique<runtime::CancelScope>("keepalive");
    env.spawner.spawn(*keepalive, "beat", record("beat"));
    record("main")();
  });
  world.start(0);
  EXPECT_EQ(world.run({.stop_at = at_ms(10)}), SimWorld::Outcome::finished);
  const std::string report = world.stuck_report();
  EXPECT_NE(report.find("fiber beat in scope keepalive: waiting on Event::wait"), std::string::npos) << report;

  world.at(at_ms(20), "cancel keepalive", [&] { keepalive->cancel(); });
  world.run({.stop_at = at_ms(30)});
  EXPECT_EQ(ended, (std::map<std::string, std::string>{{"beat", "cancelled"}}));
  EXPECT_EQ(world.state(0), NodeState::up);
  EXPECT_TRUE(world.failures().empty());

  world.kill(0);
  world.run({.stop_at = at_ms(40)});
  EXPECT_EQ(ended.at("main"), "node_killed");
}

TEST(SimScopes, ADeadIncarnationsScopeRefusesSpawnsWithNodeKilled) {
  std::unique_ptr<runtime::CancelScope> scope;
  runtime::Spawner* spawner = nullptr;
  SimWorld world(SimOptions{});
  world.add_node("n0", [&](runtime::Env& env) {
    scope = std::make_unique<runtime::CancelScope>("s", env.spawner);
    spawner = &env.spawner;
  });
  world.start(0);
  world.run({});
  world.kill(0);
  ASSERT_NE(spawner, nullptr);
  try {
    spawner->spawn(*scope, "late", [] {});
    FAIL() << "spawn into a dead incarnation's scope must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::node_killed);
  }
}

TEST(SimTransportClose, ClosedTransportRefusesSendsDropsArrivalsAndUnwindsItsReader) {
  std::string reader_end, send_error;
  runtime::Env* closing = nullptr;
  SimWorld world(SimOptions{});
  world.add_node("closer", [&](runtime::Env& env) {
    closing = &env;
    env.spawner.spawn("reader", [&env, &reader_end] {
      try {
        for (;;) env.transport.inbox().pop();
      } catch (const Error& e) {
        reader_end = std::string(error_name(e.code()));
      }
    });
    env.clock.sleep(5ms);
    env.transport.close();
    env.transport.close();  // idempotent
    try {
      env.transport.send(1, bytes_of("after close"));
    } catch (const Error& e) {
      send_error = std::string(error_name(e.code()));
    }
  });
  world.add_node("sender", [](runtime::Env& env) {
    env.clock.sleep(10ms);
    env.transport.send(0, bytes_of("to a closed inbox"));  // dropped, never thrown at the driver
    env.clock.sleep(10ms);
  });
  world.start(0);
  world.start(1);
  EXPECT_EQ(world.run({}), SimWorld::Outcome::idle);
  EXPECT_EQ(reader_end, "channel_closed");
  EXPECT_EQ(send_error, "channel_closed");
  ASSERT_NE(closing, nullptr);
  EXPECT_TRUE(closing->transport.inbox().empty());
  EXPECT_TRUE(world.failures().empty());
}

}  // namespace
}  // namespace dagsim::sim
