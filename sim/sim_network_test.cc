// Tests of SimNetwork against DESIGN.md's delivery contract: latency and bandwidth, per-connection
// order, partitions that hold and heal, connection timeouts, kills, crashes, refusals and
// injected connection failures.
#include <gtest/gtest.h>

#include "sim/sim_network.h"
#include "sim/sim_test_util.h"

namespace dagsim::sim {
namespace {

using namespace testing;
using runtime::Delivery;

SimOptions constant_latency(Duration latency) {
  SimOptions options;
  options.network.latency = LatencyModel::constant(latency);
  return options;
}

// Sends `texts` from node 0 to node 1 at world time `t`.
void send_at(SimWorld& world, runtime::TimePoint t, WorkerId from, WorkerId to, std::vector<std::string> msgs) {
  world.at(t, "send", [&world, from, to, msgs] {
    for (const std::string& m : msgs) world.env(from).transport.send(to, bytes_of(m));
  });
}

// Nodes "a" and "b", each recording what it receives, both started.
void start_recorded_pair(SimWorld& world, std::vector<Received>& a_log, std::vector<Received>& b_log) {
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
}

TEST(SimNetwork, ConstantLatencyDeliversInOrderAfterTheLatency) {
  SimWorld world(constant_latency(2ms));
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  send_at(world, at_ms(1), 0, 1, {"one", "two", "three"});
  EXPECT_EQ(world.run({.stop_at = at_ms(10)}), SimWorld::Outcome::finished);
  ASSERT_EQ(b_log.size(), 3u);
  EXPECT_EQ(texts(b_log), (std::vector<std::string>{"one", "two", "three"}));
  for (const Received& r : b_log) {
    EXPECT_EQ(r.time_us, 3000);
    EXPECT_EQ(r.peer, 0u);
  }
  EXPECT_EQ(world.network().stats().delivered, 3u);
}

TEST(SimNetwork, RandomLatencyNeverReordersAConnection) {
  SimOptions options;
  options.seed = 9;
  options.network.latency = LatencyModel{LatencyModel::Dist::exponential, 10us, 5ms, 1ms, Duration{0}};
  SimWorld world(options);
  std::vector<Received> log;
  world.add_node("a");
  world.add_node("b", recorder(log));
  world.start(0);
  world.start(1);
  std::vector<std::string> msgs;
  for (int i = 0; i < 200; ++i) msgs.push_back(std::to_string(i));
  send_at(world, at_ms(0), 0, 1, msgs);
  world.run({.stop_at = at_ms(100)});
  EXPECT_EQ(texts(log), msgs);
}

TEST(SimNetwork, LatencySamplesStayWithinTheirClamp) {
  Prng random(3);
  const LatencyModel normal{LatencyModel::Dist::normal, 100us, 300us, 200us, 500us};
  const LatencyModel uniform = LatencyModel::uniform(50us, 60us);
  bool saw_min = false, saw_max = false;
  for (int i = 0; i < 2000; ++i) {
    const Duration n = normal.sample(random);
    EXPECT_GE(n, Duration{100us});
    EXPECT_LE(n, Duration{300us});
    saw_min |= n == Duration{100us};
    saw_max |= n == Duration{300us};
    const Duration u = uniform.sample(random);
    EXPECT_GE(u, Duration{50us});
    EXPECT_LE(u, Duration{60us});
  }
  EXPECT_TRUE(saw_min && saw_max) << "a wide normal must hit both clamps";
}

TEST(SimNetwork, BandwidthDelaysBySizeAndQueuesBehindEarlierMessages) {
  SimOptions options = constant_latency(1ms);
  options.network.bandwidth_bytes_per_s = 1e6;  // 1 byte per microsecond
  SimWorld world(options);
  std::vector<Received> log;
  world.add_node("a");
  world.add_node("b", recorder(log));
  world.start(0);
  world.start(1);
  send_at(world, at_ms(0), 0, 1, {std::string(1000, 'x'), std::string(500, 'y')});
  world.run({.stop_at = at_ms(10)});
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].time_us, 2000);  // 1000 us on the wire + 1 ms latency
  EXPECT_EQ(log[1].time_us, 2500);  // queued behind the first
}

TEST(SimNetwork, PartitionHoldsTrafficAndHealReleasesItInOrder) {
  SimWorld world(constant_latency(1ms));
  std::vector<Received> log;
  world.add_node("a");
  world.add_node("b", recorder(log));
  world.start(0);
  world.start(1);
  uint64_t id = 0;
  world.at(at_ms(0), "partition", [&] { id = world.partition({{0, 1}}); });
  send_at(world, at_ms(1), 0, 1, {"held1", "held2"});
  world.at(at_ms(50), "heal", [&] { world.heal(id); });
  send_at(world, at_ms(60), 0, 1, {"after"});
  world.run({.stop_at = at_ms(100)});
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(texts(log), (std::vector<std::string>{"held1", "held2", "after"}));
  EXPECT_EQ(log[0].time_us, 50000);
  EXPECT_EQ(log[2].time_us, 61000);
}

TEST(SimNetwork, OneWayPartitionBlocksOnlyItsDirection) {
  SimWorld world(constant_latency(1ms));
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  world.at(at_ms(0), "partition", [&] { world.partition({{0, 1}}); });
  send_at(world, at_ms(1), 0, 1, {"a->b"});
  send_at(world, at_ms(1), 1, 0, {"b->a"});
  world.run({.stop_at = at_ms(100)});
  EXPECT_TRUE(b_log.empty());
  ASSERT_EQ(a_log.size(), 1u);
  EXPECT_EQ(a_log[0].text, "b->a");
}

TEST(SimNetwork, HeldTrafficPastConnectionTimeoutFailsBothEnds) {
  SimOptions options = constant_latency(1ms);
  options.network.connection_timeout = 20ms;
  SimWorld world(options);
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  world.at(at_ms(0), "partition", [&] { world.partition({{0, 1}, {1, 0}}); });
  send_at(world, at_ms(1), 0, 1, {"lost"});
  world.run({.stop_at = at_ms(100)});
  // Held from 2 ms (arrival), failed 20 ms later; both ends told then.
  ASSERT_EQ(a_log.size(), 1u);
  EXPECT_EQ(a_log[0].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(a_log[0].peer, 1u);
  EXPECT_EQ(a_log[0].time_us, 22000);
  EXPECT_NE(a_log[0].text.find("timed out"), std::string::npos) << a_log[0].text;
  ASSERT_EQ(b_log.size(), 1u);
  EXPECT_EQ(b_log[0].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(world.network().stats().delivered, 0u);
  EXPECT_EQ(world.network().stats().dropped, 1u);
}

TEST(SimNetwork, KillLosesInFlightTrafficAndPeersLearnAfterALatency) {
  SimWorld world(constant_latency(3ms));
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  send_at(world, at_ms(0), 1, 0, {"hello"});      // opens the connection, arrives at 3 ms
  send_at(world, at_ms(10), 0, 1, {"in flight"});  // would arrive at 13 ms
  world.at(at_ms(11), "kill", [&] { world.kill(1); });
  world.run({.stop_at = at_ms(50)});
  ASSERT_EQ(a_log.size(), 2u);
  EXPECT_EQ(a_log[0].text, "hello");
  EXPECT_EQ(a_log[1].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(a_log[1].time_us, 14000);
  EXPECT_NE(a_log[1].text.find("b died"), std::string::npos) << a_log[1].text;
  EXPECT_TRUE(b_log.empty() || b_log.size() == 0u);
  EXPECT_EQ(world.state(1), NodeState::killed);
}

TEST(SimNetwork, SendingToADeadNodeIsRefusedAfterALatency) {
  SimWorld world(constant_latency(2ms));
  std::vector<Received> log;
  world.add_node("a", recorder(log));
  world.add_node("b");  // never started
  world.start(0);
  send_at(world, at_ms(5), 0, 1, {"x", "y"});
  world.run({.stop_at = at_ms(50)});
  ASSERT_EQ(log.size(), 1u) << "one refusal; the second send is lost while the notice travels";
  EXPECT_EQ(log[0].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(log[0].time_us, 7000);
  EXPECT_NE(log[0].text.find("refused"), std::string::npos);
}

TEST(SimNetwork, ANewIncarnationIsNotSilencedByItsPredecessorsPendingNotice) {
  SimWorld world(constant_latency(1ms));
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  send_at(world, at_ms(0), 0, 1, {"hello"});
  world.at(at_ms(10), "restart b", [&] { world.restart(1); });   // a#0 would learn at 11 ms
  world.at(at_ms(10) + Duration{500us}, "restart a", [&] { world.restart(0); });
  send_at(world, at_ms(10) + Duration{600us}, 0, 1, {"from a#1"});
  world.run({.stop_at = at_ms(50)});
  EXPECT_EQ(texts(b_log), (std::vector<std::string>{"hello", "from a#1"}));
  EXPECT_TRUE(a_log.empty()) << "a#1 never had the old connection; a#0 died before its notice";
}

TEST(SimNetwork, DeliveriesNameThePeersIncarnation) {
  // A restarted peer's first message and the notice that its predecessor died race; whichever
  // comes first, each names the incarnation it is about.
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    SimOptions options;
    options.seed = seed;
    options.network.latency = LatencyModel::uniform(1ms, 9ms);
    SimWorld world(options);
    std::vector<Delivery> a_log;
    world.add_node("a", [&a_log](runtime::Env& env) {
      for (;;) a_log.push_back(env.transport.inbox().pop());
    });
    world.add_node("b");
    world.start(0);
    world.start(1);
    send_at(world, at_ms(0), 0, 1, {"hello"});
    send_at(world, at_ms(5), 1, 0, {"from b#0"});
    world.at(at_ms(20), "restart b", [&] { world.restart(1); });
    send_at(world, at_ms(20), 1, 0, {"from b#1"});
    world.run({.stop_at = at_ms(100)});
    ASSERT_EQ(a_log.size(), 3u);
    EXPECT_EQ(a_log[0].peer_incarnation, 0u);
    for (const Delivery& d : a_log) {
      if (d.kind == Delivery::Kind::peer_failed) {
        EXPECT_EQ(d.peer_incarnation, 0u);
      } else if (std::string(d.payload.begin(), d.payload.end()) == "from b#1") {
        EXPECT_EQ(d.peer_incarnation, 1u);
      }
    }
  }
}

TEST(SimNetwork, AResetDoesNotCrossAPartition) {
  SimOptions options = constant_latency(1ms);
  options.network.connection_timeout = 40ms;
  SimWorld world(options);
  std::vector<Received> a_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b");
  world.start(0);
  world.start(1);
  send_at(world, at_ms(0), 0, 1, {"hello"});
  world.at(at_ms(5), "partition", [&] { world.partition({{0, 1}, {1, 0}}); });
  world.at(at_ms(10), "kill b", [&] { world.kill(1); });
  world.run({.stop_at = at_ms(100)});
  ASSERT_EQ(a_log.size(), 1u);
  EXPECT_EQ(a_log[0].time_us, 50000) << "told by its own timeout, not by a reset";
  EXPECT_NE(a_log[0].text.find("timed out"), std::string::npos) << a_log[0].text;
}

TEST(SimNetwork, AResetHeldByAPartitionArrivesAboutALatencyAfterTheHeal) {
  // The end's next retransmission meets the reset once the partition heals: it learns then, not
  // at its own timeout, and loses what it sends until it has learned, and nothing after.
  SimOptions options = constant_latency(1ms);
  options.network.connection_timeout = 40ms;
  SimWorld world(options);
  std::vector<Received> a_log, b_log;
  start_recorded_pair(world, a_log, b_log);
  send_at(world, at_ms(0), 0, 1, {"hello"});
  world.at(at_ms(5), "partition", [&] { world.partition({{0, 1}, {1, 0}}); });
  world.at(at_ms(10), "kill b", [&] { world.kill(1); });
  world.at(at_ms(12), "restart b", [&] { world.restart(1); });
  send_at(world, at_ms(15), 0, 1, {"lost: a has not learned"});
  world.at(at_ms(20), "heal", [&] { world.heal_all(); });
  send_at(world, at_ms(20) + Duration{500us}, 0, 1, {"lost: the reset is on its way"});
  send_at(world, at_ms(22), 0, 1, {"to b#1"});
  world.run({.stop_at = at_ms(100)});
  ASSERT_EQ(a_log.size(), 1u);
  EXPECT_EQ(a_log[0].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(a_log[0].time_us, 21000) << "one latency after the heal, not at the 50 ms timeout";
  EXPECT_EQ(a_log[0].text, "connection to b reset: b died");
  EXPECT_EQ(texts(b_log), (std::vector<std::string>{"hello", "to b#1"}));
}

TEST(SimNetwork, ANewConnectionsFirstMessageTellsItsReceiverTheOldOneFailed) {
  // b cannot hear a's reset (a -> b is cut), but a#1's first message, released by the heal, names
  // a new incarnation: b learns of the old connection's failure then, before reading it, and what
  // b sent in between, on the connection it still believed in, is lost.
  SimOptions options = constant_latency(1ms);
  options.network.connection_timeout = 40ms;
  SimWorld world(options);
  std::vector<Received> a_log, b_log;
  start_recorded_pair(world, a_log, b_log);
  send_at(world, at_ms(0), 0, 1, {"hello"});
  world.at(at_ms(5), "partition", [&] { world.partition({{0, 1}}); });
  world.at(at_ms(10), "kill a", [&] { world.kill(0); });
  world.at(at_ms(12), "restart a", [&] { world.restart(0); });
  send_at(world, at_ms(15), 0, 1, {"from a#1"});
  send_at(world, at_ms(18), 1, 0, {"lost: b has not learned"});
  world.at(at_ms(20), "heal", [&] { world.heal_all(); });
  send_at(world, at_ms(25), 1, 0, {"to a#1"});
  world.run({.stop_at = at_ms(100)});
  ASSERT_EQ(b_log.size(), 3u);
  EXPECT_EQ(b_log[0].text, "hello");
  EXPECT_EQ(b_log[1].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(b_log[1].time_us, 20000);
  EXPECT_EQ(b_log[2].text, "from a#1");
  EXPECT_EQ(b_log[2].time_us, 20000);
  EXPECT_EQ(texts(a_log), (std::vector<std::string>{"to a#1"}));
}

TEST(SimNetwork, CrashIsSilenceUntilTheConnectionTimesOut) {
  SimOptions options = constant_latency(1ms);
  options.network.connection_timeout = 30ms;
  SimWorld world(options);
  std::vector<Received> log;
  world.add_node("a", recorder(log));
  world.add_node("b");
  world.start(0);
  world.start(1);
  world.at(at_ms(0), "crash", [&] { world.crash(1); });
  send_at(world, at_ms(10), 0, 1, {"into the void"});
  world.run({.stop_at = at_ms(100)});
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(log[0].time_us, 41000);  // arrived (held) at 11 ms, failed 30 ms later
}

TEST(SimNetwork, RestartedNodeIsAFreshIncarnationThatResetsOldConnections) {
  SimWorld world(constant_latency(1ms));
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  send_at(world, at_ms(0), 0, 1, {"to b#0"});
  world.at(at_ms(5), "crash", [&] { world.crash(1); });
  world.at(at_ms(6), "restart", [&] { world.restart(1); });
  send_at(world, at_ms(20), 0, 1, {"to b#1"});
  world.run({.stop_at = at_ms(50)});
  EXPECT_EQ(world.incarnation(1), 1u);
  // a learns the old connection reset; its next message goes to the new incarnation.
  ASSERT_EQ(a_log.size(), 1u);
  EXPECT_EQ(a_log[0].kind, Delivery::Kind::peer_failed);
  EXPECT_EQ(a_log[0].time_us, 7000);
  EXPECT_EQ(texts(b_log), (std::vector<std::string>{"to b#0", "to b#1"}));
}

TEST(SimNetwork, InjectedConnectionFailuresTellBothEndsAndLoseNothingSilently) {
  SimOptions options = constant_latency(1ms);
  options.seed = 5;
  options.network.connection_failure_rate = 0.2;
  SimWorld world(options);
  std::vector<Received> a_log, b_log;
  world.add_node("a", recorder(a_log));
  world.add_node("b", recorder(b_log));
  world.start(0);
  world.start(1);
  for (int i = 0; i < 100; ++i) send_at(world, at_ms(10 * i), 0, 1, {std::to_string(i)});
  world.run({.stop_at = at_ms(2000)});
  const NetworkStats& stats = world.network().stats();
  EXPECT_GT(stats.connection_failures, 5u);
  EXPECT_EQ(stats.delivered + stats.dropped, stats.sent);
  EXPECT_EQ(b_log.size(), stats.delivered + stats.connection_failures);  // messages + notices
  // Both ends hear of every failure, each naming the other, one latency (1 ms) after it: a, which
  // only sends, hears nothing else, and its notices come at the same times as b's.
  std::vector<int64_t> a_notices_us, b_notices_us;
  for (const Received& r : a_log) {
    EXPECT_EQ(r.kind, Delivery::Kind::peer_failed);
    EXPECT_EQ(r.peer, 1u);
    EXPECT_NE(r.text.find("injected"), std::string::npos) << r.text;
    a_notices_us.push_back(r.time_us);
  }
  for (const Received& r : b_log) {
    if (r.kind != Delivery::Kind::peer_failed) continue;
    EXPECT_EQ(r.peer, 0u);
    b_notices_us.push_back(r.time_us);
  }
  EXPECT_EQ(a_notices_us.size(), stats.connection_failures);
  EXPECT_EQ(a_notices_us, b_notices_us);
  // Delivered messages are still in send order.
  int last = -1;
  for (const Received& r : b_log) {
    if (r.kind != Delivery::Kind::message) continue;
    EXPECT_GT(std::stoi(r.text), last);
    last = std::stoi(r.text);
  }
}

TEST(SimNetwork, PausedNodeReceivesHeldTrafficAndFiresTimersOnResume) {
  SimWorld world(constant_latency(1ms));
  std::vector<Received> log;
  std::vector<int64_t> woke_us;
  world.add_node("a");
  world.add_node("b", [&](runtime::Env& env) {
    env.spawner.spawn("sleeper", [&env, &woke_us] {
      env.clock.sleep(10ms);
      woke_us.push_back(env.clock.now().ns() / 1000);
    });
    recorder(log)(env);
  });
  world.start(0);
  world.start(1);
  world.at(at_ms(5), "pause", [&] { world.pause(1); });
  send_at(world, at_ms(6), 0, 1, {"while paused"});
  world.at(at_ms(30), "resume", [&] { world.resume(1); });
  world.run({.stop_at = at_ms(50)});
  EXPECT_EQ(woke_us, (std::vector<int64_t>{30000}));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].time_us, 30000);
}

// Many connections: the connection index grows (rebuilt at 32, 64, ... connections) while
// connections already carry traffic, and every message still arrives once, in order per link.
// A kill then resets all of one node's connections, each peer told once.
TEST(SimNetwork, ManyConnectionsEachDeliverInOrderAcrossIndexGrowth) {
  constexpr WorkerId kNodes = 48;  // 1128 connections
  SimWorld world(constant_latency(1ms));
  std::vector<std::vector<Received>> logs(kNodes);
  for (WorkerId i = 0; i < kNodes; ++i) world.add_node("n" + std::to_string(i), recorder(logs[i]));
  for (WorkerId i = 0; i < kNodes; ++i) world.start(i);
  for (int round = 0; round < 3; ++round) {
    world.at(at_ms(1 + round), "send", [&world, round] {
      for (WorkerId from = 0; from < kNodes; ++from) {
        for (WorkerId to = 0; to < kNodes; ++to) {
          if (to != from) world.env(from).transport.send(to, bytes_of(std::to_string(from) + ":" + std::to_string(round)));
        }
      }
    });
  }
  world.at(at_ms(10), "kill", [&world] { world.kill(7); });
  EXPECT_EQ(world.run({.stop_at = at_ms(20)}), SimWorld::Outcome::finished);
  EXPECT_EQ(world.network().stats().delivered, uint64_t{kNodes} * (kNodes - 1) * 3);
  for (WorkerId to = 0; to < kNodes; ++to) {
    if (to == 7) continue;
    std::vector<int> next_round(kNodes, 0);
    int failures = 0;
    for (const Received& r : logs[to]) {
      if (r.kind == Delivery::Kind::peer_failed) {
        EXPECT_EQ(r.peer, 7u);
        ++failures;
        continue;
      }
      EXPECT_EQ(r.text, std::to_string(r.peer) + ":" + std::to_string(next_round[r.peer]++));
    }
    for (WorkerId from = 0; from < kNodes; ++from) EXPECT_EQ(next_round[from], from == to ? 0 : 3);
    EXPECT_EQ(failures, 1) << "node " << to;
  }
}

}  // namespace
}  // namespace dagsim::sim
