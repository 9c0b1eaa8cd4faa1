// Tests of the local autograd engine: PyTorch's semantics for backward and grad, hooks,
// retain_graph, root validation, no_grad, error propagation, the pieces the distributed engine
// reuses (leaf capture, work fed in between runs), depth (a 100,000-op chain inside a fiber), and
// an order of evaluation that owes nothing to where the nodes sit in memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <new>
#include <optional>

#include "core/autograd/engine.h"
#include "core/base/prng.h"
#include "core/autograd/grad_mode.h"
#include "core/base/sanitizers.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"

namespace dagsim::autograd {
namespace {

Tensor leaf(const Shape& shape, std::vector<double> values) {
  Tensor t = from_values(shape, values);
  t.set_requires_grad(true);
  return t;
}

ErrorCode code_of(const std::function<void()>& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return ErrorCode::internal_error;
}

TEST(Engine, BackwardComputesProductRuleAndAccumulatesAcrossCalls) {
  Tensor x = leaf({3}, {1, 2, 3});
  Tensor y = leaf({3}, {4, 5, 6});
  Tensor loss = sum(mul(x, y));
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(y.grad().to_vector(), (std::vector<double>{1, 2, 3}));
  loss.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{8, 10, 12}));
}

TEST(Engine, SharedInputSumsGradientsFromEveryPath) {
  Tensor x = leaf({2}, {3, -1});
  Tensor loss = sum(add(mul(x, x), x));  // d/dx = 2x + 1
  loss.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{7, -1}));
}

TEST(Engine, InputsRestrictWhichLeavesGetGradients) {
  Tensor x = leaf({2}, {1, 2});
  Tensor y = leaf({2}, {3, 4});
  Tensor loss = sum(mul(x, y));
  Engine::backward({loss}, {}, false, {x});
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
}

TEST(Engine, OnlyNodesNeededForTheInputsRun) {
  Tensor x = leaf({2}, {1, 2});
  Tensor y = leaf({2}, {3, 4});
  Tensor side = exp(y);
  int side_hook_calls = 0;
  side.register_hook([&](const Tensor&) { ++side_hook_calls; return Tensor(); });
  Tensor loss = add(sum(mul(x, x)), sum(side));
  variable_list g = Engine::grad({loss}, {x});
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{2, 4}));
  EXPECT_EQ(side_hook_calls, 0);
  EXPECT_FALSE(x.grad().defined());  // grad() never touches .grad
}

TEST(Engine, GradOfANonLeafAndAllowUnused) {
  Tensor x = leaf({2}, {1, 2});
  Tensor mid = mul(x, 3.0);
  Tensor unused = leaf({1}, {0});
  Tensor loss = sum(mul(mid, mid));
  variable_list g = Engine::grad({loss}, {mid, unused}, {}, true, /*allow_unused=*/true);
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{6, 12}));
  EXPECT_FALSE(g[1].defined());
  std::string what;
  EXPECT_EQ(code_of([&] { Engine::grad({loss}, {unused}); }, &what), ErrorCode::autograd_error);
  EXPECT_NE(what.find("appears to not have been used"), std::string::npos) << what;
}

TEST(Engine, TensorHooksReplaceGradientsAndPostAccumulateHooksSeeTheLeaf) {
  Tensor x = leaf({2}, {1, 2});
  Tensor mid = mul(x, 2.0);
  mid.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  std::vector<double> seen;
  x.register_post_accumulate_grad_hook([&](Tensor& t) { seen = t.grad().to_vector(); });
  sum(mid).backward();
  // d(sum(2x))/dx = 2, times 10 at mid, plus 1 at x.
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{21, 21}));
  EXPECT_EQ(seen, (std::vector<double>{21, 21}));
}

TEST(Engine, SecondBackwardWithoutRetainGraphFails) {
  Tensor x = leaf({2}, {1, 2});
  Tensor loss = sum(exp(x));
  loss.backward();
  std::string what;
  EXPECT_EQ(code_of([&] { loss.backward(); }, &what), ErrorCode::graph_freed);
  EXPECT_NE(what.find("backward through the graph a second time"), std::string::npos) << what;
  EXPECT_NE(what.find("retain_graph"), std::string::npos) << what;
}

TEST(Engine, RootValidationErrors) {
  std::string what;
  EXPECT_EQ(code_of([&] { Engine::backward({}); }, &what), ErrorCode::autograd_error);
  EXPECT_NE(what.find("No tensors provided"), std::string::npos) << what;

  Tensor plain = from_values({1}, {1});
  EXPECT_EQ(code_of([&] { plain.backward(); }, &what), ErrorCode::autograd_error);
  EXPECT_NE(what.find("element 0 of tensors does not require grad and does not have a grad_fn"),
            std::string::npos) << what;

  Tensor x = leaf({2}, {1, 2});
  Tensor vec = mul(x, 2.0);
  EXPECT_EQ(code_of([&] { vec.backward(); }, &what), ErrorCode::autograd_error);
  EXPECT_NE(what.find("grad can be implicitly created only for scalar outputs"), std::string::npos) << what;

  EXPECT_EQ(code_of([&] { vec.backward(ones({3})); }, &what), ErrorCode::autograd_error);
  EXPECT_NE(what.find("Mismatch in shape"), std::string::npos) << what;

  vec.backward(from_values({2}, {1, -1}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2, -2}));
}

TEST(Engine, NoGradGuardRecordsNothingAndRestores) {
  Tensor x = leaf({2}, {1, 2});
  {
    NoGradGuard guard;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_NE(mul(x, 2.0).grad_fn(), nullptr);
}

TEST(Engine, AnErrorInsideBackwardPropagatesToTheCaller) {
  Tensor x = leaf({2}, {1, 2});
  Tensor mid = exp(x);
  mid.register_hook([](const Tensor&) -> Tensor { throw errors::invalid_argument("hook failed"); });
  std::string what;
  EXPECT_EQ(code_of([&] { sum(mid).backward(); }, &what), ErrorCode::invalid_argument);
  EXPECT_NE(what.find("hook failed"), std::string::npos);
}

TEST(Engine, SavedTensorModifiedInPlaceFailsBackward) {
  Tensor x = leaf({2}, {1, 2});
  Tensor w = from_values({2}, {3, 4});
  Tensor loss = sum(mul(x, w));
  {
    NoGradGuard guard;
    mul_(w, 2.0);
  }
  std::string what;
  EXPECT_EQ(code_of([&] { loss.backward(); }, &what), ErrorCode::modified_by_inplace);
  EXPECT_NE(what.find("is at version 1; expected version 0"), std::string::npos) << what;
}

TEST(Engine, MultiOutputNodeGetsZerosForUnusedOutputs) {
  Tensor x = leaf({4}, {1, 2, 3, 4});
  std::vector<Tensor> parts = split(x, 2);
  sum(mul(parts[1], parts[1])).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{0, 0, 6, 8}));
}

// The distributed engine's use: leaf gradients go to a caller-supplied map, and a second root
// (a "send function") is fed in after the first part of the pass already ran.
TEST(Engine, LeafCaptureAndWorkFedInBetweenRuns) {
  Tensor a = leaf({2}, {1, 2});
  Tensor b = leaf({2}, {3, 4});
  Tensor first = sum(mul(a, 2.0));
  Tensor second = mul(b, b);  // its gradient "arrives later", as from a peer

  auto [edges, grads] = Engine::validate_roots({first}, {});
  std::shared_ptr<Node> root = Engine::make_graph_root(std::move(edges), std::move(grads));
  GraphTask task(/*keep_graph=*/false);
  std::vector<std::pair<std::string, std::vector<double>>> captured;
  task.leaf_capture = [&](const Tensor& leaf_tensor, Tensor grad) {
    captured.emplace_back(leaf_tensor.is_same(a) ? "a" : "b", grad.to_vector());
  };
  auto [late_edges, late_grads] = Engine::validate_roots({second}, {from_values({2}, {1, 1})});
  std::shared_ptr<Node> late = Engine::make_graph_root(std::move(late_edges), std::move(late_grads));
  Engine::compute_dependencies(task, {root.get(), late.get()});

  task.push_ready(NodeTask{root, InputBuffer(0)});
  Engine::run(task);
  ASSERT_EQ(captured.size(), 1u);
  task.push_ready(NodeTask{late, InputBuffer(0)});
  Engine::run(task);
  ASSERT_EQ(captured.size(), 2u);
  EXPECT_EQ(captured[0], (std::pair<std::string, std::vector<double>>{"a", {2, 2}}));
  EXPECT_EQ(captured[1], (std::pair<std::string, std::vector<double>>{"b", {6, 8}}));
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

// 100,000 ops deep: forward, backward and destruction must not recurse in the depth, inside a
// fiber with the runtime's default (256 KiB) stack.
TEST(Engine, HundredThousandOpChainInsideAFiber) {
  fibers::LocalRuntime rt;
  rt.add_node("n0");
  double grad = rt.run_on(0, [] {
    Tensor x = leaf({1}, {1.0});
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = add(y, 1.0);
    Tensor loss = sum(mul(y, 2.0));
    loss.backward();
    // A second chain dropped without backward: its destruction alone must stay iterative.
    Tensor z = x;
    for (int i = 0; i < 100000; ++i) z = mul(z, 1.0);
    z = Tensor();
    return x.grad().item();
  });
  EXPECT_EQ(grad, 2.0);
}

TEST(Engine, LeavesOfferedTheSameGradientTensorDoNotShareTheirGrad) {
  // add() passes one gradient tensor to both inputs, down a chain of adds: t0 and t2 are offered
  // the same TensorImpl. Found by the distributed-autograd property (DistGradsEqualLocal).
  Tensor t0 = from_values({1}, {1});
  Tensor t2 = from_values({1}, {1});
  t0.set_requires_grad(true);
  t2.set_requires_grad(true);
  for (int call = 0; call < 2; ++call) {
    Engine::backward({sum(add(add(t0, from_values({1}, {5})), t2))});
  }
  EXPECT_FALSE(t0.grad().is_same(t2.grad()));
  EXPECT_EQ(t0.grad().to_vector(), (std::vector<double>{2}));
  EXPECT_EQ(t2.grad().to_vector(), (std::vector<double>{2}));
}

// Leaves the allocator's free lists in a seeded shuffle, so that the nodes built next land at
// addresses in an order unrelated to their creation.
void scramble_heap(uint64_t seed) {
  Prng random(seed);
  std::vector<void*> blocks;
  for (int i = 0; i < 4000; ++i) blocks.push_back(::operator new(16 + 16 * random.uniform_u64(48)));
  for (size_t i = blocks.size() - 1; i > 0; --i) std::swap(blocks[i], blocks[random.uniform_u64(i + 1)]);
  for (void* block : blocks) ::operator delete(block);
}

struct PassOrder {
  std::vector<int> hooks;  // the branches, in the order their backward ran
  uint64_t grad_bits;      // x.grad, summed in that order
  bool addresses_follow_creation;
};

// Six branches from one leaf, each scaling it by a constant whose sum depends on the order of
// addition, under six roots: the hooks record the order the branches' backward ran, and x.grad
// is the sum of their gradients in the order they arrived.
PassOrder run_branches(const std::vector<double>& scales, std::optional<uint64_t> scramble_seed) {
  if (scramble_seed) scramble_heap(*scramble_seed);
  PassOrder out;
  Tensor x = leaf({1}, {1.0});
  std::vector<Tensor> branches, roots;
  for (size_t i = 0; i < scales.size(); ++i) {
    branches.push_back(mul(x, scales[i]));
    branches.back().register_hook([&out, i](const Tensor&) {
      out.hooks.push_back(static_cast<int>(i));
      return Tensor();
    });
  }
  for (const Tensor& branch : branches) roots.push_back(sum(branch));
  out.addresses_follow_creation = std::is_sorted(branches.begin(), branches.end(), [](const Tensor& a, const Tensor& b) {
    return a.grad_fn().get() < b.grad_fn().get();
  });
  Engine::backward(roots);
  out.grad_bits = std::bit_cast<uint64_t>(x.grad().item());
  return out;
}

// The order of a pass is a function of the graph (the latest op first, graph_task.h): here the
// branches run last-built first and their gradients add up in that order, whatever addresses the
// allocator gave the nodes. A pass ordered by address anywhere (a ready queue, a walk over a set
// of pointers) fails this: the scrambled runs put the nodes out of creation order.
TEST(Engine, PassOrderIsAFunctionOfTheGraphNotOfAddresses) {
  const std::vector<double> scales = {1.0, 0x1p53, 1.0, -0x1p53, 1.0, 0.5};
  double in_creation_order = 0, latest_first = 0;
  for (double scale : scales) in_creation_order += scale;
  for (auto it = scales.rbegin(); it != scales.rend(); ++it) latest_first += *it;
  ASSERT_NE(in_creation_order, latest_first) << "the scales must make the order of addition visible";

  const std::vector<int> expected_hooks = {5, 4, 3, 2, 1, 0};
  bool some_run_out_of_creation_order = false;
  for (uint64_t seed = 0; seed <= 8; ++seed) {
    const PassOrder run = run_branches(scales, seed == 0 ? std::nullopt : std::optional<uint64_t>(seed));
    EXPECT_EQ(run.hooks, expected_hooks) << "heap scramble " << seed;
    EXPECT_EQ(run.grad_bits, std::bit_cast<uint64_t>(latest_first)) << "heap scramble " << seed;
    some_run_out_of_creation_order |= !run.addresses_follow_creation;
  }
  // AddressSanitizer's allocator quarantines what is freed, so no scramble reuses a hole there and
  // the nodes come out in creation order: the order checks above still run, this one cannot.
  if (!kAddressSanitizer) {
    EXPECT_TRUE(some_run_out_of_creation_order) << "the heap scramble no longer moves nodes: this test checks nothing";
  }
}

}  // namespace
}  // namespace dagsim::autograd
