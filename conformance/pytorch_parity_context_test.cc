// PyTorch parity (pytorch_parity.h): contexts, what a call records and carries (known worker ids,
// the graph of send and recv functions on both sides), cleanup everywhere, debug info.
#include "conformance/pytorch_parity.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/engine.h"
#include "core/base/throws_error_test_util.h"
#include "core/tensor/ops.h"

namespace dagsim::conformance::parity {
namespace {

using namespace std::chrono_literals;

TEST_F(DistAutogradTest, test_nested_context) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    EXPECT_TRUE(throws_error([&] { DistContext nested(autograd(0)); }, ErrorCode::invalid_argument,
                             {"Already have an autograd context id for this thread"}));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_worker_ids_recorded) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor t1 = ones({3, 3}), t2 = zeros({3, 3});
    const auto& known = autograd(0).container().retrieve_context(ctx.id()).known_worker_ids();
    for (WorkerId dst = 1; dst < kWorld; ++dst) agent(0).rpc_sync(dst, "add", {{t1, t2}, {}});
    // A builtin op without tensors that require grad goes out plain (getMessageWithAutograd).
    EXPECT_TRUE(known.empty());
    for (WorkerId dst = 1; dst < kWorld; ++dst) agent(0).rpc_sync(dst, "my_py_nested_call", {{t1, t2}, {}});
    // A user function always carries the context: every destination is a known worker.
    EXPECT_EQ(known, (std::set<WorkerId>{1, 2, 3}));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_grad_only_on_return_value) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor ret = agent(0).rpc_sync(1, "ret_requires_grad", {})[0];
    EXPECT_TRUE(ret.requires_grad()) << "the callee's tensor requires grad: so does the caller's result";
    autograd(0).backward(ctx.id(), {sum(ret)});
    EXPECT_EQ(autograd(0).get_gradients(ctx.id()).size(), 0u);
    const auto grads = autograd(1).get_gradients(ctx.id());
    ASSERT_EQ(grads.size(), 1u);
    EXPECT_TRUE(grads[0].first.is_same(requires_grad_tensor_.at(1)));
    EXPECT_EQ(grads[0].second.to_vector(), ones({3, 3}).to_vector());
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

// _test_no_graph_with_tensors_not_require_grad, for rpc_sync and for remote + to_here.
TEST_F(DistAutogradTest, test_no_graph_with_tensors_not_require_grad) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor ret = agent(0).rpc_sync(1, "add", {{ones({3, 3}), zeros({3, 3})}, {}})[0];
    EXPECT_FALSE(ret.requires_grad());
    agent(0).rpc_sync(1, "set_rpc_done", {});
    const auto& c = autograd(0).container().retrieve_context(ctx.id());
    EXPECT_EQ(c.send_functions().size(), 0u);
    EXPECT_EQ(c.recv_functions().size(), 0u);
    // The user function carried the context to the callee all the same.
    EXPECT_TRUE(autograd(1).container().has_context(ctx.id()));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_no_graph_with_tensors_not_require_grad_remote) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    // to_here always carries the context: the caller cannot know whether the value requires grad.
    const Tensor ret = agent(0).remote(1, "add", {{ones({3, 3}), zeros({3, 3})}, {}}).to_here()[0];
    EXPECT_FALSE(ret.requires_grad());
    const auto& c = autograd(0).container().retrieve_context(ctx.id());
    EXPECT_EQ(c.send_functions().size(), 0u);
    EXPECT_EQ(c.recv_functions().size(), 0u);
    EXPECT_TRUE(autograd(1).container().has_context(ctx.id()));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

// context_cleanup_test_helper: whatever went over the wire, every context is gone afterwards.
TEST_F(DistAutogradTest, test_context_cleanup_tensor_no_grad) {
  on(0, [&] {
    ContextId id = 0;
    {
      DistContext ctx(autograd(0));
      id = ctx.id();
      for (WorkerId dst = 1; dst < kWorld; ++dst) {
        agent(0).rpc_sync(dst, "add", {{ones({3, 3}), zeros({3, 3})}, {}});
        agent(0).rpc_sync(dst, "set_rpc_done", {});
        EXPECT_TRUE(autograd(dst).container().has_context(id));
      }
    }
    EXPECT_TRUE(throws_error([&] { autograd(0).get_gradients(id); }, ErrorCode::invalid_argument,
                             {"Could not find autograd context with id"}));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_context_cleanup_no_tensors) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    for (WorkerId dst = 1; dst < kWorld; ++dst) agent(0).rpc_sync(dst, "set_rpc_done", {});
    for (WorkerId dst = 1; dst < kWorld; ++dst) EXPECT_TRUE(autograd(dst).container().has_context(ctx.id()));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_error_in_context) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    Prng prng(2);
    const Tensor t1 = rand33(1, true), t2 = rand_uniform({6, 6}, prng, -1.0, 1.0);
    EXPECT_TRUE(throws_error([&] { agent(0).rpc_sync(1, "matmul", {{t1, t2}, {}}); }, ErrorCode::shape_mismatch, {}));
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_debug_info) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    {
      DistContext ctx(autograd(0));
      Tensor res = t1;
      for (WorkerId w = 1; w < kWorld; ++w) res = agent(0).rpc_sync(w, "add", {{res, t2}, {}})[0];
      // PyTorch's MyBackwardFunc: in the middle of the pass, one backward pass is current here.
      std::optional<size_t> passes_during;
      res = mul(res, ones({3, 3}));
      res.grad_fn()->add_pre_hook(0, [&](const Tensor&) {
        passes_during = autograd(0).debug_info().num_current_backward_passes;
        return Tensor();
      });
      for (WorkerId w = 1; w < kWorld; ++w) res = agent(0).rpc_sync(w, "add", {{res, t2}, {}})[0];
      autograd(0).backward(ctx.id(), {sum(res)});
      EXPECT_EQ(passes_during, 1u);
      const size_t contexts = autograd(0).debug_info().num_autograd_contexts;
      EXPECT_TRUE(contexts >= 1 && contexts <= 4) << contexts;
    }
  });
  for (WorkerId w = 0; w < kWorld; ++w) {
    EXPECT_EQ(autograd(w).debug_info().num_current_backward_passes, 0u);
    EXPECT_EQ(autograd(w).debug_info().num_autograd_contexts, 0u);
  }
}

TEST_F(DistAutogradTest, test_graph_for_builtin_call) { test_graph("add", false); }

TEST_F(DistAutogradTest, test_graph_for_python_call) { test_graph("my_py_add", false); }

TEST_F(DistAutogradTest, test_graph_for_builtin_remote_call) { test_graph("add", true); }

TEST_F(DistAutogradTest, test_graph_for_python_remote_call) { test_graph("my_py_add", true); }

TEST_F(DistAutogradTest, test_rpc_complex_args) { test_rpc_complex_args(false); }

TEST_F(DistAutogradTest, test_remote_complex_args) { test_rpc_complex_args(true); }

TEST_F(DistAutogradTest, test_thread_local_context_id) {
  on(0, [&] {
    // A local backward outside any context first, as PyTorch's test does.
    Tensor t3 = add(rand33(1, false), rand33(2, false));
    t3.set_requires_grad(true);
    sum(t3).backward();
    // worker1 runs a whole distributed backward of its own while serving the remote call.
    const Tensor got = agent(0).remote(1, "workload_thread", {}).to_here()[0];
    EXPECT_EQ(got.item(), 2.0) << "t1's and t2's gradients in worker1's own context";
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

}  // namespace
}  // namespace dagsim::conformance::parity
