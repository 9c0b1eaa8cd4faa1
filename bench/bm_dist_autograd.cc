// Distributed autograd's engine cost, in the simulator with zero latency (so the time is ours,
// not the network's): one iteration of the seed example's step, as PyTorch's tutorial writes it:
// a context, rpc_sync(add) to another worker, mul, sum, backward, get_gradients, release. The
// issue's aim: under 50 us of engine cost (PyTorch 1.13 over TensorPipe: about 2.2 ms on a
// 2-core machine of this class). Reported as wall microseconds per step, in FAST mode (smart:0)
// and in SMART mode (smart:1), whose discovery round trip comes before each pass.
//
// BM_DistAutogradRRefArgument: the same step with an RRef argument: worker0 calls mul(x, w) where
// w is an RRef owned by worker1, on worker1 itself (third:0: the owner reads its value in place)
// or on worker2 (third:1: a fork, counted by the owner before use, and a recorded fetch of w).
#include <benchmark/benchmark.h>

#include <memory>

#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "conformance/autograd_cluster.h"

namespace dagsim {
namespace {

void BM_DistAutogradSeedStep(benchmark::State& state) {
  const int steps_per_run = 200;
  const auto mode = state.range(0) != 0 ? dist_autograd::BackwardMode::smart : dist_autograd::BackwardMode::fast;
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  uint64_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    conformance::AutogradCluster cluster(conformance::AutogradCluster::zero_latency(), 2, registry);
    auto& world = cluster.world;
    auto& agents = cluster.agents;
    auto& autograd = cluster.autograd;
    Prng prng(7);
    Tensor t1 = rand_uniform({3, 3}, prng);
    Tensor t2 = rand_uniform({3, 3}, prng);
    Tensor t4 = rand_uniform({3, 3}, prng);
    for (Tensor* t : {&t1, &t2, &t4}) t->set_requires_grad(true);
    bool ok = true;
    world.spawn_foreground(0, "trainer", [&] {
      for (int k = 0; k < steps_per_run; ++k) {
        dist_autograd::DistAutograd::Context ctx(*autograd[0]);
        Tensor t3 = agents[0]->rpc_sync(1, "add", {{t1, t2}, {}})[0];
        Tensor loss = sum(mul(t3, t4));
        autograd[0]->backward(ctx.id(), {loss}, /*retain_graph=*/false, mode);
        ok = ok && autograd[0]->get_gradients(ctx.id()).size() == 3;
      }
    });
    state.ResumeTiming();
    world.run({});
    state.PauseTiming();
    world.shutdown();
    state.ResumeTiming();
    if (!ok) state.SkipWithError("a step did not produce three gradients");
    steps += steps_per_run;
  }
  state.counters["us_per_step"] = benchmark::Counter(static_cast<double>(steps) * 1e-6,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DistAutogradSeedStep)->ArgName("smart")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_DistAutogradRRefArgument(benchmark::State& state) {
  const int steps_per_run = 200;
  const WorkerId callee = state.range(0) != 0 ? 2 : 1;
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  uint64_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    conformance::AutogradCluster cluster(conformance::AutogradCluster::zero_latency(), 3, registry);
    auto& agents = cluster.agents;
    auto& autograd = cluster.autograd;
    Prng prng(7);
    Tensor x = rand_uniform({3, 3}, prng);
    x.set_requires_grad(true);
    bool ok = true;
    cluster.world.spawn_foreground(0, "trainer", [&] {
      const rpc::RRef w = agents[0]->remote(1, "dagsim.parameter", {{rand_uniform({3, 3}, prng)}, {}});
      w.to_here();  // made before the timing starts to matter
      for (int k = 0; k < steps_per_run; ++k) {
        dist_autograd::DistAutograd::Context ctx(*autograd[0]);
        Tensor y = agents[0]->rpc_sync(callee, "mul", {{x}, {}, {w}})[0];
        autograd[0]->backward(ctx.id(), {sum(y)});
        ok = ok && autograd[0]->get_gradients(ctx.id()).size() == 1;
      }
    });
    state.ResumeTiming();
    cluster.world.run({});
    state.PauseTiming();
    cluster.world.run({.stop_at = cluster.world.now() + std::chrono::seconds(1)});  // w's user delete lands
    ok = ok && agents[1]->owned_rrefs() == 0;
    cluster.world.shutdown();
    state.ResumeTiming();
    if (!ok) state.SkipWithError("a step did not produce x's gradient, or the owner kept w");
    steps += steps_per_run;
  }
  state.counters["us_per_step"] = benchmark::Counter(static_cast<double>(steps) * 1e-6,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DistAutogradRRefArgument)->ArgName("third")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim
