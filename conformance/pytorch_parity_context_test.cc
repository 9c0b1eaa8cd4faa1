// PyTorch parity (pytorch_parity.h): contexts, what a call records and carries (known worker ids,
// the graph of send and recv functions on both sides), cleanup everywhere, debug info.
#include "conformance/pytorch_parity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/engine.h"
#include "core/base/throws_error_test_util.h"
#include "core/tensor/ops.h"
#include "sim/trace.h"

namespace dagsim::conformance::parity {
namespace {

using namespace std::chrono_literals;

using autograd::Node;

// The lists of a context's send or recv functions, in message-id order (PyTorch's dict order).
std::vector<const Node*> functions(const std::map<dist_autograd::MessageId, std::shared_ptr<Node>>& by_id) {
  std::vector<const Node*> out;
  for (const auto& [id, fn] : by_id) out.push_back(fn.get());
  return out;
}

// _verify_graph_for_first_rpc_call: the caller's send function leads to t1's and t2's
// AccumulateGrad; the result's grad_fn is the recv function.
void verify_graph_for_first_rpc_call(const Node& send, const Node* recv, const Tensor& t1, const Tensor& t2, const Tensor& ret) {
  ASSERT_EQ(send.num_outputs(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto* accumulate = dynamic_cast<const autograd::AccumulateGrad*>(send.next_edge(i).function.get());
    ASSERT_NE(accumulate, nullptr) << send.next_edge(i).function->name();
    EXPECT_TRUE(accumulate->variable().is_same(i == 0 ? t1 : t2));
    EXPECT_EQ(send.next_edge(i).input_nr, 0u);
  }
  EXPECT_EQ(ret.grad_fn().get(), recv);
}

// _verify_graph_for_rpc_call_exec: the executing node's reply leads to the add's backward, whose
// two inputs come from the one recv function of the request.
void verify_graph_for_rpc_call_exec(const Node& send) {
  ASSERT_EQ(send.num_outputs(), 1u);
  const Node& add_backward = *send.next_edge(0).function;
  EXPECT_EQ(add_backward.name(), "AddBackward");
  ASSERT_EQ(add_backward.num_outputs(), 2u);
  EXPECT_EQ(add_backward.next_edge(0).function->name(), "RecvRpcBackward");
  EXPECT_EQ(add_backward.next_edge(0).function, add_backward.next_edge(1).function);
}

// _verify_graph_for_nested_rpc_call: a node that passed the call on has a send and a recv for the
// request and for the reply; the request's send leads (twice) to the incoming recv, the reply's
// send to the nested reply's recv.
void verify_graph_for_nested_rpc_call(const dist_autograd::DistAutogradContext& ctx) {
  const std::vector<const Node*> sends = functions(ctx.send_functions()), recvs = functions(ctx.recv_functions());
  ASSERT_EQ(sends.size(), 2u);
  ASSERT_EQ(recvs.size(), 2u);
  ASSERT_EQ(sends[0]->num_outputs(), 2u);
  EXPECT_EQ(sends[0]->next_edge(0).function->name(), "RecvRpcBackward");
  EXPECT_EQ(sends[0]->next_edge(0).function, sends[0]->next_edge(1).function);
  ASSERT_EQ(sends[1]->num_outputs(), 1u);
  EXPECT_EQ(sends[1]->next_edge(0).function->name(), "RecvRpcBackward");
}

// _test_rpc_complex_args: ten tensors, every other one requiring grad, stacked on the callee.
void test_rpc_complex_args(DistAutogradTest& t, bool remote) {
  t.on(0, [&] {
    DistContext ctx(t.autograd(0));
    std::vector<Tensor> tensors;
    for (int i = 0; i < 10; ++i) {
      Tensor t = ones({3, 3});
      t.set_requires_grad(i % 2 == 0);
      tensors.push_back(t);
    }
    const rpc::CallArgs args{tensors, {}};
    const Tensor ret = remote ? t.agent(0).remote(1, "stack", args).to_here()[0] : t.agent(0).rpc_sync(1, "stack", args)[0];
    EXPECT_EQ(ret.to_vector(), stack(tensors).to_vector());
    const auto& c = t.autograd(0).container().retrieve_context(ctx.id());
    ASSERT_EQ(c.send_functions().size(), 1u);
    const autograd::Node& send = *c.send_functions().begin()->second;
    // PyTorch's send function has edges to the tensors that require grad only; dagsim's keeps
    // one edge per sent tensor, by position (gradients come back by position), and leaves the
    // others' edges invalid. The same graph: the valid edges lead to those five, in order.
    std::vector<const autograd::AccumulateGrad*> leaves;
    for (const autograd::Edge& e : send.next_edges()) {
      if (!e.is_valid()) continue;
      leaves.push_back(dynamic_cast<const autograd::AccumulateGrad*>(e.function.get()));
      ASSERT_NE(leaves.back(), nullptr) << e.function->name();
    }
    ASSERT_EQ(leaves.size(), 5u) << "edges to the tensors that require grad only";
    for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(leaves[i]->variable().is_same(tensors[2 * i]));
    EXPECT_EQ(c.known_worker_ids(), (std::set<WorkerId>{1}));
  });
}

// The first call of PyTorch's graph tests: t1 (ones) and t2 (zeros), both requiring grad, to
// worker1's `fn`, by rpc_sync or remote + to_here; `ints` are fn's integer arguments.
struct FirstCall {
  Tensor t1, t2, ret;
};
FirstCall first_call(DistAutogradTest& t, const char* fn, bool remote, std::map<std::string, int64_t> ints = {}) {
  FirstCall c{ones({3, 3}), zeros({3, 3}), Tensor()};
  c.t1.set_requires_grad(true);
  c.t2.set_requires_grad(true);
  rpc::CallArgs args{{c.t1, c.t2}, {}};
  args.ints = std::move(ints);
  c.ret = remote ? t.agent(0).remote(1, fn, args).to_here()[0] : t.agent(0).rpc_sync(1, fn, args)[0];
  return c;
}
// The caller's context holds one pair, its first call's.
void verify_caller_has_one_pair(DistAutogradTest& t, ContextId id, const FirstCall& c) {
  const auto& mine = t.autograd(0).container().retrieve_context(id);
  ASSERT_EQ(mine.send_functions().size(), 1u);
  ASSERT_EQ(mine.recv_functions().size(), 1u);
  verify_graph_for_first_rpc_call(*functions(mine.send_functions())[0], functions(mine.recv_functions())[0], c.t1, c.t2, c.ret);
}
// The executing node holds one send function, its reply.
void verify_executed_on(DistAutogradTest& t, WorkerId w, ContextId id) {
  const auto& exec = t.autograd(w).container().retrieve_context(id);
  ASSERT_EQ(exec.send_functions().size(), 1u);
  verify_graph_for_rpc_call_exec(*functions(exec.send_functions())[0]);
}

// _test_graph: one call of `fn` to worker1.
void test_graph(DistAutogradTest& t, const char* fn, bool remote) {
  t.on(0, [&] {
    DistContext ctx(t.autograd(0));
    const FirstCall c = first_call(t, fn, remote);
    verify_caller_has_one_pair(t, ctx.id(), c);
    verify_executed_on(t, 1, ctx.id());
  });
}

// _test_graph_for_py_nested_call: worker0 -> worker1 -> worker2 -> worker3, which adds. Four
// graphs: the caller's, two nodes that passed the call on, and the one that ran the add.
void test_graph_for_py_nested_call(DistAutogradTest& t, bool remote) {
  t.on(0, [&] {
    DistContext ctx(t.autograd(0));
    const FirstCall c = first_call(t, "my_py_nested_call_hops", remote, {{"dst", 1}, {"hops", 1}});
    verify_caller_has_one_pair(t, ctx.id(), c);
    verify_graph_for_nested_rpc_call(t.autograd(1).container().retrieve_context(ctx.id()));
    verify_graph_for_nested_rpc_call(t.autograd(2).container().retrieve_context(ctx.id()));
    verify_executed_on(t, 3, ctx.id());
  });
}

// _test_graph_for_py_nested_call_itself: worker1 passes the call back to worker0, which adds:
// worker0's context holds its first call's pair and the add's pair.
void test_graph_for_py_nested_call_itself(DistAutogradTest& t, bool remote) {
  t.on(0, [&] {
    DistContext ctx(t.autograd(0));
    // The next of worker3 is worker0.
    const FirstCall c = first_call(t, "my_py_nested_call_hops", remote, {{"dst", kWorld - 1}, {"hops", 0}});
    const auto& mine = t.autograd(0).container().retrieve_context(ctx.id());
    const std::vector<const Node*> sends = functions(mine.send_functions()), recvs = functions(mine.recv_functions());
    ASSERT_EQ(sends.size(), 2u);
    ASSERT_EQ(recvs.size(), 2u);
    verify_graph_for_first_rpc_call(*sends[0], recvs[1], c.t1, c.t2, c.ret);
    verify_graph_for_rpc_call_exec(*sends[1]);
    verify_graph_for_nested_rpc_call(t.autograd(1).container().retrieve_context(ctx.id()));
  });
}

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

TEST_F(DistAutogradTest, test_graph_for_builtin_call) { test_graph(*this, "add", false); }

TEST_F(DistAutogradTest, test_graph_for_python_call) { test_graph(*this, "my_py_add", false); }

TEST_F(DistAutogradTest, test_graph_for_builtin_remote_call) { test_graph(*this, "add", true); }

TEST_F(DistAutogradTest, test_graph_for_python_remote_call) { test_graph(*this, "my_py_add", true); }
TEST_F(DistAutogradTest, test_graph_for_py_nested_call) { test_graph_for_py_nested_call(*this, false); }
TEST_F(DistAutogradTest, test_graph_for_py_nested_remote_call) { test_graph_for_py_nested_call(*this, true); }
TEST_F(DistAutogradTest, test_graph_for_py_nested_call_itself) { test_graph_for_py_nested_call_itself(*this, false); }
TEST_F(DistAutogradTest, test_graph_for_py_nested_remote_call_itself) { test_graph_for_py_nested_call_itself(*this, true); }

TEST_F(DistAutogradTest, test_rpc_complex_args) { test_rpc_complex_args(*this, false); }

TEST_F(DistAutogradTest, test_remote_complex_args) { test_rpc_complex_args(*this, true); }

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

// PyTorch's FaultyAgentDistAutogradTest: every worker's agent fails the first two
// CLEANUP_AUTOGRAD_CONTEXT_REQ it sends (PyTorch's default faulty messages are the retryable ones).
class FaultyAgentDistAutogradTest : public DistAutogradTest {
 public:
  FaultyAgentDistAutogradTest() : DistAutogradTest(faulty()) {}
  static rpc::RpcOptions faulty() {
    rpc::RpcOptions o;
    o.message_faults.push_back(rpc::MessageFault{rpc::MessageType::cleanup_autograd_context_req, 2, std::nullopt});
    return o;
  }
};

TEST_F(FaultyAgentDistAutogradTest, test_context_cleanup_tensor_with_grad) {
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  on(0, [&] {
    ContextId id = 0;
    {
      DistContext ctx(autograd(0));
      id = ctx.id();
      for (WorkerId dst = 1; dst < kWorld; ++dst) {
        agent(0).rpc_sync(dst, "add", {{t1, t2}, {}});
        agent(0).rpc_sync(dst, "set_rpc_done", {});
      }
    }
    EXPECT_TRUE(throws_error([&] { autograd(0).get_gradients(id); }, ErrorCode::invalid_argument,
                             {"Could not find autograd context with id"}));
  });
  // Two of the three releases failed on the way and were sent again (after 100 and 150 ms), well
  // before a peer would release the context by itself (attach_after, 2 s).
  EXPECT_LT(cluster_.world.now().since_epoch, std::chrono::nanoseconds(1500ms));
  EXPECT_EQ(contexts_everywhere(), 0u);
}

// test_dist_autograd_profiling: PyTorch's profiler sees one SendRpcBackward and one
// RecvRpcBackward on the caller, inside its backward. dagsim's profile is the trace: the caller's
// autograd slices, between its pass's beginning and end.
TEST(DistAutogradProfiling, test_dist_autograd_profiling) {
  sim::SimOptions options = AutogradCluster::zero_latency();
  options.keep_trace_events = true;
  const rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  AutogradCluster cluster(options, 2, registry);
  const Tensor t1 = rand33(1, true), t2 = rand33(2, true);
  cluster.world.spawn_foreground(0, "test", [&] {
    DistContext ctx(*cluster.autograd[0]);
    const Tensor loss = sum(cluster.agents[0]->rpc_sync(1, "add", {{t1, t2}, {}})[0]);
    cluster.autograd[0]->backward(ctx.id(), {loss});
  });
  ASSERT_EQ(cluster.world.run({}), sim::SimWorld::Outcome::finished);
  std::vector<std::string> caller;
  for (const sim::TraceEvent& e : cluster.world.trace().events()) {
    if (e.kind == sim::TraceKind::autograd && e.node == 0) caller.push_back(e.detail.substr(0, e.detail.find(' ')));
  }
  ASSERT_FALSE(caller.empty());
  EXPECT_EQ(caller.front(), "pass");
  EXPECT_EQ(caller.back(), "pass");
  EXPECT_EQ(std::count(caller.begin(), caller.end(), "SendRpcBackward"), 1);
  EXPECT_EQ(std::count(caller.begin(), caller.end(), "RecvRpcBackward"), 1);
}

}  // namespace
}  // namespace dagsim::conformance::parity
