// Matrix products through dagsim's ops against OpenBLAS called directly, forward and
// forward+backward, so the overhead of the tensor layer and the engine shows as a ratio.
// Aim (issue 2): our matmul within 1.2x of bare OpenBLAS. And an embedding lookup with its
// backward against the same row copies and row sums written as bare loops (the floor), a
// cross-entropy loss over many classes and a layer_norm.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>
#include <vector>

#include "core/autograd/engine.h"
#include "core/tensor/ops.h"
#include "compute/kernels/vector_math.h"

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

// An embedding lookup and its backward: kEmbeddingBatch rows of a [kEmbeddingRows, width] float32
// table at seeded positions (repeats included), then the table's dense gradient.
constexpr int64_t kEmbeddingRows = 8192;
constexpr int64_t kEmbeddingBatch = 4096;

std::vector<double> embedding_positions() {
  Prng prng(3);
  std::vector<double> positions(kEmbeddingBatch);
  for (double& p : positions) p = static_cast<double>(prng.uniform_int(0, kEmbeddingRows - 1));
  return positions;
}

void BM_EmbeddingOurs(benchmark::State& state) {
  const int64_t width = state.range(0);
  Prng prng(1);
  Tensor weight = randn({kEmbeddingRows, width}, prng, 0, 1, Dtype::float32);
  weight.set_requires_grad(true);
  const Tensor indices = from_values({kEmbeddingBatch}, embedding_positions(), Dtype::float32);
  const Tensor g = ones({kEmbeddingBatch, width}, Dtype::float32);
  for (auto _ : state) {
    Tensor out = embedding(weight, indices);
    autograd::variable_list grads = autograd::Engine::grad({out}, {weight}, {g});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  state.SetBytesProcessed(state.iterations() * kEmbeddingBatch * width * 4 * 2);
}
BENCHMARK(BM_EmbeddingOurs)->Arg(256)->ArgNames({"width"});

// The floor: the same row copies and row sums with no tensor layer around them (memcpy and the
// vector add the op uses), into fresh buffers as the op's outputs are. Ours over this is the cost
// of the op's checks, its index grouping and the engine.
void BM_EmbeddingFloor(benchmark::State& state) {
  const int64_t width = state.range(0);
  Prng prng(1);
  const Tensor weight = randn({kEmbeddingRows, width}, prng, 0, 1, Dtype::float32);
  std::vector<int64_t> positions;
  for (double p : embedding_positions()) positions.push_back(static_cast<int64_t>(p));
  const std::vector<float> g(static_cast<size_t>(kEmbeddingBatch * width), 1.0f);
  const float* w = weight.data<float>();
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  for (auto _ : state) {
    std::vector<float> out(static_cast<size_t>(kEmbeddingBatch * width));
    for (int64_t r = 0; r < kEmbeddingBatch; ++r) std::memcpy(out.data() + r * width, w + positions[r] * width, row_bytes);
    std::vector<float> grad(static_cast<size_t>(kEmbeddingRows * width));
    for (int64_t r = 0; r < kEmbeddingBatch; ++r) {
      float* row = grad.data() + positions[r] * width;
      vec::binary(vec::Binary::add, row, g.data() + r * width, row, width);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(grad.data());
  }
  state.SetBytesProcessed(state.iterations() * kEmbeddingBatch * width * 4 * 2);
}
BENCHMARK(BM_EmbeddingFloor)->Arg(256)->ArgNames({"width"});

// A classifier's loss over a large vocabulary: cross_entropy (log_softmax along dim 1, then
// nll_loss) of [kLossBatch, classes] float32 logits, forward and the logits' gradient.
constexpr int64_t kLossBatch = 64;

void BM_CrossEntropyOurs(benchmark::State& state) {
  const int64_t classes = state.range(0);
  Prng prng(5);
  Tensor logits = randn({kLossBatch, classes}, prng, 0, 1, Dtype::float32);
  logits.set_requires_grad(true);
  std::vector<double> targets(kLossBatch);
  for (double& t : targets) t = static_cast<double>(prng.uniform_int(0, classes - 1));
  const Tensor target = from_values({kLossBatch}, targets, Dtype::float32);
  for (auto _ : state) {
    Tensor loss = cross_entropy(logits, target);
    autograd::variable_list grads = autograd::Engine::grad({loss}, {logits});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kLossBatch * classes);
}
BENCHMARK(BM_CrossEntropyOurs)->Arg(8192)->ArgNames({"classes"});

// layer_norm over the last dim of [kNormRows, width] float32 with a weight and a bias, forward and
// the gradients of all three (a transformer block's normalisation at one batch of tokens).
constexpr int64_t kNormRows = 512;

void BM_LayerNormOurs(benchmark::State& state) {
  const int64_t width = state.range(0);
  Prng prng(6);
  Tensor x = randn({kNormRows, width}, prng, 0, 1, Dtype::float32);
  Tensor weight = randn({width}, prng, 1, 0.1, Dtype::float32);
  Tensor bias = randn({width}, prng, 0, 0.1, Dtype::float32);
  const Tensor grad_out = randn({kNormRows, width}, prng, 0, 1, Dtype::float32);
  for (Tensor* t : {&x, &weight, &bias}) t->set_requires_grad(true);
  for (auto _ : state) {
    Tensor y = layer_norm(x, {width}, weight, bias, 1e-5);
    autograd::variable_list grads = autograd::Engine::grad({y}, {x, weight, bias}, {grad_out});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kNormRows * width);
}
BENCHMARK(BM_LayerNormOurs)->Arg(1024)->ArgNames({"width"});

// max over the last dim of [kLossBatch, width] float32 and the input's gradient (the values' sum's).
void BM_MaxOverDimOurs(benchmark::State& state) {
  const int64_t width = state.range(0);
  Prng prng(7);
  Tensor x = randn({kLossBatch, width}, prng, 0, 1, Dtype::float32);
  x.set_requires_grad(true);
  for (auto _ : state) {
    Tensor top = sum(max(x, 1).values);
    autograd::variable_list grads = autograd::Engine::grad({top}, {x});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kLossBatch * width);
}
BENCHMARK(BM_MaxOverDimOurs)->Arg(8192)->ArgNames({"width"});

}  // namespace
}  // namespace dagsim
