// Tests of RpcAgent on the LocalRuntime: sync and async calls with attributes, errors that keep
// their code and say which node raised them, unknown functions, nested calls, calls to oneself,
// timeouts on the virtual clock, dead peers, malformed frames, and graceful shutdown.
#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/rpc_agent.h"
#include "core/rpc/rref.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

using namespace std::chrono_literals;
using fibers::LocalRuntime;

Tensor vec(std::vector<double> values) { return from_values({static_cast<int64_t>(values.size())}, values); }

class RpcAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = FunctionRegistry::with_builtins();
    registry_.add("fail", [](CallContext&, const CallArgs&) -> std::vector<Tensor> {
      throw errors::shape_mismatch("fail: shapes [2] and [3] cannot broadcast");
    });
    registry_.add("slow", [](CallContext& ctx, const CallArgs& args) {
      ctx.agent().env().clock.sleep(10s);
      return args.tensors;
    });
    registry_.add("nested_add", [](CallContext& ctx, const CallArgs& args) {
      // Runs on node 1 and asks node 2 to do the work.
      return ctx.agent().rpc_sync(2, "add", args);
    });
    for (int i = 0; i < 3; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<RpcAgent>(env, registry_));
      agents_.back()->start();
    }
  }

  RpcAgent& agent(int i) { return *agents_[static_cast<size_t>(i)]; }

  LocalRuntime rt_;
  FunctionRegistry registry_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
};

TEST_F(RpcAgentTest, SyncCallRunsTheRegisteredFunctionOnTheCallee) {
  const std::vector<Tensor> out = rt_.run_on(0, [&] { return agent(0).rpc_sync(1, "add", {{vec({1, 2}), vec({10, 20})}, {}}); });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{11, 22}));
  EXPECT_EQ(agent(0).pending_calls(), 0u);
}

TEST_F(RpcAgentTest, AsyncCallsTakeAttributesAndChainContinuations) {
  const double total = rt_.run_on(0, [&] {
    Tensor m = from_values({2, 3}, {1, 2, 3, 4, 5, 6});
    Future<std::vector<Tensor>> f = agent(0).rpc_async(1, "sum", {{m}, {{"dim", 1}, {"keepdim", 1}}});
    Future<double> g = f.then([](Future<std::vector<Tensor>> done) {
      const std::vector<Tensor> r = done.get();
      EXPECT_EQ(r[0].shape(), (Shape{2, 1}));
      return r[0].at({0, 0}) + r[0].at({1, 0});
    });
    return g.get();
  });
  EXPECT_EQ(total, 21.0);
}

TEST_F(RpcAgentTest, RemoteErrorsKeepTheirCodeAndSayWhichNodeRaisedThem) {
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).rpc_sync(1, "fail", {}); }); }, ErrorCode::shape_mismatch,
                           {"Error on Node 1: fail: shapes [2] and [3] cannot broadcast"}));
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).rpc_sync(1, "add", {{vec({1})}, {}}); }); },
                           ErrorCode::invalid_argument, {"Error on Node 1: add: takes 2 tensor argument(s), got 1"}));
}

TEST_F(RpcAgentTest, UnknownFunctionsAreRefusedNotExecuted) {
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).rpc_sync(1, "os.system", {}); }); },
                           ErrorCode::invalid_argument, {"unknown function 'os.system'; registered: abs, add, bmm, cat"}));
}

// An elastic node whose agent ended: its calls fail at once by name, while its RRef values stay
// readable (the owner's fetch and delete are no calls).
TEST_F(RpcAgentTest, ANodeRefusingCallsFailsThemAtOnceByName) {
  rt_.run_on(0, [&] {
    rpc::RRef r = agent(0).remote(1, "dagsim.parameter", {{vec({1, 2})}, {}});
    EXPECT_EQ(r.to_here()[0].to_vector(), (std::vector<double>{1, 2}));
    agent(1).refuse_calls("worker1's agent has ended");
    EXPECT_TRUE(throws_error([&] { agent(0).rpc_sync(1, "add", {{vec({1}), vec({2})}, {}}); }, ErrorCode::connection_failed,
                             {"Error on Node 1", "worker1's agent has ended"}));
    EXPECT_EQ(r.to_here()[0].to_vector(), (std::vector<double>{1, 2}));
  });
}

TEST_F(RpcAgentTest, FunctionsMayMakeNestedCalls) {
  const std::vector<Tensor> out =
      rt_.run_on(0, [&] { return agent(0).rpc_sync(1, "nested_add", {{vec({1}), vec({2})}, {}}); });
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{3}));
}

TEST_F(RpcAgentTest, ACallToOneselfGoesThroughTheSamePath) {
  const std::vector<Tensor> out = rt_.run_on(2, [&] { return agent(2).rpc_sync(2, "mul", {{vec({3}), vec({4})}, {}}); });
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{12}));
}

TEST_F(RpcAgentTest, ACallTimesOutOnTheVirtualClock) {
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).rpc_sync(1, "slow", {{vec({1})}, {}}, 2s); }); },
                           ErrorCode::timed_out, {"rpc 'slow' to worker1 timed out after 2000 ms"}));
  EXPECT_EQ(rt_.now().since_epoch, std::chrono::nanoseconds(10s)) << "the callee's late reply was ignored";
  EXPECT_EQ(agent(0).pending_calls(), 0u);
}

TEST_F(RpcAgentTest, ACallToADeadNodeFailsNamingIt) {
  rt_.kill(1);
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).rpc_sync(1, "add", {{vec({1}), vec({1})}, {}}); }); },
                           ErrorCode::connection_failed, {"rpc 'add' to worker1: worker1 is dead"}));
}

TEST_F(RpcAgentTest, MalformedFramesAreLoggedAndDroppedNeverACrash) {
  rt_.run_on(1, [&] {
    rt_.env(1).transport.send(0, runtime::Bytes{1, 2, 3});
    runtime::Bytes forged = encode(make_call(7, "add", {{vec({1}), vec({2})}, {}}));
    forged[40] ^= 0xff;  // corrupt the body: the checksum catches it
    rt_.env(1).transport.send(0, forged);
  });
  const auto& log = dynamic_cast<runtime::MemoryLog&>(rt_.env(0).log).entries();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].kind, "rpc.bad_frame");
  EXPECT_NE(log[0].detail.find("shorter than the 32-byte header"), std::string::npos) << log[0].detail;
  EXPECT_NE(log[1].detail.find("checksum"), std::string::npos) << log[1].detail;
  // The agent still serves.
  const auto out = rt_.run_on(1, [&] { return agent(1).rpc_sync(0, "neg", {{vec({5})}, {}}); });
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{-5}));
}

TEST_F(RpcAgentTest, ShutdownWaitsForOutstandingCallsThenRefusesNewOnes) {
  bool answered = false;
  rt_.run_on(0, [&] {
    Future<std::vector<Tensor>> f = agent(0).rpc_async(1, "slow", {{vec({1})}, {}});
    f.then([&answered](Future<std::vector<Tensor>> done) { answered = done.get().size() == 1; });
    agent(0).shutdown();
    EXPECT_TRUE(f.is_ready());
  });
  EXPECT_TRUE(answered);
  EXPECT_EQ(rt_.now().since_epoch, std::chrono::nanoseconds(10s));
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).rpc_async(1, "add", {}); }); }, ErrorCode::invalid_argument,
                           {"is shut down"}));
}

TEST_F(RpcAgentTest, RemoteKeepsTheValueOnItsOwnerUntilTheLastUserRRefGoes) {
  rt_.run_on(0, [&] {
    RRef r = agent(0).remote(1, "add", {{vec({1, 2}), vec({10, 20})}, {}});
    EXPECT_EQ(r.owner(), 1);
    EXPECT_FALSE(r.is_owner());
    EXPECT_EQ(r.to_here()[0].to_vector(), (std::vector<double>{11, 22}));
    EXPECT_EQ(agent(1).owned_rrefs(), 1u);
    RRef copy = r;
    EXPECT_EQ(copy.to_here()[0].to_vector(), (std::vector<double>{11, 22}));
  });
  EXPECT_EQ(agent(1).owned_rrefs(), 0u) << "the user delete reached the owner";
}

TEST_F(RpcAgentTest, ARemoteErrorSurfacesAtToHere) {
  rt_.run_on(0, [&] {
    RRef r = agent(0).remote(1, "fail", {});
    EXPECT_TRUE(throws_error([&] { r.to_here(); }, ErrorCode::shape_mismatch, {"Error on Node 1: fail: shapes"}));
  });
}

TEST_F(RpcAgentTest, AnOwnerRRefReadsLocally) {
  rt_.run_on(2, [&] {
    RRef r = agent(2).remote(2, "neg", {{vec({4})}, {}});
    EXPECT_TRUE(r.is_owner());
    EXPECT_EQ(r.to_here()[0].to_vector(), (std::vector<double>{-4}));
  });
  EXPECT_EQ(agent(2).owned_rrefs(), 0u);
}

// PyTorch's faulty agent, per message type (RpcOptions::message_faults): the first two calls node
// 0 sends fail at once, naming the fault, and the third goes through; a delayed type goes out late.
TEST(FaultyRpcAgent, FailsOrDelaysTheFirstRequestsOfAType) {
  LocalRuntime rt;
  const FunctionRegistry registry = FunctionRegistry::with_builtins();
  RpcOptions faulty;
  faulty.message_faults = {MessageFault{MessageType::call, 2, std::nullopt}, MessageFault{MessageType::remote_call, 1, 300ms}};
  std::vector<std::unique_ptr<RpcAgent>> agents;
  agents.push_back(std::make_unique<RpcAgent>(rt.add_node("worker0"), registry, faulty));
  agents.push_back(std::make_unique<RpcAgent>(rt.add_node("worker1"), registry));
  for (auto& a : agents) a->start();
  rt.run_on(0, [&] {
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(throws_error([&] { agents[0]->rpc_sync(1, "neg", {{vec({1})}, {}}); }, ErrorCode::connection_failed,
                               {"faulty agent of node 0: a call to worker1 failed"}));
    }
    EXPECT_EQ(agents[0]->rpc_sync(1, "neg", {{vec({1})}, {}})[0].to_vector(), (std::vector<double>{-1}));
    const runtime::TimePoint before = rt.now();
    EXPECT_EQ(agents[0]->remote(1, "neg", {{vec({2})}, {}}).to_here()[0].to_vector(), (std::vector<double>{-2}));
    EXPECT_GE(rt.now() - before, runtime::Duration{300ms}) << "the remote call went out on time";
    const runtime::TimePoint after = rt.now();
    agents[0]->remote(1, "neg", {{vec({3})}, {}}).to_here();
    EXPECT_LT(rt.now() - after, runtime::Duration{300ms}) << "only the first remote call is delayed";
  });
  EXPECT_EQ(agents[1]->pending_calls(), 0u);
  for (WorkerId w = 0; w < 2; ++w) rt.kill(w);
  rt.run();
}

}  // namespace
}  // namespace dagsim::rpc
