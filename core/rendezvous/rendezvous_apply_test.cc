// apply(): every state-changing action's effect, as shared/reference/rendezvous.md §1 "Actions"
// gives PyTorch's executor methods. Whole rounds are in rendezvous_rounds_test.cc.
#include <gtest/gtest.h>

#include "core/rendezvous/rendezvous_test_util.h"
#include "core/rendezvous/rendezvous_ops.h"

namespace dagsim::rendezvous {
namespace {

using namespace testing;

using std::chrono::seconds;

RendezvousState joined(std::initializer_list<NodeDesc> nodes, const RendezvousSettings& s, TimePoint wall) {
  RendezvousState state;
  for (const NodeDesc& node : nodes) state = apply(state, Action::add_to_participants, node, s, wall);
  return state;
}

// ---- each action ----

// keep_alive: hb[me] = now, nothing else.
TEST(Apply, KeepAliveStampsTheHeartbeatOnly) {
  const RendezvousSettings s = settings(2, 3);
  const RendezvousState before = joined({nd("a")}, s, at_s(1));
  RendezvousState expected = before;
  expected.last_heartbeats[nd("a")] = at_s(7);
  EXPECT_EQ(apply(before, Action::keep_alive, nd("a"), s, at_s(7)), expected);
}

// add_p: rank 0 and a heartbeat; the min-th participant sets deadline = now + last_call (wall
// time); before min there is none.
TEST(Apply, AddToParticipantsStartsTheLastCallAtMin) {
  const RendezvousSettings s = settings(2, 4);
  const RendezvousState one = joined({nd("a")}, s, at_s(1));
  EXPECT_EQ(one.participants, (std::map<NodeDesc, uint32_t>{{nd("a"), 0}}));
  EXPECT_EQ(one.last_heartbeats.at(nd("a")), at_s(1));
  EXPECT_EQ(one.deadline, std::nullopt);
  const RendezvousState two = apply(one, Action::add_to_participants, nd("b"), s, at_s(2));
  EXPECT_EQ(two.deadline, at_s(2) + seconds(30));
  EXPECT_FALSE(two.complete);
  // The third does not move the last call.
  EXPECT_EQ(apply(two, Action::add_to_participants, nd("c"), s, at_s(3)).deadline, at_s(32));
}

// add_p: a node waiting since the last round leaves the wait list as it joins.
TEST(Apply, AddToParticipantsTakesTheNodeOffTheWaitList) {
  RendezvousState state;
  state.wait_list = {nd("w")};
  state.last_heartbeats = {{nd("w"), at_s(1)}};
  const RendezvousState after = apply(state, Action::add_to_participants, nd("w"), settings(2, 3), at_s(5));
  EXPECT_TRUE(after.wait_list.empty());
  EXPECT_TRUE(after.participants.contains(nd("w")));
  EXPECT_EQ(after.last_heartbeats.at(nd("w")), at_s(5));
}

// add_p then mark_complete: the max-th participant completes the round, ranks 0..n-1 in node
// order whatever the join order, no deadline (S2, S4). "worker10" sorts before "worker2".
TEST(Apply, TheMaxthParticipantCompletesTheRoundRanksInNodeOrder) {
  const RendezvousSettings s = settings(2, 4);
  const RendezvousState state = joined({nd("worker2"), nd("b", 7), nd("worker10"), nd("b", 3, 1)}, s, at_s(1));
  EXPECT_TRUE(state.complete);
  EXPECT_EQ(state.deadline, std::nullopt);
  EXPECT_EQ(state.participants,
            (std::map<NodeDesc, uint32_t>{{nd("b", 3, 1), 0}, {nd("b", 7), 1}, {nd("worker10"), 2}, {nd("worker2"), 3}}));
}

// min == max: the deadline set at min is cleared at once by completion.
TEST(Apply, MinEqualsMaxCompletesAtTheLastJoin) {
  const RendezvousState state = joined({nd("a"), nd("b")}, settings(2, 2), at_s(1));
  EXPECT_TRUE(state.complete);
  EXPECT_EQ(state.deadline, std::nullopt);
}

// add_w: off the redundancy list, onto the wait list, heartbeat. add_r: onto the redundancy
// list, heartbeat.
TEST(Apply, WaitAndRedundancyListsTakeTheNodeWithAHeartbeat) {
  const RendezvousSettings s = settings(1, 2);
  RendezvousState state = joined({nd("a"), nd("b")}, s, at_s(1));
  state = apply(state, Action::add_to_redundancy_list, nd("r"), s, at_s(2));
  EXPECT_EQ(state.redundancy_list, std::set<NodeDesc>{nd("r")});
  EXPECT_EQ(state.last_heartbeats.at(nd("r")), at_s(2));
  state = apply(state, Action::add_to_wait_list, nd("r"), s, at_s(3));
  EXPECT_TRUE(state.redundancy_list.empty());
  EXPECT_EQ(state.wait_list, std::set<NodeDesc>{nd("r")});
  EXPECT_EQ(state.last_heartbeats.at(nd("r")), at_s(3));
}

// rem_w / rem_r: out of the list and the heartbeats.
TEST(Apply, RemovingFromTheWaitOrRedundancyListDropsTheHeartbeat) {
  const RendezvousSettings s = settings(1, 3);
  RendezvousState state = joined({nd("a")}, s, at_s(1));  // forming, with room
  state = apply(state, Action::mark_rendezvous_complete, nd("a"), s, at_s(1));
  const RendezvousState base = state;
  state = apply(state, Action::add_to_wait_list, nd("w"), s, at_s(2));
  state = apply(state, Action::add_to_redundancy_list, nd("r"), s, at_s(2));
  state = apply(state, Action::remove_from_wait_list, nd("w"), s, at_s(3));
  state = apply(state, Action::remove_from_redundancy_list, nd("r"), s, at_s(3));
  EXPECT_EQ(state, base);
}

// rem_p in a forming round: below min the last call ends (epilogue, S4); at or above min it stays.
TEST(Apply, RemoveFromParticipantsOfAFormingRound) {
  const RendezvousSettings s = settings(2, 4);
  const RendezvousState three = joined({nd("a"), nd("b"), nd("c")}, s, at_s(1));
  const RendezvousState two = apply(three, Action::remove_from_participants, nd("c"), s, at_s(2));
  EXPECT_EQ(two.deadline, at_s(31));
  EXPECT_FALSE(two.last_heartbeats.contains(nd("c")));
  const RendezvousState one = apply(two, Action::remove_from_participants, nd("b"), s, at_s(3));
  EXPECT_EQ(one.deadline, std::nullopt);
  EXPECT_EQ(one.round, 0u);
}

// rem_p in a complete round: the others keep their ranks (a gap, S2's edge) and the round stays
// complete; the last one out advances the round (S6).
TEST(Apply, RemoveFromParticipantsOfACompleteRound) {
  const RendezvousSettings s = settings(1, 3);
  const RendezvousState full = joined({nd("a"), nd("b"), nd("c")}, s, at_s(1));
  RendezvousState state = apply(full, Action::remove_from_participants, nd("b"), s, at_s(2));
  EXPECT_TRUE(state.complete);
  EXPECT_EQ(state.participants, (std::map<NodeDesc, uint32_t>{{nd("a"), 0}, {nd("c"), 2}}));
  state = apply(state, Action::remove_from_participants, nd("a"), s, at_s(2));
  EXPECT_EQ(state.round, 0u);
  state = apply(state, Action::remove_from_participants, nd("c"), s, at_s(2));
  EXPECT_FALSE(state.complete);
  EXPECT_EQ(state.round, 1u);
  EXPECT_TRUE(state.participants.empty());
  EXPECT_TRUE(state.last_heartbeats.empty());
}

// mark_complete: complete, no deadline, ranks in node order. mark_closed: closed, nothing else.
TEST(Apply, MarkCompleteAndMarkClosed) {
  const RendezvousSettings s = settings(2, 4);
  const RendezvousState forming = joined({nd("c"), nd("a")}, s, at_s(1));
  ASSERT_TRUE(forming.deadline);
  const RendezvousState done = apply(forming, Action::mark_rendezvous_complete, nd("c"), s, at_s(40));
  EXPECT_TRUE(done.complete);
  EXPECT_EQ(done.deadline, std::nullopt);
  EXPECT_EQ(done.participants, (std::map<NodeDesc, uint32_t>{{nd("a"), 0}, {nd("c"), 1}}));
  EXPECT_EQ(done.last_heartbeats, forming.last_heartbeats);  // completing is not a heartbeat
  RendezvousState expected = done;
  expected.closed = true;
  EXPECT_EQ(apply(done, Action::mark_rendezvous_closed, nd("x"), s, at_s(41)), expected);
}

// The executor handles sync, finish and the errors itself: applying one is a programmer error.
TEST(ApplyDeathTest, AnActionThatChangesNoStateAsserts) {
  EXPECT_DEATH(apply(RendezvousState{}, Action::sync, nd("a"), settings(1, 1), at_s(1)), "SYNC changes no state");
}

}  // namespace
}  // namespace dagsim::rendezvous
