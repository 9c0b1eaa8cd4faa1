// A cluster node's life under the TCP launcher (node_life.h): the launcher's moves pass with what
// must hold after them, an illegal move dies, and so does a legal one whose postcondition fails.
#include "scenarios/run/node_life.h"

#include <gtest/gtest.h>

namespace dagsim::scenarios {
namespace {

using runtime::NodeState;

constexpr NodeLifeFacts kUp{NodeState::up, false, false};
constexpr NodeLifeFacts kSpoke{NodeState::up, true, false};
constexpr NodeLifeFacts kRunning{NodeState::up, true, true};

TEST(NodeLife, ANodeLaunchesSaysHelloStartsWorksAndFinishes) {
  NodeLife life = NodeLife::unborn;
  transition(life, NodeLife::launched, kUp);
  EXPECT_FALSE(said_hello(life));
  transition(life, NodeLife::hello, kSpoke);
  EXPECT_TRUE(said_hello(life));
  EXPECT_FALSE(told_to_start(life));
  EXPECT_FALSE(report_allowed(life));  // a report before the start is ignored by the launcher
  transition(life, NodeLife::started, kRunning);
  transition(life, NodeLife::busy, kRunning);
  transition(life, NodeLife::idle, kRunning);
  transition(life, NodeLife::busy, kRunning);
  transition(life, NodeLife::idle, kRunning);
  transition(life, NodeLife::finished, kRunning);
  EXPECT_FALSE(report_allowed(life));
  EXPECT_FALSE(finish_allowed(life));
  EXPECT_EQ(node_life_name(life), "finished");
}

TEST(NodeLife, ARestartIsPendingUntilTheNewProcessSaysHelloOrDies) {
  NodeLife life = NodeLife::busy;
  transition(life, NodeLife::relaunched, kUp);
  EXPECT_TRUE(restart_pending(life));
  transition(life, NodeLife::hello, kSpoke);  // the restart is recorded with the hello
  EXPECT_FALSE(restart_pending(life));
  transition(life, NodeLife::relaunched, kUp);
  // Killed before its hello: the restart is recorded at its end, the node no longer up.
  transition(life, NodeLife::launched, NodeLifeFacts{NodeState::killed, false, true});
  EXPECT_FALSE(restart_pending(life));
}

TEST(NodeLifeDeathTest, AnIllegalMoveDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  NodeLife life = NodeLife::launched;
  EXPECT_DEATH(transition(life, NodeLife::started, kRunning), "node life launched -> started");
  NodeLife unborn = NodeLife::unborn;
  EXPECT_DEATH(transition(unborn, NodeLife::busy, kRunning), "node life unborn -> busy");
  NodeLife hello = NodeLife::hello;
  EXPECT_DEATH(transition(hello, NodeLife::idle, kRunning), "node life hello -> idle");
}

TEST(NodeLifeDeathTest, ABrokenPostconditionDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  NodeLife hello = NodeLife::hello;
  EXPECT_DEATH(transition(hello, NodeLife::started, kSpoke), "run_started");  // Start before the run began
  NodeLife unborn = NodeLife::unborn;
  EXPECT_DEATH(transition(unborn, NodeLife::launched, NodeLifeFacts{NodeState::killed, false, false}), "NodeState::up");
  NodeLife launched = NodeLife::launched;
  EXPECT_DEATH(transition(launched, NodeLife::hello, kUp), "has_link");
}

}  // namespace
}  // namespace dagsim::scenarios
