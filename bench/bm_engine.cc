// Engine overhead per node: backward through a chain of tiny ops, and through a wide graph
// (many independent branches joined by one stack). items_per_second counts graph nodes, so
// 1e9 / items_per_second is the cost of one node in ns, op included. Aim (issue 2): under 1 µs.
#include <benchmark/benchmark.h>

#include "core/autograd/engine.h"
#include "core/tensor/ops.h"

namespace dagsim {
namespace {

void BM_EngineChain(benchmark::State& state) {
  const int64_t length = state.range(0);
  Tensor x = ones({1});
  x.set_requires_grad(true);
  for (auto _ : state) {
    state.PauseTiming();
    Tensor y = x;
    for (int64_t i = 0; i < length; ++i) y = add(y, 1.0);
    Tensor loss = sum(y);
    state.ResumeTiming();
    autograd::variable_list g = autograd::Engine::grad({loss}, {x});
    benchmark::DoNotOptimize(g[0].raw_data());
    state.PauseTiming();
    loss = Tensor();
    y = Tensor();  // graph destruction is not part of the measured backward
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * (length + 2));
}
BENCHMARK(BM_EngineChain)->Arg(10000)->ArgNames({"ops"})->Unit(benchmark::kMicrosecond);

void BM_EngineWide(benchmark::State& state) {
  const int64_t width = state.range(0);
  std::vector<Tensor> leaves;
  for (int64_t i = 0; i < width; ++i) {
    Tensor t = ones({1});
    t.set_requires_grad(true);
    leaves.push_back(t);
  }
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Tensor> branches;
    branches.reserve(leaves.size());
    for (const Tensor& leaf : leaves) branches.push_back(mul(leaf, 2.0));
    Tensor loss = sum(cat(branches));
    state.ResumeTiming();
    autograd::variable_list g = autograd::Engine::grad({loss}, leaves);
    benchmark::DoNotOptimize(g.back().raw_data());
    state.PauseTiming();
    branches.clear();
    loss = Tensor();
    state.ResumeTiming();
  }
  // Nodes: one MulBackward per branch, cat, sum, graph root.
  state.SetItemsProcessed(state.iterations() * (width + 3));
}
BENCHMARK(BM_EngineWide)->Arg(10000)->ArgNames({"branches"})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dagsim
