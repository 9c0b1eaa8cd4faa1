// Tests of RRef forks (rref_forks.cc) on the LocalRuntime: a fork to a third worker is counted by
// the owner before the callee uses it and goes with the callee's handle; the owner as parent and
// as child; the parent's reference ends with the call; forged forks and deletes of another node's
// fork are refused without touching the count.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/rpc_agent.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

using fibers::LocalRuntime;

class RRefForkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = FunctionRegistry::with_builtins();
    // Reports what the owner (node 1) counts while this call holds its fork, and the value.
    registry_.add("peek", [this](CallContext&, const CallArgs& a) {
      const RRef& r = a.rrefs.at(0);
      seen_forks_ = agent(1).forks_of(r.id());
      seen_counted_ = agent(1).counts_fork(r.id(), r.fork_id());
      seen_fork_ids_.push_back(r.fork_id());
      return r.is_owner() ? std::vector<Tensor>{a.tensors.at(0)} : r.to_here();
    });
    // Passes its RRef on to node `to` (a fork of a fork).
    registry_.add("pass_on", [](CallContext& c, const CallArgs& a) {
      return c.agent().rpc_sync(static_cast<WorkerId>(a.integer("pass_on", "to")), "peek", {{}, {}, {a.rrefs.at(0)}});
    });
    for (int i = 0; i < 3; ++i) {
      agents_.push_back(std::make_unique<RpcAgent>(rt_.add_node("worker" + std::to_string(i)), registry_));
      agents_.back()->start();
    }
  }

  RpcAgent& agent(int i) { return *agents_[static_cast<size_t>(i)]; }

  LocalRuntime rt_;
  FunctionRegistry registry_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
  size_t seen_forks_ = 0;
  bool seen_counted_ = false;
  std::vector<uint64_t> seen_fork_ids_;
};

Tensor vec(std::vector<double> values) { return from_values({static_cast<int64_t>(values.size())}, values); }

TEST_F(RRefForkTest, AForkToAThirdWorkerIsCountedBeforeUseAndGoesWithItsHandle) {
  rt_.run_on(0, [&] {
    RRef r = agent(0).remote(1, "neg", {{vec({3})}, {}});
    EXPECT_EQ(agent(0).rpc_sync(2, "peek", {{}, {}, {r}})[0].to_vector(), (std::vector<double>{-3}));
    EXPECT_TRUE(seen_counted_) << "the owner counted the callee's fork before the function ran";
    EXPECT_EQ(seen_forks_, 2u) << "the creator's fork and the callee's";
    EXPECT_NE(seen_fork_ids_.at(0), r.fork_id());
    EXPECT_EQ(agent(0).pending_children(), 0u) << "the parent let go of its reference";
    EXPECT_EQ(agent(1).forks_of(r.id()), 1u) << "the callee's handle went with its call";
  });
  EXPECT_EQ(agent(1).owned_rrefs(), 0u) << "the value went with its last fork";
}

TEST_F(RRefForkTest, TheOwnerForksItsOwnRRefAndGetsForksBack) {
  rt_.run_on(1, [&] {
    RRef mine = agent(1).remote(1, "neg", {{vec({4})}, {}});
    ASSERT_TRUE(mine.is_owner());
    // Owner -> node 2 -> owner: node 2's fork is counted by a request, the owner's own at once.
    CallArgs args{{}, {}, {mine}};
    args.ints["to"] = 1;
    EXPECT_EQ(agent(1).rpc_sync(2, "pass_on", args)[0].to_vector(), (std::vector<double>{-4}));
    EXPECT_TRUE(seen_counted_);
    EXPECT_EQ(seen_forks_, 3u) << "the creator's, node 2's and the owner's own fork for the inner call";
    EXPECT_EQ(agent(1).forks_of(mine.id()), 1u);
  });
  EXPECT_EQ(agent(1).owned_rrefs(), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(agent(i).pending_children(), 0u) << "worker" << i;
}

TEST_F(RRefForkTest, ForgedForksAndDeletesOfAnotherNodesForkAreRefused) {
  uint64_t id = 0, fork = 0;
  RRef r;
  rt_.run_on(0, [&] {
    r = agent(0).remote(1, "neg", {{vec({5})}, {}});
    r.to_here();
    id = r.id();
    fork = r.fork_id();
  });
  rt_.run_on(2, [&] {
    // A call whose fork names node 0 as its parent, though node 2 sends it.
    Message call = make_message(MessageType::call, 7, Call{"peek", {}, {RRefForkData{1, id, 99, 0}}});
    rt_.env(2).transport.send(1, encode(call));
    // A delete of node 0's fork, sent by node 2.
    rt_.env(2).transport.send(1, encode(make_rref_request(MessageType::rref_user_delete, 8, id, fork)));
    // Forks that name the creator's own fork, or an owner outside the cluster (the callee would
    // send its fork request there).
    rt_.env(0).transport.send(2, encode(make_message(MessageType::call, 10, Call{"peek", {}, {RRefForkData{1, id, id, 0}}})));
    rt_.env(0).transport.send(2, encode(make_message(MessageType::call, 11, Call{"peek", {}, {RRefForkData{999, id, 98, 0}}})));
  });
  rt_.run_on(0, [&] { EXPECT_EQ(r.to_here()[0].to_vector(), (std::vector<double>{-5})); });
  EXPECT_TRUE(seen_fork_ids_.empty()) << "the forged call never ran";
  EXPECT_EQ(agent(1).forks_of(id), 1u) << "neither the forged fork nor the forged delete changed the count";
  EXPECT_TRUE(agent(1).counts_fork(id, fork));
  r = RRef();  // outside any fiber: its delete goes once, with no retry to spawn
  rt_.run();
  EXPECT_EQ(agent(1).owned_rrefs(), 0u);
}

// Only the child may accept its fork: an accept from another node leaves the parent's reference.
TEST_F(RRefForkTest, OnlyTheChildAcceptsItsFork) {
  rt_.run_on(0, [&] {
    RRef r = agent(0).remote(1, "neg", {{vec({6})}, {}});
    runtime::Future<std::vector<Tensor>> call = agent(0).rpc_async(2, "peek", {{}, {}, {r}});
    ASSERT_EQ(agent(0).pending_children(), 1u);
    const uint64_t fork = r.id() + 1;  // node 0's next global id after the RRef's
    // Before node 2 has even seen the call, node 1 says it accepted the fork.
    rt_.env(1).transport.send(0, encode(make_rref_request(MessageType::rref_child_accept, 9, r.id(), fork)));
    EXPECT_EQ(call.get()[0].to_vector(), (std::vector<double>{-6}));
    EXPECT_EQ(agent(0).pending_children(), 0u);
  });
  const auto& log = dynamic_cast<runtime::MemoryLog&>(rt_.env(0).log).entries();
  const bool refused = std::any_of(log.begin(), log.end(), [](const auto& e) { return e.kind == "rref.stray_accept"; });
  EXPECT_TRUE(refused) << "node 1's accept was taken for node 2's";
}

// PyTorch's graceful shutdown: a user handle still alive when its node shuts down is deleted on
// its owner first, so the owner keeps nothing for a node that is gone.
TEST_F(RRefForkTest, ShutdownDeletesTheUserHandlesStillAlive) {
  RRef r;
  rt_.run_on(0, [&] {
    r = agent(0).remote(1, "neg", {{vec({7})}, {}});
    r.to_here();
    agent(0).shutdown();
  });
  EXPECT_EQ(agent(1).owned_rrefs(), 0u) << "the owner dropped the value of a node that shut down";
  r = RRef();  // sends nothing more: its fork is gone already
  rt_.run();
  EXPECT_EQ(agent(1).owned_rrefs(), 0u);
}

}  // namespace
}  // namespace dagsim::rpc
