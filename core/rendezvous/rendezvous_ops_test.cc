// Every branch of the four ops' decisions and every effect of apply(), against
// shared/reference/rendezvous.md §1 ("Ops", "Actions"; NEWEST, with the redundancy list), then
// whole rounds driven through decide-and-apply as the executor will (without a store): formation
// with a last call, a late joiner's restart cascade (L5), and re-rendezvous after a participant's
// heartbeat expires (issue 11 item 4).
//
// Times: the op deadline is local (kNow against kDeadline), the state's times are wall times
// around kWall; heartbeats at kWall are fresh, heartbeats at kWall - 5 s are due.
#include "core/rendezvous/rendezvous_test_util.h"
#include "core/rendezvous/rendezvous_ops.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace dagsim::rendezvous {
namespace {

using namespace testing;

using std::chrono::nanoseconds;
using std::chrono::seconds;

const TimePoint kNow = at_s(10);
const TimePoint kDeadline = at_s(600);
const TimePoint kWall = at_s(1000);
const ClockReading kClock{kNow, kWall};
const TimePoint kFresh = kWall;             // a heartbeat not yet due
const TimePoint kDue = kWall - seconds(5);  // exactly one interval old: due (non-strict)

ClockReading local_at(TimePoint now) { return ClockReading{now, kWall}; }

// States by their lists; every node gets a heartbeat (S5).
struct StateBuilder {
  RendezvousState state;
  StateBuilder& participant(const NodeDesc& node, uint32_t rank = 0, TimePoint last = kFresh) {
    state.participants[node] = rank;
    state.last_heartbeats[node] = last;
    return *this;
  }
  StateBuilder& waiting(const NodeDesc& node, TimePoint last = kFresh) {
    state.wait_list.insert(node);
    state.last_heartbeats[node] = last;
    return *this;
  }
  StateBuilder& spare(const NodeDesc& node, TimePoint last = kFresh) {
    state.redundancy_list.insert(node);
    state.last_heartbeats[node] = last;
    return *this;
  }
  StateBuilder& deadline(TimePoint t) {
    state.deadline = t;
    return *this;
  }
  StateBuilder& complete() {
    state.complete = true;
    return *this;
  }
  StateBuilder& closed() {
    state.closed = true;
    return *this;
  }
  // A complete round's world is its ranks' extent (a gap is a participant that left).
  RendezvousState build() const {
    RendezvousState out = state;
    if (out.complete) {
      for (const auto& [node, rank] : out.participants) out.world_size = std::max(out.world_size, rank + 1);
    }
    EXPECT_EQ(structural_violation(out), std::nullopt);
    return out;
  }
};

// a and b complete (ranks 0, 1).
RendezvousState complete_ab() { return StateBuilder().participant(nd("a"), 0).participant(nd("b"), 1).complete().build(); }
// a and b forming, last call until `last_call`.
RendezvousState forming_ab(std::optional<TimePoint> last_call) {
  StateBuilder b;
  b.participant(nd("a")).participant(nd("b"));
  if (last_call) b.deadline(*last_call);
  return b.build();
}

// ---- Actions ----

// Reference §1 "Actions": NEWEST's numbers 1..13; 14 is ours (rendezvous_ops.h).
TEST(Action, NumbersAndNamesArePyTorchs) {
  EXPECT_EQ(static_cast<int>(Action::keep_alive), 1);
  EXPECT_EQ(static_cast<int>(Action::add_to_redundancy_list), 4);
  EXPECT_EQ(static_cast<int>(Action::remove_from_redundancy_list), 7);
  EXPECT_EQ(static_cast<int>(Action::mark_rendezvous_closed), 9);
  EXPECT_EQ(static_cast<int>(Action::sync), 10);
  EXPECT_EQ(static_cast<int>(Action::finish), 13);
  EXPECT_EQ(action_name(Action::add_to_wait_list), "ADD_TO_WAIT_LIST");
  EXPECT_EQ(action_name(Action::error_graceful_exit), "ERROR_GRACEFUL_EXIT");
  std::set<std::string_view> names;
  for (int v = 1; v <= 14; ++v) {
    EXPECT_EQ(changes_state(static_cast<Action>(v)), v <= 9) << v;
    names.insert(action_name(static_cast<Action>(v)));
  }
  EXPECT_EQ(names.size(), 14u);  // one name each
}

// ---- should_keep_alive ----

// Reference §1 "Ops": False without a heartbeat; otherwise hb <= now - interval (non-strict).
TEST(ShouldKeepAlive, OnlyWithAHeartbeatAtLeastOneIntervalOld) {
  const RendezvousState state = StateBuilder().participant(nd("a"), 0, kDue).build();
  const RendezvousSettings s = settings(1, 2);
  EXPECT_TRUE(should_keep_alive(state, nd("a"), s, kWall));
  EXPECT_FALSE(should_keep_alive(state, nd("a"), s, kWall - nanoseconds(1)));
  EXPECT_FALSE(should_keep_alive(state, nd("stranger"), s, kWall));
}

// ---- join_op, in the reference's step order ----

// Step 1: a closed rendezvous refuses every node that is not a spare, before anything else
// (even a participant of the complete round, even past the deadline). S7.
TEST(JoinOp, ClosedRendezvousRefusesEveryoneButSpares) {
  RendezvousState state = complete_ab();
  state.closed = true;
  const RendezvousSettings s = settings(1, 2);
  EXPECT_EQ(join_op(state, nd("a"), s, kClock, kDeadline), Action::error_closed);
  EXPECT_EQ(join_op(state, nd("stranger"), s, kClock, kDeadline), Action::error_closed);
  EXPECT_EQ(join_op(state, nd("stranger"), s, local_at(kDeadline + seconds(60)), kDeadline), Action::error_closed);
}

// Step 1: a spare of a closed rendezvous exits gracefully (RendezvousGracefulExitError). S7.
TEST(JoinOp, ClosedRendezvousLetsASpareExitGracefully) {
  RendezvousState state = StateBuilder().participant(nd("a"), 0).participant(nd("b"), 1).spare(nd("c")).complete().build();
  state.closed = true;
  EXPECT_EQ(join_op(state, nd("c"), settings(1, 2), kClock, kDeadline), Action::error_graceful_exit);
}

// Step 2: while the round is full a spare syncs, or heartbeats when due, and never times out,
// the redundancy check coming before the timeout check. L3.
TEST(JoinOp, SpareWaitsWithoutATimeoutWhileTheRoundIsFull) {
  const RendezvousSettings s = settings(1, 2);
  const RendezvousState fresh = StateBuilder().participant(nd("a"), 0).participant(nd("b"), 1).spare(nd("c")).complete().build();
  EXPECT_EQ(join_op(fresh, nd("c"), s, kClock, kDeadline), Action::sync);
  EXPECT_EQ(join_op(fresh, nd("c"), s, local_at(kDeadline + seconds(3600)), kDeadline), Action::sync);
  const RendezvousState due = StateBuilder().participant(nd("a"), 0).participant(nd("b"), 1).spare(nd("c"), kDue).complete().build();
  EXPECT_EQ(join_op(due, nd("c"), s, kClock, kDeadline), Action::keep_alive);
}

// Step 2: once the round has room the spare leaves the redundancy list (to join anew).
TEST(JoinOp, SpareLeavesTheRedundancyListWhenTheRoundHasRoom) {
  const RendezvousState state = StateBuilder().participant(nd("a"), 0).spare(nd("c")).complete().build();
  EXPECT_EQ(join_op(state, nd("c"), settings(1, 2), kClock, kDeadline), Action::remove_from_redundancy_list);
  EXPECT_EQ(join_op(state, nd("c"), settings(1, 2), local_at(kDeadline + seconds(60)), kDeadline),
            Action::remove_from_redundancy_list);
}

// Step 3: a participant of a complete round is done, whatever the time. S8.
TEST(JoinOp, ParticipantOfACompleteRoundFinishes) {
  EXPECT_EQ(join_op(complete_ab(), nd("a"), settings(1, 2), kClock, kDeadline), Action::finish);
  EXPECT_EQ(join_op(complete_ab(), nd("a"), settings(1, 2), local_at(kDeadline + seconds(60)), kDeadline),
            Action::finish);
}

// Step 4: the op deadline is strict (`now > deadline`); within deadline + 5 s (inclusive) a
// participant removes itself; after that it times out.
TEST(JoinOp, PastTheDeadlineAParticipantRollsBackThenTimesOut) {
  const RendezvousState state = forming_ab(std::nullopt);
  const RendezvousSettings s = settings(3, 4);
  EXPECT_EQ(join_op(state, nd("a"), s, local_at(kDeadline), kDeadline), Action::sync);
  EXPECT_EQ(join_op(state, nd("a"), s, local_at(kDeadline + nanoseconds(1)), kDeadline),
            Action::remove_from_participants);
  EXPECT_EQ(join_op(state, nd("a"), s, local_at(kDeadline + kRollbackPeriod), kDeadline),
            Action::remove_from_participants);
  EXPECT_EQ(join_op(state, nd("a"), s, local_at(kDeadline + kRollbackPeriod + nanoseconds(1)), kDeadline),
            Action::error_timeout);
}

// Step 4: a node on the wait list rolls back off it, then times out.
TEST(JoinOp, PastTheDeadlineAWaitingNodeRollsBackThenTimesOut) {
  const RendezvousState state = StateBuilder().participant(nd("a"), 0).waiting(nd("w")).complete().build();
  const RendezvousSettings s = settings(1, 2);
  EXPECT_EQ(join_op(state, nd("w"), s, local_at(kDeadline + seconds(1)), kDeadline), Action::remove_from_wait_list);
  EXPECT_EQ(join_op(state, nd("w"), s, local_at(kDeadline + seconds(6)), kDeadline), Action::error_timeout);
}

// Step 4: a node on no list has nothing to roll back: it times out at once.
TEST(JoinOp, PastTheDeadlineANodeOnNoListTimesOut) {
  EXPECT_EQ(join_op(forming_ab(std::nullopt), nd("x"), settings(3, 4), local_at(kDeadline + seconds(1)), kDeadline),
            Action::error_timeout);
  EXPECT_EQ(join_op(complete_ab(), nd("x"), settings(1, 4), local_at(kDeadline + seconds(1)), kDeadline),
            Action::error_timeout);
}

// Step 5, first case: a complete round with room puts a newcomer on the wait list.
TEST(JoinOp, CompleteRoundWithRoomPutsANewcomerOnTheWaitList) {
  EXPECT_EQ(join_op(complete_ab(), nd("x"), settings(1, 3), kClock, kDeadline), Action::add_to_wait_list);
}

// Step 5 then 8: a node already waiting waits on (syncs, or heartbeats when due).
TEST(JoinOp, AWaitingNodeKeepsWaiting) {
  const RendezvousSettings s = settings(1, 3);
  const RendezvousState fresh = StateBuilder().participant(nd("a"), 0).waiting(nd("w")).complete().build();
  EXPECT_EQ(join_op(fresh, nd("w"), s, kClock, kDeadline), Action::sync);
  const RendezvousState due = StateBuilder().participant(nd("a"), 0).waiting(nd("w"), kDue).complete().build();
  EXPECT_EQ(join_op(due, nd("w"), s, kClock, kDeadline), Action::keep_alive);
}

// Step 5, second case: a complete, full round makes a newcomer a spare (NEWEST; 2021 waited).
TEST(JoinOp, FullCompleteRoundMakesANewcomerASpare) {
  EXPECT_EQ(join_op(complete_ab(), nd("x"), settings(1, 2), kClock, kDeadline), Action::add_to_redundancy_list);
}

// Step 5, second case's guard: a node already waiting does not become a spare, even if the
// round is full by this node's settings (its max below the round's size).
TEST(JoinOp, AWaitingNodeOfAFullRoundDoesNotBecomeASpare) {
  const RendezvousState state = StateBuilder().participant(nd("a"), 0).participant(nd("b"), 1).waiting(nd("w")).complete().build();
  EXPECT_EQ(join_op(state, nd("w"), settings(1, 2), kClock, kDeadline), Action::sync);
  EXPECT_EQ(join_op(state, nd("w"), settings(1, 1), kClock, kDeadline), Action::sync);
}

// Step 6: min <= n <= max and the last call over (state.deadline < wall now, strict): complete.
TEST(JoinOp, AParticipantCompletesTheRoundWhenTheLastCallIsOver) {
  const RendezvousSettings s = settings(2, 3);
  EXPECT_EQ(join_op(forming_ab(kWall - nanoseconds(1)), nd("a"), s, kClock, kDeadline),
            Action::mark_rendezvous_complete);
  EXPECT_EQ(join_op(forming_ab(kWall), nd("a"), s, kClock, kDeadline), Action::sync);
  EXPECT_EQ(join_op(forming_ab(kWall + seconds(1)), nd("b"), s, kClock, kDeadline), Action::sync);
}

// Step 6's guards: below min, above max (NEWEST's `<= max`, for a node whose settings disagree
// with the round's), or without a deadline (NEWEST's None guard), nothing completes; the
// participant falls through to step 8.
TEST(JoinOp, NoCompletionBelowMinAboveMaxOrWithoutADeadline) {
  const TimePoint over = kWall - seconds(1);
  EXPECT_EQ(join_op(forming_ab(over), nd("a"), settings(3, 4), kClock, kDeadline), Action::sync);
  const RendezvousState three =
      StateBuilder().participant(nd("a")).participant(nd("b")).participant(nd("c")).deadline(over).build();
  EXPECT_EQ(join_op(three, nd("a"), settings(1, 2), kClock, kDeadline), Action::sync);
  EXPECT_EQ(join_op(three, nd("a"), settings(1, 3), kClock, kDeadline), Action::mark_rendezvous_complete);
  EXPECT_EQ(join_op(forming_ab(std::nullopt), nd("a"), settings(2, 3), kClock, kDeadline), Action::sync);
}

// Step 7: a forming round takes a newcomer, including a node waiting since the last round.
TEST(JoinOp, AFormingRoundTakesANewcomer) {
  EXPECT_EQ(join_op(RendezvousState{}, nd("a"), settings(1, 2), kClock, kDeadline), Action::add_to_participants);
  EXPECT_EQ(join_op(forming_ab(std::nullopt), nd("x"), settings(3, 4), kClock, kDeadline), Action::add_to_participants);
  const RendezvousState waited = StateBuilder().participant(nd("a")).waiting(nd("w")).build();
  EXPECT_EQ(join_op(waited, nd("w"), settings(2, 4), kClock, kDeadline), Action::add_to_participants);
}

// Step 8: a participant of a forming round heartbeats when due, else syncs.
TEST(JoinOp, AParticipantOfAFormingRoundHeartbeatsWhenDueElseSyncs) {
  const RendezvousSettings s = settings(3, 4);
  EXPECT_EQ(join_op(forming_ab(std::nullopt), nd("a"), s, kClock, kDeadline), Action::sync);
  const RendezvousState due = StateBuilder().participant(nd("a"), 0, kDue).participant(nd("b")).build();
  EXPECT_EQ(join_op(due, nd("a"), s, kClock, kDeadline), Action::keep_alive);
}

// ---- exit_op, close_op, keep_alive_op ----

// Reference §1 ExitOp: a participant leaves unless past the (strict) deadline; others finish.
TEST(ExitOp, AParticipantLeavesUnlessTimedOutOthersFinish) {
  const RendezvousSettings s = settings(1, 3);
  const RendezvousState state = StateBuilder().participant(nd("a"), 0).waiting(nd("w")).complete().build();
  EXPECT_EQ(exit_op(state, nd("a"), s, kClock, kDeadline), Action::remove_from_participants);
  EXPECT_EQ(exit_op(state, nd("a"), s, local_at(kDeadline), kDeadline), Action::remove_from_participants);
  EXPECT_EQ(exit_op(state, nd("a"), s, local_at(kDeadline + nanoseconds(1)), kDeadline), Action::error_timeout);
  EXPECT_EQ(exit_op(state, nd("w"), s, kClock, kDeadline), Action::finish);
  EXPECT_EQ(exit_op(state, nd("x"), s, local_at(kDeadline + seconds(60)), kDeadline), Action::finish);
}

// Reference §1 CloseOp: closed finishes (even late); else time out past the deadline; else close.
TEST(CloseOp, ClosesOnceFinishesWhenClosedTimesOutLate) {
  const RendezvousSettings s = settings(1, 2);
  RendezvousState state = complete_ab();
  EXPECT_EQ(close_op(state, nd("a"), s, local_at(kDeadline), kDeadline), Action::mark_rendezvous_closed);
  EXPECT_EQ(close_op(state, nd("a"), s, local_at(kDeadline + nanoseconds(1)), kDeadline), Action::error_timeout);
  state.closed = true;
  EXPECT_EQ(close_op(state, nd("a"), s, local_at(kDeadline + seconds(60)), kDeadline), Action::finish);
}

// Reference §1 KeepAliveOp: when due, heartbeat (or time out past the deadline); else finish,
// including for a node sanitize removed (no heartbeat).
TEST(KeepAliveOp, HeartbeatsWhenDueTimesOutLateFinishesOtherwise) {
  const RendezvousSettings s = settings(1, 2);
  const RendezvousState due = StateBuilder().participant(nd("a"), 0, kDue).complete().build();
  EXPECT_EQ(keep_alive_op(due, nd("a"), s, kClock, kDeadline), Action::keep_alive);
  EXPECT_EQ(keep_alive_op(due, nd("a"), s, local_at(kDeadline + nanoseconds(1)), kDeadline), Action::error_timeout);
  EXPECT_EQ(keep_alive_op(complete_ab(), nd("a"), s, kClock, kDeadline), Action::finish);
  EXPECT_EQ(keep_alive_op(due, nd("gone"), s, local_at(kDeadline + seconds(60)), kDeadline), Action::finish);
}

}  // namespace
}  // namespace dagsim::rendezvous
