// The MLP benchmark: an 8-layer MLP (width 256, batch 64, tanh), forward and backward.
// BM_MlpLocal runs it on the local engine; BM_MlpDistributed places every other layer (its weight
// and its matmul) on a second worker (rpc_sync in a distributed autograd context, zero-latency
// simulator), runs the distributed backward and reads both workers' gradients. The aim: the distributed step within 1.2x of the local one (PyTorch
// 1.13 over TensorPipe took about 85 ms for this step on a 2-core machine of this class). Each in
// float64 (float32:0) and float32 (float32:1), as PyTorch users train.
#include <benchmark/benchmark.h>

#include <memory>

#include "bench/mlp_weights.h"
#include "core/autograd/engine.h"
#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "conformance/autograd_cluster.h"

namespace dagsim {
namespace {

using bench::kMlpLayers;
using Mlp = bench::MlpWeights;
constexpr int kLayers = kMlpLayers;

// state.range(0): 1 for float32, 0 for float64.
Dtype dtype_of(const benchmark::State& state) { return state.range(0) != 0 ? Dtype::float32 : Dtype::float64; }

void BM_MlpLocal(benchmark::State& state) {
  Mlp mlp(dtype_of(state));
  for (auto _ : state) {
    Tensor h = mlp.x;
    for (const Tensor& w : mlp.weights) h = tanh(matmul(h, w));
    autograd::variable_list grads = autograd::Engine::grad({sum(h)}, mlp.weights);
    benchmark::DoNotOptimize(grads);
  }
}
BENCHMARK(BM_MlpLocal)->ArgName("float32")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// How the local step's cost grows with the width: BM_MlpLocal's model (8 layers, batch 64, tanh,
// float32) at widths 64 to 2048, beside PyTorch's (scripts/pytorch_counterparts.py mlp_width).
// The products grow as width^2 and dominate from 256 up; below that the per-op costs show.
void BM_MlpWidth(benchmark::State& state) {
  Mlp mlp(Dtype::float32, state.range(0));
  for (auto _ : state) {
    Tensor h = mlp.x;
    for (const Tensor& w : mlp.weights) h = tanh(matmul(h, w));
    autograd::variable_list grads = autograd::Engine::grad({sum(h)}, mlp.weights);
    benchmark::DoNotOptimize(grads);
  }
  state.counters["flops"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * bench::kMlpBatch * static_cast<double>(state.range(0)) *
          static_cast<double>(state.range(0)) * (3 * kLayers - 1),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpWidth)
    ->ArgNames({"width"})
    ->RangeMultiplier(2)
    ->Range(64, 2048)
    ->Unit(benchmark::kMillisecond);

void BM_MlpDistributed(benchmark::State& state) {
  Mlp mlp(dtype_of(state));
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  // The odd layers' weights live on worker1 (as a model placed on workers): only activations and
  // their gradients cross the network, and the weights' gradients accumulate in worker1's context.
  registry.add("owned_layer", [&mlp](rpc::CallContext&, const rpc::CallArgs& args) {
    const auto index = static_cast<size_t>(args.attribute("owned_layer", "layer"));
    return std::vector<Tensor>{matmul(args.tensors[0], mlp.weights[index])};
  });
  conformance::AutogradCluster cluster(conformance::AutogradCluster::zero_latency(), 2, registry);
  auto& world = cluster.world;
  auto& agents = cluster.agents;
  auto& autograd = cluster.autograd;
  size_t grads_seen = 0;
  for (auto _ : state) {
    world.spawn_foreground(0, "trainer", [&] {
      dist_autograd::DistAutograd::Context ctx(*autograd[0]);
      Tensor h = mlp.x;
      for (int i = 0; i < kLayers; ++i) {
        const Tensor& w = mlp.weights[static_cast<size_t>(i)];
        Tensor z = i % 2 == 1 ? agents[0]->rpc_sync(1, "owned_layer", {{h}, {{"layer", i}}})[0] : matmul(h, w);
        h = tanh(z);
      }
      autograd[0]->backward(ctx.id(), {sum(h)});
      grads_seen = autograd[0]->get_gradients(ctx.id()).size() +
                   autograd[1]->get_gradients(ctx.id()).size();
    });
    world.run({});
  }
  if (grads_seen != static_cast<size_t>(kLayers)) state.SkipWithError("missing gradients");
}
BENCHMARK(BM_MlpDistributed)->ArgName("float32")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim
