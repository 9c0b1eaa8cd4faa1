// PyTorch parity (pytorch_parity.h): the distributed backward: root checks, gradients equal local
// autograd's through round trips, several outputs and unused tensors, accumulation over several
// backward calls in one context, errors and recovery, hooks.
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

TEST_F(DistAutogradTest, test_backward_invalid_args) {
  on(0, [&] {
    DistContext ctx(autograd(0));
    auto fails = [&](const autograd::variable_list& roots, const char* text) {
      EXPECT_TRUE(throws_error([&] { autograd(0).backward(ctx.id(), roots); }, ErrorCode::autograd_error, {text})) << text;
    };
    fails({}, "No tensors provided for gradient computation");
    fails({rand33(1, false)}, "requires_grad not set on");
    fails({rand33(2, true)}, "is not a scalar, all roots need to be scalar");
    Tensor scalar_leaf = from_values({1}, {0.5});
    scalar_leaf.set_requires_grad(true);
    fails({scalar_leaf}, "does not have a valid gradient function");
  });
}

TEST_F(DistAutogradTest, test_backward_without_context) {
  on(0, [&] {
    const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
    ContextId stale = 0;
    Tensor res;
    {
      DistContext ctx(autograd(0));
      stale = ctx.id();
      res = agent(0).rpc_sync(1, "add", {{t1, t2}, {}})[0];
    }
    EXPECT_TRUE(throws_error([&] { autograd(0).backward(stale, {sum(res)}); }, ErrorCode::invalid_argument,
                             {"Could not find autograd context with id"}));
  });
}

TEST_F(DistAutogradTest, test_backward_without_rpc) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    autograd(0).backward(ctx.id(), {sum(add(t1, t2))});
    const auto grads = autograd(0).get_gradients(ctx.id());
    ASSERT_EQ(grads.size(), 2u);
    const auto local = local_grads([](const std::vector<Tensor>& l) { return sum(add(l[0], l[1])); }, {t1, t2});
    EXPECT_EQ(grad_of(grads, t1), local[0]);
    EXPECT_EQ(grad_of(grads, t2), local[1]);
    EXPECT_FALSE(t1.grad().defined()) << ".grad is never written by distributed autograd";
  });
}

TEST_F(DistAutogradTest, test_backward_simple_self) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor ret = agent(0).rpc_sync(0, "add", {{t1, t2}, {}})[0];  // to itself
    autograd(0).backward(ctx.id(), {sum(ret)});
    const auto grads = autograd(0).get_gradients(ctx.id());
    const auto local = local_grads([](const std::vector<Tensor>& l) { return sum(add(l[0], l[1])); }, {t1, t2});
    EXPECT_EQ(grad_of(grads, t1), local[0]);
    EXPECT_EQ(grad_of(grads, t2), local[1]);
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_backward_multiple_roots) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    const auto call = [&](const char* f, std::vector<Tensor> args) { return sum(agent(0).rpc_sync(1, f, {std::move(args), {}})[0]); };
    autograd(0).backward(ctx.id(), {call("add", {t1, t2}), call("mul", {t1, t2}), call("cos", {t1}), call("div", {t1, t2})});
    const auto grads = autograd(0).get_gradients(ctx.id());
    const auto local = local_grads(
        [](const std::vector<Tensor>& l) {
          return add(add(sum(add(l[0], l[1])), sum(mul(l[0], l[1]))), add(sum(cos(l[0])), sum(div(l[0], l[1]))));
        },
        {t1, t2});
    const auto near = [](const std::vector<double>& a, const std::vector<double>& b) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12 * (1 + std::abs(b[i])));
    };
    near(grad_of(grads, t1), local[0]);
    near(grad_of(grads, t2), local[1]);
  });
}

TEST_F(DistAutogradTest, test_backward_no_grad_on_tensor) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor loss = sum(agent(0).rpc_sync(1, "add", {{t1, t2}, {}})[0]);
    autograd(0).backward(ctx.id(), {loss}, /*retain_graph=*/true);
    EXPECT_FALSE(t1.grad().defined());
    EXPECT_FALSE(t2.grad().defined());
    // .grad filled by the local engine is left alone by distributed autograd.
    sum(add(t1, t2)).backward();
    ASSERT_TRUE(t1.grad().defined() && t2.grad().defined());
    const std::vector<double> before1 = t1.grad().to_vector(), before2 = t2.grad().to_vector();
    autograd(0).backward(ctx.id(), {loss});
    EXPECT_EQ(t1.grad().to_vector(), before1);
    EXPECT_EQ(t2.grad().to_vector(), before2);
  });
}

TEST_F(DistAutogradTest, test_backward_accumulate_grads) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor local = matmul(t1, t2);
    autograd::Engine::backward({sum(local)}, {}, /*retain_graph=*/true);
    autograd::Engine::backward({sum(local)}, {});
    const Tensor t3 = agent(0).rpc_sync(1, "matmul", {{t1, t2}, {}})[0];
    autograd(0).backward(ctx.id(), {sum(t3)}, /*retain_graph=*/true);
    autograd(0).backward(ctx.id(), {sum(t3)});
    const auto grads = autograd(0).get_gradients(ctx.id());
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_EQ(grad_of(grads, t1), t1.grad().to_vector());
    EXPECT_EQ(grad_of(grads, t2), t2.grad().to_vector());
  });
}

TEST_F(DistAutogradTest, test_nested_backward_accumulate_grads) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    rpc::CallArgs args{{t1, t2}, {}};
    args.ints["dst"] = 1;  // PyTorch's _next_rank() of the caller: worker1 calls itself
    const Tensor loss = sum(agent(0).rpc_sync(1, "nested_python_udf", args)[0]);
    autograd(0).backward(ctx.id(), {loss}, /*retain_graph=*/true);
    autograd(0).backward(ctx.id(), {loss});
    const auto grads = autograd(0).get_gradients(ctx.id());
    const auto local = local_grads(
        [](const std::vector<Tensor>& l) {
          const Tensor t3 = mul(l[0], l[1]), t4 = add(l[0], l[1]);
          return sum(mul(mul(mul(mul(l[0], l[1]), t3), t4), add(t3, t4)));
        },
        {t1, t2});
    const std::vector<double> g1 = grad_of(grads, t1);
    ASSERT_EQ(g1.size(), local[0].size());
    for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g1[i], 2 * local[0][i], 1e-12 * (1 + std::abs(local[0][i]))) << "two passes accumulate";
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_multiple_backward) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor loss = sum(agent(0).rpc_sync(1, "add", {{t1, t2}, {}})[0]);
    for (int i = 0; i < 1000; ++i) autograd(0).backward(ctx.id(), {loss}, /*retain_graph=*/true);
    const auto grads = autograd(0).get_gradients(ctx.id());
    for (double g : grad_of(grads, t1)) EXPECT_EQ(g, 1000.0);
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_multiple_backward_with_errors) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor loss = sum(agent(0).rpc_sync(1, "python_udf_with_backward_error", {{t1, t2}, {}})[0]);
    simulate_backward_error = true;
    for (int i = 0; i < 100; ++i) {
      if (i < 50) {
        EXPECT_TRUE(throws_error([&] { autograd(0).backward(ctx.id(), {loss}, true); }, ErrorCode::autograd_error,
                                 {"Error on Node 1", "Simulate error on backward pass"}))
            << "pass " << i;
      } else if (i > 50) {
        autograd(0).backward(ctx.id(), {loss}, true);  // recovered: a failed context runs backward again
      } else {
        simulate_backward_error = false;
      }
    }
    for (double g : grad_of(autograd(0).get_gradients(ctx.id()), t1)) EXPECT_EQ(g, 49.0);
  });
  simulate_backward_error = false;
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_mixed_requires_grad) {
  for (const bool remote : {false, true}) {
    const Tensor t1 = rand33(1, true), t2 = rand33(2, false);
    on(0, [&] {
      DistContext ctx(autograd(0));
      const rpc::CallArgs args{{t1, t2}, {}};
      const Tensor ret = remote ? agent(0).remote(1, "mixed_requires_grad", args).to_here()[0]
                                : agent(0).rpc_sync(1, "mixed_requires_grad", args)[0];
      EXPECT_EQ(ret.to_vector(), mul(t1, t2).to_vector()) << "the callee saw t2 without requires_grad";
      autograd(0).backward(ctx.id(), {sum(ret)});
      EXPECT_TRUE(ret.requires_grad());
      const auto grads = autograd(0).get_gradients(ctx.id());
      ASSERT_EQ(grads.size(), 1u);
      EXPECT_EQ(grad_of(grads, t1), t2.to_vector());
    });
  }
  EXPECT_EQ(contexts_everywhere(), 0u);
}

TEST_F(DistAutogradTest, test_backward_verify_hooks) {
  // t1's hook doubles its gradient, for local autograd and distributed autograd alike.
  for (const bool remote : {false, true}) {
    const Tensor t1 = ones({3, 3}), t2 = ones({3, 3});
    t1.set_requires_grad(true);
    t2.set_requires_grad(true);
    t1.register_hook([](const Tensor& g) { return mul(g, full({3, 3}, 2.0)); });
    on(0, [&] {
      DistContext ctx(autograd(0));
      const rpc::CallArgs args{{t1, t2}, {}};
      const Tensor ret = remote ? agent(0).remote(1, "matmul", args).to_here()[0] : agent(0).rpc_sync(1, "matmul", args)[0];
      autograd(0).backward(ctx.id(), {sum(ret)});
      const auto grads = autograd(0).get_gradients(ctx.id());
      sum(matmul(t1, t2)).backward();
      EXPECT_EQ(grad_of(grads, t1), t1.grad().to_vector());
      EXPECT_EQ(grad_of(grads, t1), full({3, 3}, 6.0).to_vector());
      EXPECT_EQ(grad_of(grads, t2), t2.grad().to_vector());
    });
  }
}

TEST_F(DistAutogradTest, test_backward_python_udf_error) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  simulate_backward_error = true;
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor loss = sum(agent(0).rpc_sync(1, "python_udf_with_backward_error", {{t1, t2}, {}})[0]);
    EXPECT_TRUE(throws_error([&] { autograd(0).backward(ctx.id(), {loss}); }, ErrorCode::autograd_error,
                             {"Simulate error on backward pass"}));
  });
  simulate_backward_error = false;
  EXPECT_EQ(contexts_everywhere(), 0u);
}

// test_backward_simple_script_call: a scripted add called locally, by rpc_sync, rpc_async and
// remote; each run's gradients equal the local run's.
TEST_F(DistAutogradTest, test_backward_simple_script_call) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  verify_backwards([&](const Exec& exec) { return sum(exec("my_script_add", {t1, t2}, {})[0]); }, {t1, t2});
}

TEST_F(DistAutogradTest, test_backward_complex_python_udf) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  verify_backwards([&](const Exec& exec) { return sum(exec("complex_python_udf", {t1, t2}, {})[0]); }, {t1, t2});
}

TEST_F(DistAutogradTest, test_backward_multiple_round_trips) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, false), t3 = rand33(3, true), t4 = rand33(4, false), t5 = rand33(5, true);
  verify_backwards(
      [&](const Exec& exec) {
        Tensor val = exec("add", {t1, t2}, {})[0];
        val = exec("mul", {t3, val}, {})[0];
        const Tensor s1 = exec("stack", {t4, val}, {})[0], s2 = exec("stack", {t5, val}, {})[0];
        val = exec("bmm", {s1, s2}, {})[0];
        val = exec("matmul", {val, val}, {})[0];
        return sum(val);
      },
      {t1, t2, t3, t4, t5});
}

TEST_F(DistAutogradTest, test_backward_different_tensor_dims) {
  const Tensor t1 = rand_of({4, 6}, 1, true), t2 = rand_of({6, 5}, 2, false), t3 = rand_of({5, 7}, 3, true),
               t4 = rand_of({7, 9}, 4, false);
  verify_backwards(
      [&](const Exec& exec) {
        const Tensor val = exec("matmul", {t1, t2}, {})[0];
        return sum(exec("multi_dot", {val, t3, t4}, {})[0]);
      },
      {t1, t2, t3, t4});
}

TEST_F(DistAutogradTest, test_backward_unused_tensors) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true), t3 = rand33(3, true);
  verify_backwards(
      [&](const Exec& exec) {
        const Tensor s = exec("stack", {t1, t2, t3}, {})[0];
        return sum(exec("matmul", {narrow(s, 0, 0, 1), narrow(s, 0, 2, 1)}, {})[0]);
      },
      {t1, t2, t3});
}

TEST_F(DistAutogradTest, test_backward_multiple_output_tensors) {
  const Tensor t = rand_of({10, 2}, 1, true);
  verify_backwards(
      [&](const Exec& exec) {
        const std::vector<Tensor> pieces = exec("split", {t}, {{"split_size", 2}});
        EXPECT_EQ(pieces.size(), 5u);
        // Pieces 1 and 3 come back unused: their gradients are zero-filled, not waited for.
        return sum(exec("multi_dot", {pieces.at(0), pieces.at(2), pieces.at(4)}, {})[0]);
      },
      {t});
}

TEST_F(DistAutogradTest, test_backward_different_dtypes) {
  // A float32 and a float64 leaf added on worker1: the sum is float64 (PyTorch's type promotion),
  // and each leaf's gradient comes back in its own dtype.
  Prng prng(1);
  Tensor t1 = rand_uniform({3, 3}, prng, -1.0, 1.0, Dtype::float32);
  t1.set_requires_grad(true);
  const Tensor t2 = rand33(2, true);
  verify_backwards([&](const Exec& exec) { return sum(exec("add", {t1, t2}, {})[0]); }, {t1, t2});
  on(0, [&] {
    DistContext ctx(autograd(0));
    const Tensor ret = agent(0).rpc_sync(1, "add", {{t1, t2}, {}})[0];
    EXPECT_EQ(ret.dtype(), Dtype::float64);
    autograd(0).backward(ctx.id(), {sum(ret)});
    for (const auto& [leaf, grad] : autograd(0).get_gradients(ctx.id())) EXPECT_EQ(grad.dtype(), leaf.dtype());
  });
}

// PyTorch's MyFunc / MyFuncSingleGrad: the sum of its inputs (one or two) forward; backward hands
// the one gradient it got to every input and notes where that gradient's data lives.
const void* static_grad_ptr = nullptr;
Tensor my_func(const std::vector<Tensor>& inputs) {
  struct MyFunc final : autograd::Node {
    autograd::variable_list apply(autograd::variable_list&& grads) override {
      static_grad_ptr = grads[0].data<double>();
      return autograd::variable_list(num_outputs(), grads[0]);
    }
    std::string_view name() const override { return "MyFunc"; }
  };
  Tensor out = clone(detach(inputs[0]));
  for (size_t i = 1; i < inputs.size(); ++i) out = add(out, detach(inputs[i]));
  auto node = std::make_shared<MyFunc>();
  for (const Tensor& in : inputs) node->add_next_edge(autograd::gradient_edge(in));
  out.set_history(node, node->add_input_metadata(out));
  return out;
}

TEST_F(DistAutogradTest, test_no_grad_copy) {
  // (PyTorch's first case, a non-contiguous gradient, has no counterpart: dagsim's tensors are
  // always contiguous.)
  const Tensor a = rand_of({5, 6}, 1, true), b = rand_of({5, 6}, 2, true);
  on(0, [&] {
    {
      // The gradient passed through to `a` alone: the context keeps it as it is, no copy.
      DistContext ctx(autograd(0));
      autograd(0).backward(ctx.id(), {sum(my_func({a}))});
      const auto grads = autograd(0).get_gradients(ctx.id());
      ASSERT_EQ(grads.size(), 1u);
      EXPECT_EQ(grads[0].second.data<double>(), static_grad_ptr) << "the gradient was copied";
    }
    {
      // One gradient tensor handed to both `a` and `b`: never one buffer for both. The first leaf
      // captured gets a copy; PyTorch copies for the second too, where dagsim lets the second
      // steal the buffer, which by then nothing else holds (one copy fewer, no aliasing).
      DistContext ctx(autograd(0));
      autograd(0).backward(ctx.id(), {sum(my_func({a, b}))});
      const auto grads = autograd(0).get_gradients(ctx.id());
      ASSERT_EQ(grads.size(), 2u);
      EXPECT_NE(grads[0].second.data<double>(), grads[1].second.data<double>());
      EXPECT_NE(grads[0].second.data<double>(), static_grad_ptr) << "the first leaf aliased a buffer another holds";
      for (const auto& [leaf, grad] : grads) EXPECT_EQ(grad.to_vector(), ones({5, 6}).to_vector());
    }
  });
}

TEST_F(DistAutogradTest, test_post_hooks) {
  // Hooks on the AccumulateGrad of t (both edges of t + t lead to it): 1 + 2 + 2 calls' worth.
  int hook_called_times = 0;
  const Tensor t = rand_of({10, 10}, 1, true);
  const Tensor a = add(t, t);
  const auto add_one = [&](const autograd::variable_list&, const autograd::variable_list&) {
    hook_called_times += 1;
    return autograd::variable_list{};
  };
  const auto add_two = [&](const autograd::variable_list&, const autograd::variable_list&) {
    hook_called_times += 2;
    return autograd::variable_list{};
  };
  a.grad_fn()->next_edge(0).function->add_post_hook(add_one);
  a.grad_fn()->next_edge(0).function->add_post_hook(add_two);
  a.grad_fn()->next_edge(1).function->add_post_hook(add_two);
  on(0, [&] {
    DistContext ctx(autograd(0));
    autograd(0).backward(ctx.id(), {sum(a)});
    EXPECT_EQ(hook_called_times, 5);
    const auto grads = autograd(0).get_gradients(ctx.id());
    ASSERT_EQ(grads.size(), 1u);
    EXPECT_TRUE(grads[0].first.is_same(t));
  });
}

}  // namespace
}  // namespace dagsim::conformance::parity
