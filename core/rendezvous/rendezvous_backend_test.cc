// Tests of the rendezvous state on a store (RendezvousBackend) and of one node's copy of it
// (RendezvousStateHolder), on LocalRuntime's virtual time with the built-in store on node 0 and
// clients on nodes 1..3: versions as tokens (a stale token never writes, the loser gets the winner's
// state), the decoded-state cache (one decode per node per version, none for a node's own write),
// corrupt states and a dead store as named errors, the holder's cache duration, its write-on-dirty
// with re-read on conflict, and sanitize after each sync (strict expiry, the dead nodes reported,
// the epilogue advancing the round).
#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/rendezvous/rendezvous_test_util.h"
#include "core/rendezvous/rendezvous_executor.h"
#include "core/rendezvous/rendezvous_ops.h"
#include "core/rendezvous/rendezvous_state_holder.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"

namespace dagsim::rendezvous {
namespace {

using namespace testing;

using namespace std::chrono_literals;
using fibers::LocalRuntime;

RendezvousSettings two_to_three() {
  RendezvousSettings s;
  s.run_id = "job";
  s.min_nodes = 2;
  s.max_nodes = 3;
  return s;
}

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = rpc::FunctionRegistry::with_builtins();
    for (int i = 0; i < 4; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<rpc::RpcAgent>(env, registry_));
      if (i == 0) service_ = std::make_unique<store::StoreService>(*agents_.back());
      agents_.back()->start();
      clients_.push_back(std::make_unique<store::StoreClient>(*agents_.back(), 0));
      clients_.back()->set_timeout(2s);
      backends_.push_back(std::make_unique<RendezvousBackend>(*clients_.back(), settings_.run_id));
    }
  }

  RendezvousBackend& backend(int i) { return *backends_[static_cast<size_t>(i)]; }
  std::unique_ptr<RendezvousStateHolder> holder(int i, Duration cache = kDefaultCacheDuration) {
    return std::make_unique<RendezvousStateHolder>(backend(i), settings_, rt_.env(static_cast<WorkerId>(i)), cache);
  }

  RendezvousSettings settings_ = two_to_three();
  LocalRuntime rt_;
  rpc::FunctionRegistry registry_;
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents_;
  std::unique_ptr<store::StoreService> service_;
  std::vector<std::unique_ptr<store::StoreClient>> clients_;
  std::vector<std::unique_ptr<RendezvousBackend>> backends_;
};

TEST_F(BackendTest, AStaleTokenNeverWritesAndTheLoserGetsTheWinnersState) {
  rt_.run_on(1, [&] {
    EXPECT_FALSE(backend(1).get_state().has_value()) << "no state before the first write";
    RendezvousState first;
    first.participants[nd("a")] = 0;
    first.last_heartbeats[nd("a")] = TimePoint{};
    const SetStateOutcome created = backend(1).set_state(first, 0);
    ASSERT_TRUE(created.written);
    const Token t1 = created.current.token;
    EXPECT_GT(t1, 0u);
    EXPECT_EQ(backend(1).key(), "torch.rendezvous.job");

    RendezvousState by2 = first;
    by2.participants[nd("b")] = 0;
    by2.last_heartbeats[nd("b")] = TimePoint{};
    RendezvousState by3 = first;
    by3.closed = true;
    ASSERT_TRUE(backend(2).set_state(by2, t1).written);
    const SetStateOutcome lost = backend(3).set_state(by3, t1);
    EXPECT_FALSE(lost.written);
    EXPECT_EQ(*lost.current.state, by2);
    EXPECT_GT(lost.current.token, t1);
    // Identical bytes with a stale token lose too (PyTorch's bytewise compare would let them win).
    EXPECT_FALSE(backend(3).set_state(by2, t1).written);
    EXPECT_EQ(*backend(1).get_state()->state, by2);
  });
}

TEST_F(BackendTest, EachNodeDecodesAVersionOnceAndNeverItsOwnWrite) {
  rt_.run_on(1, [&] {
    RendezvousState s;
    s.round = 7;
    const Token t = backend(1).set_state(s, 0).current.token;
    EXPECT_EQ(backend(1).get_state()->token, t);
    EXPECT_EQ(backend(1).decodes(), 0u) << "the writer holds what it encoded";
    for (int i = 0; i < 5; ++i) EXPECT_EQ(backend(2).get_state()->state->round, 7u);
    EXPECT_EQ(backend(2).decodes(), 1u);
    s.round = 8;
    ASSERT_TRUE(backend(3).set_state(s, t).written);
    EXPECT_EQ(backend(2).get_state()->state->round, 8u);
    EXPECT_EQ(backend(2).decodes(), 2u);
  });
}

// Note [decoded state cache]'s pool: nodes of one thread that read the same bytes share one
// decoded state while any holds it (each still counts its own miss); once none holds it, the
// next reader decodes afresh, and another version is another state.
TEST_F(BackendTest, NodesOfOneThreadShareTheStateDecodedFromTheSameBytes) {
  rt_.run_on(1, [&] {
    RendezvousState s;
    s.round = 7;
    const Token t = backend(1).set_state(s, 0).current.token;
    const FetchedState two = *backend(2).get_state();
    const FetchedState three = *backend(3).get_state();
    EXPECT_EQ(two.state.get(), three.state.get()) << "one decode served both";
    EXPECT_EQ(backend(2).decodes(), 1u);
    EXPECT_EQ(backend(3).decodes(), 1u);
    EXPECT_EQ(three.state->round, 7u);
    s.round = 8;
    ASSERT_TRUE(backend(1).set_state(s, t).written);
    const FetchedState next = *backend(2).get_state();
    EXPECT_NE(next.state.get(), two.state.get());
    EXPECT_EQ(next.state->round, 8u);
  });
}

TEST_F(BackendTest, ACorruptStateAndADeadStoreAreNamedErrors) {
  rt_.run_on(1, [&] {
    clients_[1]->set("torch.rendezvous.job", runtime::Bytes{1, 2, 3});
    EXPECT_TRUE(throws_error([&] { backend(1).get_state(); }, ErrorCode::protocol_error,
                             {"rendezvous run job", "torch.rendezvous.job", "is corrupt"}));
  });
  rt_.kill(0);
  EXPECT_TRUE(throws_error([&] { rt_.run_on(2, [&] { backend(2).get_state(); }); }, ErrorCode::rendezvous_connection_failed,
                           {"rendezvous run job", "reading the state", "store get_versioned on node 0"}));
}

TEST_F(BackendTest, TheHolderServesAFreshCleanCopyFromItsCacheAndRereadsAfterIt) {
  auto h = holder(1);
  rt_.run_on(1, [&] {
    EXPECT_EQ(h->sync(), std::nullopt);
    EXPECT_EQ(h->token(), 0u);
    EXPECT_EQ(h->store_syncs(), 1u);
    rt_.env(1).clock.sleep(1s);  // exactly the cache duration: still fresh (PyTorch's boundary)
    h->sync();
    EXPECT_EQ(h->cached_syncs(), 1u);
    rt_.env(1).clock.sleep(1ms);
    h->sync();
    EXPECT_EQ(h->store_syncs(), 2u);
    h->sync(/*use_cache=*/false);
    EXPECT_EQ(h->store_syncs(), 3u);
  });
}

TEST_F(BackendTest, ADirtyCopyIsWrittenWithItsTokenAndALostRaceRereads) {
  auto h1 = holder(1);
  auto h2 = holder(2);
  rt_.run_on(1, [&] {
    h1->sync();
    h2->sync();
    const TimePoint wall = rt_.env(1).clock.wall_now();
    h1->update(apply(h1->state(), Action::add_to_participants, nd("a"), settings_, wall));
    h2->update(apply(h2->state(), Action::add_to_participants, nd("b"), settings_, wall));
    EXPECT_EQ(h1->sync(), std::optional<bool>(true));
    EXPECT_EQ(h2->sync(), std::optional<bool>(false)) << "both wrote with token 0; one loses";
    EXPECT_FALSE(h2->dirty());
    EXPECT_EQ(h2->state(), h1->state()) << "the loser now holds the winner's state";
    EXPECT_EQ(h2->token(), h1->token());
    // Deciding again on the winner's state and writing succeeds.
    h2->update(apply(h2->state(), Action::add_to_participants, nd("b"), settings_, wall));
    EXPECT_EQ(h2->sync(), std::optional<bool>(true));
    EXPECT_EQ(h2->state().participants.size(), 2u);
    EXPECT_TRUE(h2->state().deadline.has_value()) << "the min-th join starts the last call";
  });
}

TEST_F(BackendTest, EachSyncSanitizesStrictlyReportsTheDeadAndTheEpilogueAdvancesTheRound) {
  settings_.min_nodes = 1;
  settings_.max_nodes = 1;
  auto h = holder(1);
  auto other = holder(2, Duration::zero());
  rt_.run_on(1, [&] {
    h->sync();
    // "a" forms a round of one at t = 0 and then falls silent.
    const TimePoint wall = rt_.env(1).clock.wall_now();
    h->update(apply(h->state(), Action::add_to_participants, nd("a"), settings_, wall));
    ASSERT_EQ(h->sync(), std::optional<bool>(true));
    ASSERT_TRUE(h->state().complete);
    const uint64_t round = h->state().round;
    // Exactly interval x attempts (15 s) old: still alive (strict `<`).
    rt_.env(2).clock.sleep(settings_.expiry());
    other->sync();
    EXPECT_TRUE(other->dead_nodes().empty());
    EXPECT_TRUE(other->state().participants.contains(nd("a")));
    rt_.env(2).clock.sleep(1ns);
    other->sync();
    EXPECT_EQ(other->dead_nodes(), std::vector<NodeDesc>{nd("a")});
    EXPECT_TRUE(other->state().participants.empty());
    EXPECT_FALSE(other->state().complete);
    EXPECT_EQ(other->state().round, round + 1) << "the last participant gone: the round advances";
    // Local until written: the store still holds the old round.
    EXPECT_EQ(backend(3).get_state()->state->round, round);
  });
}

// PyTorch: BackendRendezvousStateHolderTest.test_init_initializes_state_holder. A holder starts
// with an empty, clean state and touches nothing until its first sync.
TEST_F(BackendTest, ANewHolderHoldsAnEmptyCleanStateAndHasReadNothing) {
  auto h = holder(1);
  rt_.run_on(1, [] {});  // the nodes' fibers start (and the holder is left alone)
  EXPECT_EQ(h->state(), RendezvousState{});
  EXPECT_EQ(h->token(), 0u);
  EXPECT_FALSE(h->dirty());
  const RendezvousSettings& got = h->settings();
  EXPECT_EQ(got.run_id, settings_.run_id);
  EXPECT_EQ(got.min_nodes, settings_.min_nodes);
  EXPECT_EQ(got.max_nodes, settings_.max_nodes);
  EXPECT_EQ(got.expiry(), settings_.expiry());
  EXPECT_EQ(got.timeout.join, settings_.timeout.join);
  EXPECT_EQ(h->store_syncs(), 0u);
  EXPECT_EQ(h->cached_syncs(), 0u);
  EXPECT_EQ(backend(1).decodes(), 0u);
}

// What the recording op below was given, each call.
struct OpCall {
  RendezvousState state;
  NodeDesc node;
  const RendezvousSettings* settings = nullptr;
  ClockReading clock;
  TimePoint deadline;
};
std::vector<OpCall> op_calls;
Action recording_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
                    ClockReading clock, TimePoint deadline) {
  op_calls.push_back({state, node, &settings, clock, deadline});
  return Action::finish;
}

// PyTorch: DistributedRendezvousOpExecutorTest.test_run_passes_expected_context_and_deadline_to_state_handler.
// The op decides on the state just synced, for the executor's node, with the holder's settings,
// both clocks read at the decision, and the deadline run() was given.
TEST_F(BackendTest, TheExecutorGivesTheOpTheSyncedStateNodeSettingsClocksAndDeadline) {
  auto h1 = holder(1, Duration::zero());
  auto h2 = holder(2);
  RendezvousExecutor executor(*h1, backend(1), nd("a"), rt_.env(1));
  op_calls.clear();
  rt_.run_on(1, [&] {
    h2->sync();
    h2->update(apply(h2->state(), Action::add_to_participants, nd("b"), settings_, rt_.env(2).clock.wall_now()));
    ASSERT_EQ(h2->sync(), std::optional<bool>(true));
    rt_.env(1).clock.sleep(3s);
    const TimePoint deadline = rt_.env(1).clock.now() + 7s;
    executor.run(recording_op, "recording", deadline);
    ASSERT_EQ(op_calls.size(), 1u);
    const OpCall& call = op_calls[0];
    EXPECT_EQ(call.state, h2->state());
    EXPECT_EQ(call.node, nd("a"));
    EXPECT_EQ(call.settings, &h1->settings()) << "the holder's settings, as PyTorch's ctx.settings";
    EXPECT_EQ(call.clock.now, rt_.env(1).clock.now());
    EXPECT_EQ(call.clock.wall_now, rt_.env(1).clock.wall_now());
    EXPECT_EQ(call.deadline, deadline);
  });
}

}  // namespace
}  // namespace dagsim::rendezvous
