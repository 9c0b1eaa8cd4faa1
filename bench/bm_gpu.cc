// GPU benchmarks of the cuda backend (issue 27; scripts/bench_gpu.sh makes reports/gpu.md):
// cuBLAS's own float32 gemm, at the shapes of an MLP layer, against the cuda backend's MLP
// training step (forward, MSE loss, backward, SGD) at widths 256 to 4096, whose gemm throughput
// the report sets against cuBLAS's (the aim: 70% or more at width 4096); and the cost of the
// device-to-host copy an RPC pays per GPU tensor (to_device(t, cpu) through the pinned staging
// buffer) against a bare cudaMemcpyAsync into pinned memory; and log_softmax over long rows, a
// thread per row against a warp per row. Times come from CUDA events around
// the GPU work (UseManualTime). Without a GPU every benchmark reports it is skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cublas_v2.h>

#include "compute/device/cuda/cuda_gpu.h"
#include "compute/device/cuda/cuda_mlp.h"
#include "compute/device/cuda/cuda_op_kernels.h"
#include "core/tensor/ops.h"

namespace dagsim::device::cuda {
namespace {

constexpr int64_t kBatch = 1024;

// The card, in the JSON's context, so a report names what it measured.
const bool kContext = [] {
  cudaDeviceProp prop{};
  if (device_count() > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    benchmark::AddCustomContext("gpu", prop.name);
    benchmark::AddCustomContext("gpu_sms", std::to_string(prop.multiProcessorCount));
  } else {
    benchmark::AddCustomContext("gpu", std::string("none: ") + why_no_device());
  }
  return true;
}();

bool skip_without_gpu(benchmark::State& state) {
  if (device_count() > 0) return false;
  const std::string why = std::string("needs a CUDA GPU: ") + why_no_device();
  state.SkipWithError(why.c_str());
  return true;
}

// Times `work` (enqueued on `stream`) with CUDA events, per iteration.
template <typename F>
void timed_on_gpu(benchmark::State& state, cudaStream_t stream, F&& work) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  work();  // warm: first-use allocations, cuBLAS heuristics
  cudaStreamSynchronize(stream);
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    work();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// cuBLAS alone: [batch, w] x [w, w]ᵀ, the MLP's forward gemm, float32.
void BM_CublasGemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t w = state.range(0);
  CudaGpu gpu(0, nullptr);
  float *a, *b, *c;
  cudaMalloc(&a, sizeof(float) * kBatch * w);
  cudaMalloc(&b, sizeof(float) * w * w);
  cudaMalloc(&c, sizeof(float) * kBatch * w);
  cudaMemset(a, 0, sizeof(float) * kBatch * w);
  cudaMemset(b, 0, sizeof(float) * w * w);
  cudaDeviceSynchronize();  // the backend's streams do not wait for the legacy default stream's memsets
  const auto handle = static_cast<cublasHandle_t>(gpu.cublas());
  const float one = 1, zero = 0;
  timed_on_gpu(state, static_cast<cudaStream_t>(gpu.current_handle()), [&] {
    cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w), static_cast<int>(kBatch), static_cast<int>(w), &one, b,
                static_cast<int>(w), a, static_cast<int>(w), &zero, c, static_cast<int>(w));
  });
  const double flops = 2.0 * kBatch * w * w;
  state.counters["TFLOPs"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}
BENCHMARK(BM_CublasGemm)->RangeMultiplier(2)->Range(256, 4096)->ArgNames({"width"})->UseManualTime()->Unit(benchmark::kMicrosecond);

// The cuda backend's MLP step: three layers of `width`, float32.
void BM_CudaMlpStep(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t w = state.range(0);
  CudaGpu gpu(0, nullptr);
  CudaMlp<float> mlp(gpu, {w, w, w, w}, kBatch, 7);
  timed_on_gpu(state, static_cast<cudaStream_t>(gpu.current_handle()), [&] { mlp.step(1e-4f); });
  state.counters["gemm_TFLOPs"] = benchmark::Counter(mlp.gemm_flops() * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CudaMlpStep)->RangeMultiplier(2)->Range(256, 4096)->ArgNames({"width"})->UseManualTime()->Unit(benchmark::kMicrosecond);

// A line op over [rows, size] float32 on the GPU, one thread per row (warps false) against a warp
// per row (what the cuda backend runs from kWarpLineMin elements a row): the same bits, so only
// the time differs. Zeros in, so every form does the same work.
void time_line_op(benchmark::State& state, LineOp op, int64_t rows, int64_t size, bool warps) {
  const size_t bytes = static_cast<size_t>(rows * size) * sizeof(float);
  void *x = nullptr, *y = nullptr;
  double* stats = nullptr;
  cudaMalloc(&x, bytes);
  cudaMalloc(&y, bytes);
  cudaMalloc(&stats, 2 * static_cast<size_t>(rows) * sizeof(double));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  // On the op's stream: a non-blocking stream does not wait for the legacy default stream.
  cudaMemsetAsync(x, 0, bytes, stream);
  LineArgs args;
  args.x = x;
  args.y = y;
  args.stat0 = stats;
  args.stat1 = stats + rows;
  args.lines = rows;
  args.size = size;
  args.scalar = 1e-5;
  timed_on_gpu(state, stream, [&] {
    if (warps) {
      lines<float>(op, args, stream);
    } else {
      lines_by_threads<float>(op, args, stream);
    }
  });
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
  cudaStreamDestroy(stream);
  cudaFree(x);
  cudaFree(y);
  cudaFree(stats);
}

// log_softmax over [64, classes] logits (cross_entropy over a large vocabulary is this plus nll_loss).
void BM_CudaLogSoftmax(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_line_op(state, LineOp::log_softmax, 64, state.range(0), state.range(1) != 0);
}
BENCHMARK(BM_CudaLogSoftmax)
    ->ArgsProduct({{1024, 32768}, {0, 1}})
    ->ArgNames({"classes", "warps"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// layer_norm over [512, width] (a transformer block's tokens), without a weight or a bias.
void BM_CudaLayerNorm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_line_op(state, LineOp::layer_norm, 512, state.range(0), state.range(1) != 0);
}
BENCHMARK(BM_CudaLayerNorm)
    ->ArgsProduct({{1024, 4096}, {0, 1}})
    ->ArgNames({"width", "warps"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// What an RPC pays to stage one GPU tensor for the wire: to_device(t, cpu), as RpcAgent does.
void BM_CudaStageToHost(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t numel = state.range(0) / 4;
  DeviceSet devices;
  devices.add(std::make_shared<CudaGpu>(0, nullptr));
  ScopedDeviceSet installed(&devices);
  Tensor gpu_tensor = to_device(zeros({numel}, Dtype::float32), Device::cuda(0));
  for (auto _ : state) benchmark::DoNotOptimize(to_device(gpu_tensor, Device::cpu()).raw_data());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_CudaStageToHost)->Arg(64)->Arg(1 << 20)->Arg(64 << 20)->ArgNames({"bytes"})->Unit(benchmark::kMicrosecond);

// The floor: one cudaMemcpyAsync into pinned memory and a wait, no staging copy.
void BM_CudaMemcpyToPinned(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const size_t bytes = static_cast<size_t>(state.range(0));
  void *device, *pinned;
  cudaMalloc(&device, bytes);
  cudaMallocHost(&pinned, bytes);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  for (auto _ : state) {
    cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
  cudaFree(device);
}
BENCHMARK(BM_CudaMemcpyToPinned)->Arg(64)->Arg(1 << 20)->Arg(64 << 20)->ArgNames({"bytes"})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dagsim::device::cuda
