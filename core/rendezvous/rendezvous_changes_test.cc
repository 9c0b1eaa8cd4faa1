// Tests of Note [decisive changes] (rendezvous_executor.h): is_quiet_change() tells a join below
// max_nodes or a heartbeat (quiet) from what a waiting node acts on (decisive); a waiter sleeps
// through quiet writes and wakes at once for a decisive one; and only decisive writes bump the
// changes key.
#include <gtest/gtest.h>

#include "core/rendezvous/rendezvous_ops.h"
#include "core/rendezvous/rendezvous_test_cluster.h"
#include "core/rendezvous/rendezvous_test_util.h"

namespace dagsim::rendezvous {
namespace {

using namespace std::chrono_literals;
using testing::at;
using testing::at_s;
using testing::Cluster;
using testing::nd;

RendezvousState joined(std::initializer_list<const char*> names) {
  RendezvousState s;
  for (const char* name : names) {
    s.participants.emplace(nd(name), 0);
    s.last_heartbeats.emplace(nd(name), at_s(1));
  }
  return s;
}

TEST(QuietChange, JoinsAndHeartbeatsAreQuietWhatWaitersActOnIsNot) {
  const RendezvousState two = joined({"a", "b"});
  EXPECT_TRUE(is_quiet_change(two, two));
  EXPECT_TRUE(is_quiet_change(RendezvousState{}, joined({"a"})));
  EXPECT_TRUE(is_quiet_change(two, joined({"a", "b", "c"})));
  RendezvousState beat = two;
  beat.last_heartbeats[nd("a")] = at_s(7);
  EXPECT_TRUE(is_quiet_change(two, beat));
  RendezvousState spare = two;
  spare.wait_list.insert(nd("w"));
  spare.last_heartbeats.emplace(nd("w"), at_s(2));
  EXPECT_TRUE(is_quiet_change(two, spare));

  // Each of these changes what some waiting node decides.
  EXPECT_FALSE(is_quiet_change(joined({"a", "b", "c"}), two));  // a participant left
  EXPECT_FALSE(is_quiet_change(spare, two));                    // a waiting node left
  const RendezvousSettings settings = testing::settings(2, 3);
  EXPECT_FALSE(is_quiet_change(joined({"a"}), apply(joined({"a"}), Action::add_to_participants, nd("b"), settings,
                                                    at_s(2))));  // min reached: the last call starts
  EXPECT_FALSE(is_quiet_change(two, apply(two, Action::add_to_participants, nd("c"), settings,
                                          at_s(2))));  // max reached: complete, ranks assigned
  for (auto change : std::initializer_list<void (*)(RendezvousState&)>{
           [](RendezvousState& s) { s.closed = true; },
           [](RendezvousState& s) { s.round = 1; },
           [](RendezvousState& s) { s.deadline = at_s(9); },
           [](RendezvousState& s) { s.rerendezvous_requested = true; },
           [](RendezvousState& s) { s.participants[nd("b")] = 1; },
       }) {
    RendezvousState after = two;
    change(after);
    EXPECT_FALSE(is_quiet_change(two, after)) << after;
  }
}

// Four nodes join a round of exactly four, half a second apart (zero latency). Worker 1 waits from
// the start: the two joins below max_nodes do not wake it, the fourth (which completes the round)
// does, at once, and it is the only write that bumped the changes key.
TEST(DecisiveChanges, AWaiterSleepsThroughJoinsAndWakesForTheRoundThatFormed) {
  Cluster c;
  c.start(4, testing::job(4, 4));
  for (int i = 1; i <= 4; ++i) c.join_at(i, at(500ms * (i - 1)));
  c.run_until(at(10s));
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(c.result(i).info.has_value()) << "worker" << i << ": " << c.result(i).what;
    EXPECT_EQ(*c.result(i).done_at, at(1500ms)) << "worker" << i;
  }
  EXPECT_EQ(c.handler(1).executor().sync_waits(), 1u);  // not 3: one per join
  uint64_t announced = 0;
  for (int i = 1; i <= 4; ++i) announced += c.handler(i).holder().announced_changes();
  EXPECT_EQ(announced, 1u);
  EXPECT_EQ(c.handler(4).holder().announced_changes(), 1u);
}

// A join that starts the last call is decisive: the waiters must learn of the deadline they will
// complete the round at. Two of max three join; the round completes when the last call ends.
TEST(DecisiveChanges, TheJoinThatStartsTheLastCallWakesTheWaiters) {
  Cluster c;
  RendezvousSettings settings = testing::job(2, 3);
  settings.timeout.last_call = 2s;
  c.start(2, settings);
  c.join_at(1, at(0s));
  c.join_at(2, at(1s));
  c.run_until(at(20s));
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(c.result(i).info.has_value()) << "worker" << i << ": " << c.result(i).what;
    // The deadline is 1 s + 2 s; the round completes just past it (strict `<`), within a wait's
    // granularity.
    EXPECT_GE(*c.result(i).done_at, at(3s));
    EXPECT_LE(*c.result(i).done_at, at(3s) + kMinSyncWait + 1ms) << "worker" << i;
  }
  EXPECT_GE(c.handler(1).executor().sync_waits(), 2u);  // woken by the join, then by the deadline
}

}  // namespace
}  // namespace dagsim::rendezvous
