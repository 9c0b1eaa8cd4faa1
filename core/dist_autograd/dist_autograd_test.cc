// End-to-end tests of distributed autograd on the LocalRuntime: the seed example's gradients equal
// local autograd's, nested RPCs carry the context, gradients accumulate per context, contexts are
// released everywhere, and a backward whose RPC result was unused fails (by termination detection,
// or by its timeout where detection is off), naming the send function that never got gradients,
// instead of hanging as PyTorch's FAST mode does.
#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/dist_autograd.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {
namespace {

using namespace std::chrono_literals;
using rpc::CallArgs;
using rpc::CallContext;
using rpc::FunctionRegistry;
using rpc::RpcAgent;
using fibers::LocalRuntime;

Tensor leaf(std::vector<double> values) {
  Tensor t = from_values({3, 3}, values);
  t.set_requires_grad(true);
  return t;
}

class DistAutogradTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = FunctionRegistry::with_builtins();
    registry_.add("nested_mul", [](CallContext& ctx, const CallArgs& args) {
      // On node 1: ask node 2 to add, then multiply locally, all inside the caller's context.
      Tensor sum2 = ctx.agent().rpc_sync(2, "add", {{args.tensors[0], args.tensors[1]}, {}})[0];
      return std::vector<Tensor>{mul(sum2, args.tensors[1])};
    });
    for (int i = 0; i < 3; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<RpcAgent>(env, registry_));
      autograd_.push_back(std::make_unique<DistAutograd>(*agents_.back(), DistEngineOptions{.backward_timeout = 5s}));
      agents_.back()->start();
    }
  }

  LocalRuntime rt_;
  FunctionRegistry registry_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
  std::vector<std::unique_ptr<DistAutograd>> autograd_;
};

TEST_F(DistAutogradTest, TheSeedExampleMatchesLocalAutograd) {
  Tensor t1 = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor t2 = leaf({0.5, 0.5, 0.5, 1, 1, 1, 2, 2, 2});
  Tensor t4 = leaf({3, 1, 4, 1, 5, 9, 2, 6, 5});
  std::vector<std::pair<Tensor, Tensor>> grads;
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor t3 = agents_[0]->rpc_sync(1, "add", {{t1, t2}, {}})[0];
    EXPECT_EQ(t3.grad_fn()->name(), "RecvRpcBackward");
    Tensor loss = sum(mul(t3, t4));
    autograd_[0]->backward(ctx.id(), {loss});
    grads = autograd_[0]->get_gradients(ctx.id());
    EXPECT_EQ(autograd_[1]->debug_info().num_autograd_contexts, 1u);
  });
  // The oracle: the same program on the local engine.
  Tensor l1 = leaf(t1.to_vector()), l2 = leaf(t2.to_vector()), l4 = leaf(t4.to_vector());
  sum(mul(add(l1, l2), l4)).backward();
  ASSERT_EQ(grads.size(), 3u);
  std::map<const void*, Tensor> by_leaf;
  for (auto& [t, g] : grads) by_leaf[t.unsafe_impl()] = g;
  EXPECT_EQ(by_leaf.at(t1.unsafe_impl()).to_vector(), l1.grad().to_vector());
  EXPECT_EQ(by_leaf.at(t2.unsafe_impl()).to_vector(), l2.grad().to_vector());
  EXPECT_EQ(by_leaf.at(t4.unsafe_impl()).to_vector(), l4.grad().to_vector());
  EXPECT_FALSE(t1.grad().defined()) << "distributed gradients never land in .grad";
  // The context was released on every node that saw it.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(autograd_[static_cast<size_t>(i)]->debug_info().num_autograd_contexts, 0u) << i;
  EXPECT_EQ(autograd_[0]->debug_info().num_current_backward_passes, 0u);
}

TEST_F(DistAutogradTest, NestedCallsCarryTheContextAndGradientsFlowThroughThem) {
  Tensor a = leaf({1, 1, 1, 2, 2, 2, 3, 3, 3});
  Tensor b = leaf({1, 2, 3, 1, 2, 3, 1, 2, 3});
  std::vector<std::pair<Tensor, Tensor>> grads;
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor out = agents_[0]->rpc_sync(1, "nested_mul", {{a, b}, {}})[0];
    autograd_[0]->backward(ctx.id(), {sum(out)});
    grads = autograd_[0]->get_gradients(ctx.id());
  });
  Tensor la = leaf(a.to_vector()), lb = leaf(b.to_vector());
  sum(mul(add(la, lb), lb)).backward();
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0].second.to_vector(), grads[0].first.is_same(a) ? la.grad().to_vector() : lb.grad().to_vector());
  EXPECT_EQ(grads[1].second.to_vector(), grads[1].first.is_same(a) ? la.grad().to_vector() : lb.grad().to_vector());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(autograd_[static_cast<size_t>(i)]->debug_info().num_autograd_contexts, 0u) << i;
}

TEST_F(DistAutogradTest, RetainGraphAccumulatesWithinOneContext) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = leaf({1, 1, 1, 1, 1, 1, 1, 1, 1});
  std::vector<double> once, twice;
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor loss = sum(agents_[0]->rpc_sync(1, "mul", {{x, y}, {}})[0]);
    autograd_[0]->backward(ctx.id(), {loss}, /*retain_graph=*/true);
    once = autograd_[0]->container().retrieve_context(ctx.id()).gradient_of(x).to_vector();
    autograd_[0]->backward(ctx.id(), {loss}, /*retain_graph=*/true);
    twice = autograd_[0]->container().retrieve_context(ctx.id()).gradient_of(x).to_vector();
  });
  ASSERT_EQ(once.size(), 9u);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(twice[i], 2 * once[i]);
}

TEST_F(DistAutogradTest, AnUnusedRpcResultFailsTheBackwardOnEveryWorkerInsteadOfHanging) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor used = agents_[0]->rpc_sync(1, "neg", {{x}, {}})[0];
    Tensor unused;
    {
      CallLabelScope label("unused");
      unused = agents_[0]->rpc_sync(2, "exp", {{x}, {}})[0];
    }
    EXPECT_TRUE(throws_error([&] { autograd_[0]->backward(ctx.id(), {sum(used)}); }, ErrorCode::autograd_error,
                             {"Error on Node 0: backward pass of context", "can never finish",
                              "'unused' (autograd message id", "on node 0", "on node 2"}));
    // Found by termination detection (an idle interval and two waves), long before the timeout.
    EXPECT_LT(rt_.now().since_epoch, std::chrono::nanoseconds(1s));
  });
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(autograd_[i]->debug_info().num_current_backward_passes, 0u);
}

// SMART mode (BackwardMode::smart): the same program, with the unused result of a nested call
// and of a self-call besides, runs only what the root reaches and gets local autograd's
// gradients; the unused send functions block nothing.
TEST_F(DistAutogradTest, SmartModeRunsOnlyWhatTheRootsNeedAndIgnoresUnusedResults) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = leaf({2, 2, 2, 1, 1, 1, 3, 3, 3});
  std::vector<std::pair<Tensor, Tensor>> grads;
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor used = agents_[0]->rpc_sync(1, "nested_mul", {{x, y}, {}})[0];  // through worker2 and back
    Tensor unused = agents_[0]->rpc_sync(2, "exp", {{x}, {}})[0];
    Tensor unused_nested = agents_[0]->rpc_sync(1, "nested_mul", {{y, x}, {}})[0];
    Tensor unused_self = agents_[0]->rpc_sync(0, "neg", {{y}, {}})[0];
    (void)unused, (void)unused_nested, (void)unused_self;
    autograd_[0]->backward(ctx.id(), {sum(used)}, /*retain_graph=*/false, BackwardMode::smart);
    EXPECT_LT(rt_.now().since_epoch, std::chrono::nanoseconds(100ms)) << "a pass waited on an unused result";
    grads = autograd_[0]->get_gradients(ctx.id());
  });
  Tensor lx = leaf(x.to_vector()), ly = leaf(y.to_vector());
  sum(mul(add(lx, ly), ly)).backward();
  ASSERT_EQ(grads.size(), 2u);
  for (auto& [t, g] : grads) EXPECT_EQ(g.to_vector(), (t.is_same(x) ? lx : ly).grad().to_vector());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(autograd_[i]->debug_info().num_current_backward_passes, 0u);
}

TEST_F(DistAutogradTest, DestroyingItUnwindsItsBackgroundFibersAtOnce) {
  // A forward call brings node 0's context to node 1, whose attach sweeper then sleeps until
  // the context has lived attach_after (2 s by default).
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  rt_.env(0).spawner.spawn("caller", [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    agents_[0]->rpc_sync(1, "neg", {{x}, {}});
  });
  EXPECT_EQ(rt_.run(runtime::TimePoint{500ms}), LocalRuntime::Outcome::time_limit);
  ASSERT_NE(rt_.stuck_report().find("fiber dist_autograd.attach in scope dist_autograd"), std::string::npos)
      << rt_.stuck_report();
  // Destroyed while the sweeper sleeps: its scope is cancelled, so the sweeper unwinds without
  // waiting for its timer and never resumes on the destroyed object.
  autograd_[1].reset();
  rt_.run(runtime::TimePoint{1s});
  EXPECT_EQ(rt_.stuck_report().find("dist_autograd.attach"), std::string::npos) << rt_.stuck_report();
  EXPECT_TRUE(rt_.failures().empty());
}

TEST_F(DistAutogradTest, WithDetectionOffTheBackwardTimeoutStillEndsAnUnusedRpc) {
  runtime::Env& env = rt_.add_node("worker3");
  RpcAgent agent(env, registry_);
  DistAutograd autograd(agent, DistEngineOptions{.backward_timeout = 5s, .termination_probe_interval = 0s});
  agent.start();
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  rt_.run_on(3, [&] {
    DistAutograd::Context ctx(autograd);
    Tensor used = agent.rpc_sync(1, "neg", {{x}, {}})[0];
    Tensor unused = agent.rpc_sync(2, "exp", {{x}, {}})[0];
    (void)unused;
    EXPECT_TRUE(throws_error([&] { autograd.backward(ctx.id(), {sum(used)}); }, ErrorCode::timed_out,
                             {"backward pass of context", "send functions still waiting for gradients"}));
  });
  EXPECT_GE(rt_.now().since_epoch, std::chrono::nanoseconds(5s));
}

TEST_F(DistAutogradTest, AnErrorInARemoteBackwardSaysWhichNode) {
  registry_.add("bad_grad", [](CallContext&, const CallArgs& args) {
    // A forward whose backward will throw: a custom node that fails in apply.
    struct Failing final : autograd::Node {
      autograd::variable_list apply(autograd::variable_list&&) override {
        throw errors::autograd_error("exploding gradient");
      }
      std::string_view name() const override { return "FailingBackward"; }
    };
    Tensor out = clone(args.tensors[0]);
    auto node = std::make_shared<Failing>();
    node->add_next_edge(autograd::gradient_edge(args.tensors[0]));
    out.set_history(node, node->add_input_metadata(out));
    return std::vector<Tensor>{out};
  });
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor y = agents_[0]->rpc_sync(1, "bad_grad", {{x}, {}})[0];
    EXPECT_TRUE(throws_error([&] { autograd_[0]->backward(ctx.id(), {sum(y)}); }, ErrorCode::autograd_error,
                             {"Error on Node 1: exploding gradient"}));
  });
}

TEST_F(DistAutogradTest, CallsOutsideAContextOrWithoutGradsGoPlain) {
  rt_.run_on(0, [&] {
    Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
    Tensor y = agents_[0]->rpc_sync(1, "neg", {{x}, {}})[0];
    EXPECT_FALSE(y.requires_grad());
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor z = agents_[0]->rpc_sync(1, "neg", {{from_values({1}, {1})}, {}})[0];
    EXPECT_FALSE(z.requires_grad());
    EXPECT_TRUE(autograd_[0]->container().retrieve_context(ctx.id()).known_worker_ids().empty());
  });
}

TEST_F(DistAutogradTest, ReleasingAContextDuringItsBackwardFailsThePassInsteadOfUsingFreedState) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    Tensor used = agents_[0]->rpc_sync(1, "neg", {{x}, {}})[0];
    Tensor unused = agents_[0]->rpc_sync(1, "exp", {{x}, {}})[0];
    (void)unused;
    // worker1's pass will wait for gradients for `unused` that never come; release the context
    // on worker1 from under it one second into the backward.
    rt_.env(0).spawner.spawn("releaser", [&] {
      rt_.env(0).clock.sleep(std::chrono::milliseconds(10));  // before termination detection starts
      autograd_[1]->release_context(ctx.id());
    });
    EXPECT_TRUE(throws_error([&] { autograd_[0]->backward(ctx.id(), {sum(used)}); }, ErrorCode::autograd_error,
                             {"autograd context", "was released during its backward pass"}));
  });
  EXPECT_LT(rt_.now().since_epoch, std::chrono::nanoseconds(3s)) << "failed by the release, not by the timeout";
  EXPECT_EQ(autograd_[0]->container().num_contexts(), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(autograd_[static_cast<size_t>(i)]->debug_info().num_current_backward_passes, 0u);
}

TEST_F(DistAutogradTest, GradientsFlowThroughARemoteValueFetchedWithToHere) {
  // The design note's end-to-end shape: t3 = remote(add).to_here(); the owner's graph links the
  // fetch back to the call's inputs.
  Tensor t1 = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor t2 = leaf({2, 2, 2, 2, 2, 2, 2, 2, 2});
  Tensor t4 = leaf({1, 0, 1, 0, 1, 0, 1, 0, 1});
  std::vector<std::pair<Tensor, Tensor>> grads;
  rt_.run_on(0, [&] {
    DistAutograd::Context ctx(*autograd_[0]);
    rpc::RRef r = agents_[0]->remote(1, "add", {{t1, t2}, {}});
    Tensor t3 = r.to_here()[0];
    EXPECT_EQ(t3.grad_fn()->name(), "RecvRpcBackward");
    autograd_[0]->backward(ctx.id(), {sum(mul(t3, t4))});
    grads = autograd_[0]->get_gradients(ctx.id());
  });
  Tensor l1 = leaf(t1.to_vector()), l2 = leaf(t2.to_vector()), l4 = leaf(t4.to_vector());
  sum(mul(add(l1, l2), l4)).backward();
  ASSERT_EQ(grads.size(), 3u);
  for (auto& [t, g] : grads) {
    const Tensor& local = t.is_same(t1) ? l1.grad() : t.is_same(t2) ? l2.grad() : l4.grad();
    EXPECT_EQ(g.to_vector(), local.to_vector());
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(autograd_[static_cast<size_t>(i)]->debug_info().num_autograd_contexts, 0u) << i;
  EXPECT_EQ(agents_[1]->owned_rrefs(), 0u);
}

}  // namespace
}  // namespace dagsim::dist_autograd
