// The fixture of the PyTorch parity suites (pytorch_parity_*_test.cc): PyTorch's own distributed
// autograd tests (DistAutogradTest in torch/testing/_internal/distributed/rpc/
// dist_autograd_test.py), ported one for one onto a simulated world of four workers, with the
// user functions that file defines (Python UDFs there) and its helpers (_exec_func,
// _verify_backwards, _test_graph, ...). Each test carries the name of the PyTorch test it mirrors
// and asserts what that test asserts; where dagsim's C++ API differs from Python's (no
// TorchScript, no custom autograd.Function: a hook or a hand-made Node plays its part) the comment
// says so. docs/pytorch_parity.md maps every PyTorch test to the dagsim test that covers it.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/engine.h"
#include "core/base/prng.h"
#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "conformance/autograd_cluster.h"

namespace dagsim::conformance::parity {

using namespace std::chrono_literals;
using dist_autograd::ContextId;
using DistContext = dist_autograd::DistAutograd::Context;

constexpr int kWorld = 4;

inline Tensor rand33(uint64_t seed, bool requires_grad) {
  Prng prng(seed);
  Tensor t = rand_uniform({3, 3}, prng, -1.0, 1.0);
  t.set_requires_grad(requires_grad);
  return t;
}

inline Tensor rand_of(const Shape& shape, uint64_t seed, bool requires_grad) {
  Prng prng(seed);
  Tensor t = rand_uniform(shape, prng, -1.0, 1.0);
  t.set_requires_grad(requires_grad);
  return t;
}

// SimulateBackwardError: a node whose backward throws while the switch is on, and passes its
// gradient through otherwise (PyTorch's custom Function of the same name).
inline bool simulate_backward_error = false;
inline Tensor simulate_backward_error_fn(const Tensor& input) {
  struct Simulate final : autograd::Node {
    autograd::variable_list apply(autograd::variable_list&& grads) override {
      if (simulate_backward_error) throw errors::autograd_error("Simulate error on backward pass");
      return std::move(grads);
    }
    std::string_view name() const override { return "SimulateBackwardError"; }
  };
  Tensor out = clone(detach(input));
  auto node = std::make_shared<Simulate>();
  node->add_next_edge(autograd::gradient_edge(input));
  out.set_history(node, node->add_input_metadata(out));
  return out;
}

// The PyTorch test file's user functions (Python UDFs there), beside the builtin ops.
class DistAutogradTest : public ::testing::Test {
 public:  // the suites' helper functions use it too
  explicit DistAutogradTest(rpc::RpcOptions rpc_options = {})
      : cluster_(AutogradCluster::zero_latency(), kWorld, registry(), std::move(rpc_options)) {}

  const rpc::FunctionRegistry& registry() {
    registry_ = rpc::FunctionRegistry::with_builtins();
    // my_py_add: a user function (always recorded), here the same sum as the builtin.
    registry_.add("my_py_add", [](rpc::CallContext&, const rpc::CallArgs& a) { return std::vector<Tensor>{add(a.tensors.at(0), a.tensors.at(1))}; });
    // my_py_nested_call: t1 + t2 on the next worker, through this one.
    registry_.add("my_py_nested_call", [](rpc::CallContext& c, const rpc::CallArgs& a) {
      const auto next = static_cast<WorkerId>((c.agent().self() + 1) % kWorld);
      return c.agent().rpc_sync(next, "add", {{a.tensors.at(0), a.tensors.at(1)}, {}});
    });
    // my_py_nested_call(t1, t2, dst, hops): passes the call on to dst's next worker `hops` times,
    // then has that worker add with my_py_add.
    registry_.add("my_py_nested_call_hops", [](rpc::CallContext& c, const rpc::CallArgs& a) {
      const int64_t dst = a.integer("my_py_nested_call_hops", "dst"), hops = a.integer("my_py_nested_call_hops", "hops");
      const auto next = static_cast<WorkerId>((dst + 1) % kWorld);
      rpc::CallArgs args{{a.tensors.at(0), a.tensors.at(1)}, {}};
      if (hops == 0) return c.agent().rpc_sync(next, "my_py_add", args);
      args.ints = {{"dst", next}, {"hops", hops - 1}};
      return c.agent().rpc_sync(next, "my_py_nested_call_hops", args);
    });
    // _set_rpc_done: a user function without tensors, which carries the context all the same.
    registry_.add("set_rpc_done", [](rpc::CallContext&, const rpc::CallArgs&) { return std::vector<Tensor>{}; });
    // ret_requires_grad: a tensor of the callee's that requires grad, from no argument.
    registry_.add("ret_requires_grad", [this](rpc::CallContext& c, const rpc::CallArgs&) {
      return std::vector<Tensor>{requires_grad_tensor_.at(c.agent().self())};
    });
    // _mixed_requires_grad: the callee sees which arguments require grad.
    registry_.add("mixed_requires_grad", [](rpc::CallContext&, const rpc::CallArgs& a) {
      const Tensor &t1 = a.tensors.at(0), &t2 = a.tensors.at(1);
      return std::vector<Tensor>{t2.requires_grad() ? sub(t1, t2) : mul(t1, t2)};
    });
    // _nested_python_udf: t1*t2*t3*t4*res with res from a builtin call to `dst`.
    registry_.add("nested_python_udf", [](rpc::CallContext& c, const rpc::CallArgs& a) {
      const Tensor &t1 = a.tensors.at(0), &t2 = a.tensors.at(1);
      const Tensor t3 = mul(t1, t2), t4 = add(t1, t2);
      const auto dst = static_cast<WorkerId>(a.integer("nested_python_udf", "dst"));
      const Tensor res = c.agent().rpc_sync(dst, "add", {{t3, t4}, {}})[0];
      return std::vector<Tensor>{mul(mul(mul(mul(t1, t2), t3), t4), res)};
    });
    registry_.add("python_udf_with_backward_error", [](rpc::CallContext&, const rpc::CallArgs& a) {
      return std::vector<Tensor>{simulate_backward_error_fn(add(a.tensors.at(0), a.tensors.at(1)))};
    });
    // my_rref_add: the owner's value plus t2 (the RRef's value follows the caller's tensors).
    registry_.add("my_rref_add", [](rpc::CallContext&, const rpc::CallArgs& a) { return std::vector<Tensor>{add(a.tensors.at(1), a.tensors.at(0))}; });
    // _complex_python_udf: linears and a multi_dot, all on the callee.
    registry_.add("complex_python_udf", [](rpc::CallContext&, const rpc::CallArgs& a) {
      const Tensor &t1 = a.tensors.at(0), &t2 = a.tensors.at(1);
      const Tensor t3 = linear(t1, t2, Tensor()), t4 = linear(t2, t3, Tensor()), t5 = linear(t3, t4, Tensor());
      return std::vector<Tensor>{multi_dot({t1, t2, t3, t4, t5})};
    });
    // _workload_thread: a whole distributed forward and backward, in a context of its own, run
    // by the callee of a remote call made outside any context.
    registry_.add("workload_thread", [this](rpc::CallContext& c, const rpc::CallArgs&) {
      const Tensor t1 = rand33(11, true), t2 = rand33(12, true);
      rpc::RpcAgent& me = c.agent();
      DistContext ctx(autograd(me.self()));
      const Tensor t3 = me.rpc_sync(0, "add", {{t1, t2}, {}})[0];
      const Tensor t4 = me.rpc_sync(0, "mul", {{t2, t3}, {}})[0];
      const Tensor t5 = me.rpc_sync(0, "matmul", {{t3, t4}, {}})[0];
      const Tensor t6 = me.rpc_sync(0, "add", {{t4, t5}, {}})[0];
      autograd(me.self()).backward(ctx.id(), {sum(t6)});
      return std::vector<Tensor>{from_values({1}, {static_cast<double>(autograd(me.self()).get_gradients(ctx.id()).size())})};
    });
    // _run_trainer: the trainer adds the parameter server's RRef (forked to it by the server) to its
    // t2 there, runs backward, and holds its context until the server has checked its gradients.
    registry_.add("run_trainer", [this](rpc::CallContext& c, const rpc::CallArgs& a) {
      rpc::RpcAgent& me = c.agent();
      const auto ps = static_cast<WorkerId>(a.integer("run_trainer", "ps"));
      Tensor t2 = a.tensors.at(0);
      t2.set_requires_grad(true);
      DistContext ctx(autograd(me.self()));
      trainer_contexts_[me.self()] = ctx.id();
      const Tensor ret = me.rpc_sync(ps, "my_rref_add", {{t2}, {}, {a.rrefs.at(0)}})[0];
      autograd(me.self()).backward(ctx.id(), {sum(ret)});
      ++trainers_done_;
      while (!trainers_checked_) me.env().clock.sleep(std::chrono::milliseconds(10));
      return std::vector<Tensor>{};
    });
    // _my_nested_rref_add: passes the RRef it was given (a fork) on to `dst`, its owner.
    registry_.add("my_nested_rref_add", [](rpc::CallContext& c, const rpc::CallArgs& a) {
      const auto dst = static_cast<WorkerId>(a.integer("my_nested_rref_add", "dst"));
      EXPECT_FALSE(a.rrefs.at(0).is_owner()) << "a fork on a worker that does not own it";
      return c.agent().rpc_sync(dst, "my_rref_add", {{a.tensors.at(0)}, {}, {a.rrefs.at(0)}});
    });
    // my_script_add: a TorchScript function is, in dagsim, a function registered by name (no code
    // travels): torch.add of its two tensors, as a user function rather than the builtin.
    registry_.add("my_script_add", [](rpc::CallContext&, const rpc::CallArgs& a) {
      return std::vector<Tensor>{add(a.tensors.at(0), a.tensors.at(1))};
    });
    registry_.add("create_tensor", [](rpc::CallContext&, const rpc::CallArgs&) {
      Tensor t = ones({3, 3});
      t.set_requires_grad(true);
      return std::vector<Tensor>{t};
    });
    for (WorkerId w = 0; w < kWorld; ++w) {
      Tensor t = ones({3, 3});
      t.set_requires_grad(true);
      requires_grad_tensor_[w] = t;
    }
    return registry_;
  }

  dist_autograd::DistAutograd& autograd(WorkerId w) { return *cluster_.autograd[w]; }
  rpc::RpcAgent& agent(WorkerId w) { return *cluster_.agents[w]; }
  // Runs `fn` on worker `w` (rank 0 unless said) and the world until it and what it caused end.
  template <typename F>
  void on(WorkerId w, F fn) {
    cluster_.world.spawn_foreground(w, "test", std::move(fn));
    const auto outcome = cluster_.world.run({.stop_at = std::nullopt, .max_virtual_time = cluster_.world.now() + 60s});
    ASSERT_EQ(outcome, sim::SimWorld::Outcome::finished) << cluster_.world.stuck_report();
    cluster_.world.run({.stop_at = cluster_.world.now() + 1s});  // the releases' messages land
  }
  size_t contexts_everywhere() {
    size_t n = 0;
    for (WorkerId w = 0; w < kWorld; ++w) n += autograd(w).debug_info().num_autograd_contexts;
    return n;
  }
  // Local autograd's gradients of `loss` for `leaves` (fresh copies of them).
  static std::vector<std::vector<double>> local_grads(const std::function<Tensor(const std::vector<Tensor>&)>& loss,
                                                      const std::vector<Tensor>& leaves) {
    std::vector<Tensor> copies;
    for (const Tensor& l : leaves) {
      Tensor c = clone(detach(l));
      c.set_requires_grad(true);
      copies.push_back(c);
    }
    const autograd::variable_list grads = autograd::Engine::grad({loss(copies)}, copies);
    std::vector<std::vector<double>> out;
    for (const Tensor& g : grads) out.push_back(g.to_vector());
    return out;
  }
  static std::vector<double> grad_of(const std::vector<std::pair<Tensor, Tensor>>& grads, const Tensor& leaf) {
    for (const auto& [t, g] : grads) {
      if (t.is_same(leaf)) return g.to_vector();
    }
    ADD_FAILURE() << "no gradient for the leaf";
    return {};
  }

  // PyTorch's ExecMode and _verify_backwards: the same program run locally (the registry's
  // function on the local engine), by rpc_sync, by rpc_async and by remote + to_here on worker1;
  // the gradients of the distributed runs equal the local run's, leaf by leaf.
  using Exec = std::function<std::vector<Tensor>(const char* function, std::vector<Tensor> tensors,
                                                 std::map<std::string, double> attributes)>;
  void verify_backwards(const std::function<Tensor(const Exec&)>& program, const std::vector<Tensor>& leaves) {
    const Exec local = [&](const char* f, std::vector<Tensor> tensors, std::map<std::string, double> attributes) {
      rpc::CallContext c{nullptr, 0};
      return (*registry_.find(f))(c, {std::move(tensors), std::move(attributes)});
    };
    const Tensor local_loss = program(local);
    std::vector<Tensor> differentiable;
    for (const Tensor& l : leaves) {
      if (l.requires_grad()) differentiable.push_back(l);
    }
    const autograd::variable_list expected =
        autograd::Engine::grad({local_loss}, differentiable, {}, /*retain_graph=*/false, /*allow_unused=*/true);
    for (const char* mode : {"rpc_sync", "rpc_async", "remote"}) {
      on(0, [&] {
        DistContext ctx(autograd(0));
        const Exec exec = [&](const char* f, std::vector<Tensor> tensors, std::map<std::string, double> attributes) {
          const rpc::CallArgs args{std::move(tensors), std::move(attributes)};
          if (mode == std::string("remote")) return agent(0).remote(1, f, args).to_here();
          return mode == std::string("rpc_async") ? agent(0).rpc_async(1, f, args).get() : agent(0).rpc_sync(1, f, args);
        };
        autograd(0).backward(ctx.id(), {program(exec)});
        const auto grads = autograd(0).get_gradients(ctx.id());
        EXPECT_EQ(grads.size(), differentiable.size()) << "a gradient for each leaf that requires grad, and no other";
        for (size_t i = 0; i < differentiable.size(); ++i) {
          if (!expected[i].defined()) continue;
          const std::vector<double> got = grad_of(grads, differentiable[i]), want = expected[i].to_vector();
          ASSERT_EQ(got.size(), want.size()) << "leaf " << i;
          for (size_t k = 0; k < got.size(); ++k) {
            EXPECT_NEAR(got[k], want[k], 1e-12 * (1 + std::abs(want[k]))) << mode << ", leaf " << i;
          }
        }
      });
    }
  }
  // _test_backward_rref: t1 lives on `owner` as an RRef made inside the context; `callee` adds the
  // caller's t2 to it: the owner itself (my_rref_add), or a third worker that passes the RRef on
  // to its owner (my_nested_rref_add, a fork of a fork). The caller gets t2's gradient and the
  // owner t1's, under the owned tensor (_compare_owner_value). `done` when it ran to its end.
  void backward_rref(WorkerId caller, WorkerId callee, WorkerId owner, bool& done) {
    Tensor t2 = zeros({3, 3});
    t2.set_requires_grad(true);
    DistContext ctx(autograd(caller));
    const rpc::RRef rref_t1 = agent(caller).remote(owner, "create_tensor", {});
    rpc::CallArgs args;
    args.tensors = {t2};
    args.rrefs = {rref_t1};
    if (callee != owner) args.ints["dst"] = owner;
    const Tensor ret = agent(caller).remote(callee, callee == owner ? "my_rref_add" : "my_nested_rref_add", args).to_here()[0];
    autograd(caller).backward(ctx.id(), {sum(ret)});
    const auto grads = autograd(caller).get_gradients(ctx.id());
    EXPECT_EQ(grads.size(), 1u);
    EXPECT_EQ(grad_of(grads, t2), ones({3, 3}).to_vector()) << "worker" << caller;
    // On the owner: the gradient of the owned t1, found by the owned tensor.
    const auto owner_grads = autograd(owner).get_gradients(ctx.id());
    const Tensor local_t1 = agent(owner).owned_value(rref_t1.id()).at(0);
    EXPECT_EQ(grad_of(owner_grads, local_t1), ones({3, 3}).to_vector()) << "worker" << caller;
    done = true;
  }
  rpc::FunctionRegistry registry_;
  std::map<WorkerId, Tensor> requires_grad_tensor_;
  std::map<WorkerId, ContextId> trainer_contexts_;  // run_trainer's, by trainer
  size_t trainers_done_ = 0;  // run_trainer's that ran backward
  bool trainers_checked_ = false;
  AutogradCluster cluster_;
};

}  // namespace dagsim::conformance::parity
