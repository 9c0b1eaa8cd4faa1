// Whole rounds driven through the pure decide-and-apply loop as the executor will drive them
// (shared/reference/rendezvous.md §1 "Executor"), without a store: one node at a time on one
// shared state, so every write succeeds. Formation with a last call (L1), a late joiner's restart
// cascade (L5), a spare taking a freed seat (L3), and a participant's heartbeat expiring in a
// complete round, with re-rendezvous (issue 11 item 4) and without it (PyTorch's gap, L6).
#include <gtest/gtest.h>

#include "core/rendezvous/rendezvous_test_util.h"
#include "core/rendezvous/rendezvous_ops.h"

namespace dagsim::rendezvous {
namespace {

using namespace testing;

using std::chrono::seconds;

// One simulated place: the shared state and a clock whose local and wall readings coincide.
struct Rendezvous {
  RendezvousSettings settings;
  RendezvousState state;
  TimePoint time = at_s(0);

  // The executor's loop minus the store: decide, apply, repeat until an action that changes no
  // state, which it returns. The op deadline is the join timeout from now unless given, reset
  // when the node leaves the redundancy list (PyTorch's update_deadline).
  Action run(RendezvousOp op, const NodeDesc& node, std::optional<TimePoint> op_deadline = std::nullopt) {
    TimePoint deadline = op_deadline.value_or(time + settings.timeout.join);
    for (int step = 0; step < 16; ++step) {
      const Action action = op(state, node, settings, ClockReading{time, time}, deadline);
      if (!changes_state(action)) return action;
      state = apply(state, action, node, settings, time);
      if (action == Action::remove_from_redundancy_list) deadline = time + settings.timeout.join;
    }
    ADD_FAILURE() << "no settled action for " << node << " in 16 steps: " << state;
    return Action::sync;
  }
  // What a node sees at its next sync: the state, sanitized by its clock.
  void sync() { state = sanitize(state, settings, time); }
  uint32_t rank(const NodeDesc& node) const { return state.participants.at(node); }
};

// L1 and S2: with min < max the round completes after the last call (30 s after the min-th
// join), not before; ranks follow node order.
TEST(Rounds, MinBelowMaxCompletesAfterTheLastCall) {
  Rendezvous r{settings(2, 3), {}, at_s(0)};
  EXPECT_EQ(r.run(join_op, nd("b")), Action::sync);
  r.time = at_s(1);
  EXPECT_EQ(r.run(join_op, nd("a")), Action::sync);
  EXPECT_EQ(r.state.deadline, at_s(31));
  r.time = at_s(31);
  EXPECT_EQ(r.run(join_op, nd("b")), Action::sync);  // a heartbeat, but the last call is not over
  EXPECT_FALSE(r.state.complete);
  r.time = at_s(32);
  EXPECT_EQ(r.run(join_op, nd("b")), Action::finish);
  EXPECT_EQ(r.run(join_op, nd("a")), Action::finish);
  EXPECT_EQ(r.rank(nd("a")), 0u);
  EXPECT_EQ(r.rank(nd("b")), 1u);
}

// L5: a late joiner waits; every agent sees it waiting and restarts (exit, then join); the last
// one out advances the round, and the next round takes everyone.
TEST(Rounds, ALateJoinerMakesEveryAgentRestartIntoTheNextRound) {
  Rendezvous r{settings(2, 3), {}, at_s(0)};
  r.run(join_op, nd("a"));
  r.run(join_op, nd("b"));
  r.time = at_s(31);
  ASSERT_EQ(r.run(join_op, nd("a")), Action::finish);
  r.time = at_s(40);
  EXPECT_EQ(r.run(join_op, nd("c")), Action::sync);
  EXPECT_EQ(num_nodes_waiting(r.state), 1u);

  EXPECT_EQ(r.run(exit_op, nd("a")), Action::finish);
  EXPECT_EQ(r.run(join_op, nd("a")), Action::sync);  // b still holds the old round: a waits too
  EXPECT_EQ(r.state.wait_list, (std::set<NodeDesc>{nd("a"), nd("c")}));
  EXPECT_EQ(r.run(exit_op, nd("b")), Action::finish);
  EXPECT_EQ(r.state.round, 1u);
  EXPECT_FALSE(r.state.complete);
  r.run(join_op, nd("b"));
  r.run(join_op, nd("a"));
  EXPECT_EQ(r.run(join_op, nd("c")), Action::finish);  // the max-th join completes at once
  EXPECT_EQ(r.state.participants, (std::map<NodeDesc, uint32_t>{{nd("a"), 0}, {nd("b"), 1}, {nd("c"), 2}}));
  EXPECT_TRUE(r.state.wait_list.empty());
}

// L3: a spare of a full round waits without timing out, takes the seat a participant frees (via
// the wait list), and the survivors' restart forms a new full round with it.
TEST(Rounds, ASpareTakesAFreedSeat) {
  Rendezvous r{settings(2, 2), {}, at_s(0)};
  r.run(join_op, nd("a"));
  ASSERT_EQ(r.run(join_op, nd("b")), Action::finish);
  EXPECT_EQ(r.run(join_op, nd("s")), Action::sync);
  EXPECT_EQ(r.state.redundancy_list, std::set<NodeDesc>{nd("s")});
  EXPECT_EQ(num_nodes_waiting(r.state), 0u);  // S9: spares never trigger a restart
  r.time = at_s(700);  // past the spare's join deadline (600 s): it heartbeats and waits on
  EXPECT_EQ(r.run(join_op, nd("s"), at_s(600)), Action::sync);
  EXPECT_EQ(r.state.last_heartbeats.at(nd("s")), at_s(700));

  EXPECT_EQ(r.run(exit_op, nd("b")), Action::finish);  // b's agent restarts
  EXPECT_EQ(r.run(join_op, nd("s")), Action::sync);    // off the redundancy list, onto the wait list
  EXPECT_EQ(r.state.wait_list, std::set<NodeDesc>{nd("s")});
  EXPECT_EQ(r.run(join_op, nd("b")), Action::sync);
  EXPECT_EQ(r.run(exit_op, nd("a")), Action::finish);  // a sees nodes waiting and restarts
  EXPECT_EQ(r.state.round, 1u);
  r.run(join_op, nd("s"));
  EXPECT_EQ(r.run(join_op, nd("a")), Action::finish);
  EXPECT_EQ(r.state.participants, (std::map<NodeDesc, uint32_t>{{nd("a"), 0}, {nd("s"), 1}}));
  EXPECT_EQ(r.state.wait_list, std::set<NodeDesc>{nd("b")});
}

// Forms a, b, c (max 3) at 0 s; a and b heartbeat at 10 s, c is dead from the start; at 16 s c's
// last heartbeat is more than 15 s old.
Rendezvous complete_round_with_dead_c(bool rerendezvous_on_expiry) {
  Rendezvous r{settings(2, 3), {}, at_s(0)};
  r.settings.rerendezvous_on_expiry = rerendezvous_on_expiry;
  r.run(join_op, nd("a"));
  r.run(join_op, nd("b"));
  EXPECT_EQ(r.run(join_op, nd("c")), Action::finish);
  r.time = at_s(10);
  EXPECT_EQ(r.run(keep_alive_op, nd("a")), Action::finish);
  EXPECT_EQ(r.run(keep_alive_op, nd("b")), Action::finish);
  EXPECT_EQ(r.state.last_heartbeats.at(nd("a")), at_s(10));
  r.time = at_s(16);
  r.sync();
  EXPECT_FALSE(r.state.participants.contains(nd("c")));
  return r;
}

// Issue 11 item 4: the dead participant's expiry makes the survivors' agents see a waiting node;
// they restart and form the next round without it.
TEST(Rounds, ADeadParticipantMakesTheSurvivorsReform) {
  Rendezvous r = complete_round_with_dead_c(true);
  EXPECT_EQ(num_nodes_waiting(r.state), 1u);
  EXPECT_EQ(r.run(exit_op, nd("a")), Action::finish);
  EXPECT_EQ(r.run(join_op, nd("a")), Action::sync);
  EXPECT_EQ(num_nodes_waiting(r.state), 2u);  // a on the wait list, and the request
  EXPECT_EQ(r.run(exit_op, nd("b")), Action::finish);
  EXPECT_EQ(r.state.round, 1u);
  EXPECT_FALSE(r.state.rerendezvous_requested);
  r.run(join_op, nd("b"));
  r.run(join_op, nd("a"));
  r.time = at_s(47);  // the last call, 30 s after the min-th join at 16 s
  EXPECT_EQ(r.run(join_op, nd("a")), Action::finish);
  EXPECT_EQ(r.state.participants, (std::map<NodeDesc, uint32_t>{{nd("a"), 0}, {nd("b"), 1}}));
  EXPECT_EQ(num_nodes_waiting(r.state), 0u);
}

// Reference §3 L6, with the switch off: PyTorch's behaviour, the round goes on silently with a
// world of 2 and ranks 0 and 1 of 3; no agent has a reason to restart.
TEST(Rounds, WithoutRerendezvousADeadParticipantIsSilentlyDropped) {
  Rendezvous r = complete_round_with_dead_c(false);
  EXPECT_EQ(num_nodes_waiting(r.state), 0u);
  EXPECT_TRUE(r.state.complete);
  EXPECT_EQ(r.state.round, 0u);
  EXPECT_EQ(r.run(join_op, nd("a")), Action::finish);
}

}  // namespace
}  // namespace dagsim::rendezvous
