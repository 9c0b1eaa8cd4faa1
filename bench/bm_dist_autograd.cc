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

#include <functional>
#include <memory>

#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "conformance/autograd_cluster.h"

namespace dagsim {
namespace {

constexpr int kStepsPerRun = 200;

// Times `kStepsPerRun` steps a run: each iteration builds a zero-latency cluster of `nodes`,
// `spawn` starts the trainer on it (setting `ok` false on a wrong step) and returns a check for
// after the run, once the world has settled; only the world's run is timed.
template <typename Spawn>
void time_steps(benchmark::State& state, int nodes, Spawn spawn) {
  const rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  uint64_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    conformance::AutogradCluster cluster(conformance::AutogradCluster::zero_latency(), nodes, registry);
    bool ok = true;
    const std::function<bool()> settled = spawn(cluster, ok);
    state.ResumeTiming();
    cluster.world.run({});
    state.PauseTiming();
    cluster.world.run({.stop_at = cluster.world.now() + std::chrono::seconds(1)});  // deletes and releases land
    ok = ok && settled();
    cluster.world.shutdown();
    state.ResumeTiming();
    if (!ok) state.SkipWithError("a step went wrong, or the world kept state after the run");
    steps += kStepsPerRun;
  }
  state.counters["us_per_step"] = benchmark::Counter(static_cast<double>(steps) * 1e-6,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_DistAutogradSeedStep(benchmark::State& state) {
  const auto mode = state.range(0) != 0 ? dist_autograd::BackwardMode::smart : dist_autograd::BackwardMode::fast;
  time_steps(state, 2, [mode](conformance::AutogradCluster& cluster, bool& ok) {
    cluster.world.spawn_foreground(0, "trainer", [&cluster, &ok, mode] {
      Prng prng(7);
      Tensor t1 = rand_uniform({3, 3}, prng), t2 = rand_uniform({3, 3}, prng), t4 = rand_uniform({3, 3}, prng);
      for (Tensor* t : {&t1, &t2, &t4}) t->set_requires_grad(true);
      for (int k = 0; k < kStepsPerRun; ++k) {
        dist_autograd::DistAutograd::Context ctx(*cluster.autograd[0]);
        Tensor t3 = cluster.agents[0]->rpc_sync(1, "add", {{t1, t2}, {}})[0];
        Tensor loss = sum(mul(t3, t4));
        cluster.autograd[0]->backward(ctx.id(), {loss}, /*retain_graph=*/false, mode);
        ok = ok && cluster.autograd[0]->get_gradients(ctx.id()).size() == 3;
      }
    });
    return std::function<bool()>([] { return true; });
  });
}
BENCHMARK(BM_DistAutogradSeedStep)->ArgName("smart")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_DistAutogradRRefArgument(benchmark::State& state) {
  const WorkerId callee = state.range(0) != 0 ? 2 : 1;
  time_steps(state, 3, [callee](conformance::AutogradCluster& cluster, bool& ok) {
    cluster.world.spawn_foreground(0, "trainer", [&cluster, &ok, callee] {
      Prng prng(7);
      Tensor x = rand_uniform({3, 3}, prng);
      x.set_requires_grad(true);
      const rpc::RRef w = cluster.agents[0]->remote(1, "dagsim.parameter", {{rand_uniform({3, 3}, prng)}, {}});
      for (int k = 0; k < kStepsPerRun; ++k) {
        dist_autograd::DistAutograd::Context ctx(*cluster.autograd[0]);
        Tensor y = cluster.agents[0]->rpc_sync(callee, "mul", {{x}, {}, {w}})[0];
        cluster.autograd[0]->backward(ctx.id(), {sum(y)});
        ok = ok && cluster.autograd[0]->get_gradients(ctx.id()).size() == 1;
      }
    });
    return std::function<bool()>([&cluster] { return cluster.agents[1]->owned_rrefs() == 0; });
  });
}
BENCHMARK(BM_DistAutogradRRefArgument)->ArgName("third")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim
