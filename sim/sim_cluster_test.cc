// SimWorld as a runtime::Cluster: everything a runner or a fault timeline does goes through the
// runtime-neutral interface (nodes by name and incarnation, the lifecycle, partitions, events at
// scenario times, the fault history as data), and means what it means in the simulator.
#include <gtest/gtest.h>

#include "core/runtime/cluster.h"
#include "sim/sim_test_util.h"

namespace dagsim::sim {
namespace {

using namespace testing;
using runtime::Cluster;
using runtime::FaultEvent;
using runtime::NodeState;
using runtime::TimePoint;

// Drives `cluster` through the interface only, as the fault timeline does (its nodes are the
// runtime's to make: a, b and c here).
void drive(Cluster& cluster) {
  for (WorkerId id = 0; id < cluster.num_nodes(); ++id) cluster.start(id);
  const WorkerId b = *cluster.find_node("b");
  const WorkerId c = *cluster.find_node("c");
  cluster.at(TimePoint{1s}, "kill b", [&cluster, b] { cluster.kill(b); });
  cluster.at(TimePoint{2s}, "restart b", [&cluster, b] { cluster.restart(b); });
  cluster.at(TimePoint{3s}, "partition", [&cluster, b, c] { cluster.partition({{b, c}}); });
  cluster.at(TimePoint{4s}, "heal", [&cluster] { cluster.heal_all(); });
  cluster.at(TimePoint{5s}, "crash c", [&cluster, c] { cluster.crash(c); });
}

TEST(SimCluster, TheClusterInterfaceDrivesTheWorldAndRecordsItsHistory) {
  SimWorld world({});
  std::vector<uint32_t> seen;
  for (const char* name : {"a", "b", "c"}) {
    world.add_node(name, [&seen](runtime::Env& env) {
      seen.push_back(env.self * 100 + env.incarnation);
      for (;;) env.clock.sleep(std::chrono::milliseconds(10));
    });
  }
  drive(world);
  EXPECT_EQ(world.find_node("b"), WorkerId{1});
  EXPECT_EQ(world.find_node("z"), std::nullopt);
  world.run({.stop_at = TimePoint{6s}});
  const Cluster& cluster = world;
  EXPECT_EQ(cluster.now(), TimePoint{6s});
  EXPECT_EQ(cluster.state(0), NodeState::up);
  EXPECT_EQ(cluster.state(1), NodeState::up);
  EXPECT_EQ(cluster.state(2), NodeState::crashed);
  EXPECT_EQ(cluster.incarnation(1), 1u) << "a restart begins a new incarnation";
  EXPECT_EQ(cluster.incarnation(2), 0u) << "a crashed node keeps its last incarnation's number";
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, 100, 200, 101}));

  std::vector<std::pair<FaultEvent::Kind, int64_t>> history;
  for (const FaultEvent& e : cluster.fault_history()) history.emplace_back(e.kind, e.time.ns() / 1'000'000);
  using K = FaultEvent::Kind;
  const std::vector<std::pair<FaultEvent::Kind, int64_t>> expected = {
      {K::start, 0}, {K::start, 0}, {K::start, 0},    {K::kill, 1000},
      {K::restart, 2000}, {K::partition, 3000}, {K::heal, 4000}, {K::crash, 5000}};
  EXPECT_EQ(history, expected);
  const FaultEvent& partition = cluster.fault_history()[5];
  EXPECT_EQ(partition.blocked, (std::vector<std::pair<WorkerId, WorkerId>>{{1, 2}}));
  world.shutdown();
}

TEST(SimCluster, NamesOfStatesAndFaultKindsRoundTrip) {
  for (auto s : {NodeState::not_started, NodeState::up, NodeState::paused, NodeState::killed, NodeState::crashed}) {
    NodeState back;
    ASSERT_TRUE(runtime::parse_node_state(runtime::node_state_name(s), back));
    EXPECT_EQ(back, s);
  }
  for (uint8_t k = 0; k <= static_cast<uint8_t>(FaultEvent::Kind::connection_failed); ++k) {
    const auto kind = static_cast<FaultEvent::Kind>(k);
    FaultEvent::Kind back;
    ASSERT_TRUE(runtime::parse_fault_event_kind(runtime::fault_event_kind_name(kind), back));
    EXPECT_EQ(back, kind);
  }
  NodeState state;
  EXPECT_FALSE(runtime::parse_node_state("zombie", state));
}

}  // namespace
}  // namespace dagsim::sim
