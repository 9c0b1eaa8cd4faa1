// Matrix products through dagsim's ops against OpenBLAS called directly, forward and
// forward+backward, so the overhead of the tensor layer and the engine shows as a ratio.
// Aim (issue 2): our matmul within 1.2x of bare OpenBLAS.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include "core/autograd/engine.h"
#include "core/tensor/ops.h"

namespace dagsim {
namespace {

void BM_GemmOpenBLAS(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Prng prng(1);
  Tensor a = randn({n, n}, prng, 0, 1, Dtype::float32);
  Tensor b = randn({n, n}, prng, 0, 1, Dtype::float32);
  std::vector<float> c(static_cast<size_t>(n) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.SetItemsProcessed(state.iterations() * 2LL * n * n * n);  // FLOPs
}
BENCHMARK(BM_GemmOpenBLAS)->Arg(256)->ArgNames({"n"});

void BM_GemmOurs(benchmark::State& state) {
  const int64_t n = state.range(0);
  Prng prng(1);
  Tensor a = randn({n, n}, prng, 0, 1, Dtype::float32);
  Tensor b = randn({n, n}, prng, 0, 1, Dtype::float32);
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 2LL * n * n * n);
}
BENCHMARK(BM_GemmOurs)->Arg(256)->ArgNames({"n"});

// Forward plus backward: three gemms (C = AB, dA = G·Bᵀ, dB = Aᵀ·G), bare.
void BM_GemmFwdBwdOpenBLAS(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Prng prng(1);
  Tensor a = randn({n, n}, prng, 0, 1, Dtype::float32);
  Tensor b = randn({n, n}, prng, 0, 1, Dtype::float32);
  Tensor g = ones({n, n}, Dtype::float32);
  std::vector<float> c(static_cast<size_t>(n) * n), da(c.size()), db(c.size());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data(), n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, g.data<float>(), n,
                b.data<float>(), n, 0.0f, da.data(), n);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                g.data<float>(), n, 0.0f, db.data(), n);
    benchmark::DoNotOptimize(db.data());
  }
  state.SetItemsProcessed(state.iterations() * 6LL * n * n * n);
}
BENCHMARK(BM_GemmFwdBwdOpenBLAS)->Arg(256)->ArgNames({"n"});

// The same through dagsim: matmul, then the engine from an explicit output gradient, with the
// gradients captured (autograd::grad) so nothing accumulates between iterations.
void BM_GemmFwdBwdOurs(benchmark::State& state) {
  const int64_t n = state.range(0);
  Prng prng(1);
  Tensor a = randn({n, n}, prng, 0, 1, Dtype::float32);
  Tensor b = randn({n, n}, prng, 0, 1, Dtype::float32);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor g = ones({n, n}, Dtype::float32);
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    autograd::variable_list grads = autograd::Engine::grad({c}, {a, b}, {g});
    benchmark::DoNotOptimize(grads[1].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 6LL * n * n * n);
}
BENCHMARK(BM_GemmFwdBwdOurs)->Arg(256)->ArgNames({"n"});

}  // namespace
}  // namespace dagsim
