// Tests of the cuda backend on a real GPU (cuda_gpu.h, caching_allocator.h, cuda_kernels.h,
// cuda_mlp.h). Without a GPU every test reports itself skipped, saying why (CI never has one).
// On a GPU: the allocator reuses blocks, copies round-trip through the pinned staging buffer,
// a stream waits on another's event, a fiber waiting on an event lets the node's other fibers
// run, dagsim's ops with kernels give the CPU's values through the kernel table (the op table, and
// broadcasting and training), and the MLP step's loss and gradients equal dagsim's CPU autograd on the same model:
// exactly the same formulas, within 1e-10 in float64 (cuBLAS sums in another order than
// OpenBLAS) and 2e-4 relative in float32 (the same, at float32's 24 bits).
#include "core/device/cuda/cuda_gpu.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/prng.h"
#include "core/device/cuda/cuda_kernels.h"
#include "core/device/cuda/cuda_op_kernels.h"
#include "core/device/device_ops_test_util.h"
#include "core/device/cuda/cuda_mlp.h"
#include "core/tensor/device_guard.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"

namespace dagsim::device::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (device_count() == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why_no_device()

TEST(CudaGpu, TheAllocatorServesARepeatedSizeFromItsCache) {
  SKIP_WITHOUT_GPU();
  CachingAllocator allocator(0);
  void* a = allocator.allocate(1000);
  allocator.release(a, 1000);
  void* b = allocator.allocate(900);  // the same 1024-byte class
  EXPECT_EQ(a, b);
  EXPECT_EQ(allocator.stats().device_mallocs, 1u);
  EXPECT_EQ(allocator.stats().hits, 1u);
  allocator.release(b, 900);
  EXPECT_EQ(CachingAllocator::size_class(3u << 20), size_t{4} << 20);
}

TEST(CudaGpu, TensorsRoundTripThroughTheGpuAndAnOpWithoutKernelsIsRefusedByName) {
  SKIP_WITHOUT_GPU();
  DeviceSet devices;
  devices.add(std::make_shared<CudaGpu>(0, nullptr));
  ScopedDeviceSet installed(&devices);
  Tensor host = arange(0.0, 1000.0, 1.0);
  Tensor gpu = to_device(host, Device::cuda(0));
  EXPECT_EQ(gpu.device(), Device::cuda(0));
  EXPECT_EQ(to_device(gpu, Device::cpu()).to_vector(), host.to_vector());
  EXPECT_EQ(gpu.to_vector()[999], 999.0) << "a host read copies and waits";
  EXPECT_EQ(add(gpu, gpu).to_vector()[999], 1998.0) << "add runs on the GPU's kernels";
  try {
    DeviceGuard guard("an_op_without_kernels", {&gpu});
    ADD_FAILURE() << "an op without cuda kernels opened on the GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("an_op_without_kernels: dagsim has no cuda kernel for this op yet (cuda:0;"),
              std::string::npos)
        << e.what();
  }
}

// The op table and the broadcasting and training workload on the GPU, against the cpu: float64
// within 1e-10 relative (CUDA's libm is within 1-2 ULP of SLEEF's, and a whole-tensor sum adds in
// CUB's tree order rather than the CPU's sequence).
bool close_enough(const Tensor& gpu, const Tensor& cpu) { return testing::close(gpu, cpu, 1e-10, 1e-12); }

TEST(CudaGpu, EveryOpGivesTheCpusValuesAndGradientsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  fibers::LocalRuntime rt;
  runtime::Env& env = rt.add_node("worker0");
  DeviceSet devices;
  devices.add(std::make_shared<CudaGpu>(0, &env.clock));
  rt.set_devices(0, &devices);
  std::vector<std::string> ran;
  rt.run_on(0, [&] { ran = testing::check_op_table_on_cuda0(/*kernel_table=*/true, "cuda", close_enough); });
  EXPECT_EQ(ran.size(), rpc::op_table().size()) << "an op of the op table has no cuda kernels";
  for (const std::string& op : ran) EXPECT_TRUE(has_device_kernel(op)) << op;
  rt.run_on(0, [] { testing::check_workloads_on_cuda0(close_enough); });
}

// A vector's copy on the GPU (cudaFree'd by the caller), and back.
template <typename T>
T* on_gpu(const std::vector<T>& host) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}
template <typename T>
std::vector<T> from_gpu(const T* p, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}
// How many elements differ in their bits, any NaN equal to any NaN: a NaN's sign and payload follow
// the operand order, which nvcc may pick differently in the warp and thread kernels.
template <typename T>
size_t bit_differences(const std::vector<T>& a, const std::vector<T>& b) {
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(T)) != 0) ++differ;
  }
  return differ;
}

// The line ops that take a walk (softmax, log_softmax, layer_norm and their backwards; max and
// min along a dim) run a warp per long line (cuda_op_kernels.h); the warp's shuffle fold is lane
// order's, so its bits are the one-thread functor's, to the bit. softmax: contiguous and strided
// lines, lines that do not fill the warp's last round, a tie of -0 and +0 in different lanes, NaN
// and -inf.
template <typename T>
void expect_softmax_warps_match_threads(int64_t outer, int64_t size, int64_t inner) {
  const int64_t n = outer * size * inner;
  Prng prng(static_cast<uint64_t>(n));
  std::vector<T> host(static_cast<size_t>(n));
  for (T& v : host) v = static_cast<T>(prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-8, 6))));
  // The first line all negative but a -0 (lane 1) and a +0 (lane 0, second round): the warp's
  // lanes then hold maxima of different signs, which must reach no output. The second line gets
  // a NaN, the last a -inf.
  const auto at = [&](int64_t line, int64_t k) { return static_cast<size_t>((line / inner) * size * inner + line % inner + k * inner); };
  for (int64_t k = 0; k < size; ++k) host[at(0, k)] = -std::fabs(host[at(0, k)]);
  host[at(0, 1)] = -T{0};
  host[at(0, 32)] = T{0};
  host[at(1, 3)] = static_cast<T>(NAN);
  host[at(outer * inner - 1, size - 1)] = static_cast<T>(-INFINITY);
  T* x = on_gpu(host);
  T* by_warps = on_gpu(host);
  T* by_threads = on_gpu(host);
  // The backwards read x as the forward's output and `host` again as the gradient.
  T* g = on_gpu(host);
  LineArgs a;
  a.x = x;
  a.g = g;
  a.lines = outer * inner;
  a.size = size;
  a.inner = inner;
  for (const LineOp op : {LineOp::softmax, LineOp::log_softmax, LineOp::softmax_backward, LineOp::log_softmax_backward}) {
    a.y = by_threads;
    lines_by_threads<T>(op, a, nullptr);
    a.y = by_warps;
    lines<T>(op, a, nullptr);
    EXPECT_EQ(bit_differences(from_gpu(by_warps, host.size()), from_gpu(by_threads, host.size())), 0u)
        << line_op_name(op) << " over [" << outer << ", " << size << ", " << inner << "]";
  }
  for (T* p : {g, x, by_warps, by_threads}) cudaFree(p);
}

// layer_norm (output, mean and rstd) and its backward, with and without a weight and a bias, over
// values around an offset (so both sums' orders show), one row holding an infinity.
template <typename T>
void expect_layer_norm_warps_match_threads(int64_t rows, int64_t size) {
  const size_t n = static_cast<size_t>(rows * size);
  Prng prng(n);
  std::vector<T> x(n), g(n), w(static_cast<size_t>(size)), b(w.size());
  for (T& v : x) v = static_cast<T>(42 + prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-20, 0))));
  for (std::vector<T>* values : {&g, &w, &b}) {
    for (T& v : *values) v = static_cast<T>(prng.uniform(-2, 2));
  }
  x[n - 1] = static_cast<T>(INFINITY);
  T* dx = on_gpu(x);
  T* dg = on_gpu(g);
  T* dw = on_gpu(w);
  T* db = on_gpu(b);
  T* y = on_gpu(x);
  const std::vector<double> zeros(static_cast<size_t>(rows), 0.0);
  double* stats[2][2] = {{on_gpu(zeros), on_gpu(zeros)}, {on_gpu(zeros), on_gpu(zeros)}};  // [warp or thread][mean or rstd]
  for (const bool affine : {false, true}) {
    LineArgs a;
    a.x = dx;
    a.g = dg;
    a.w = affine ? dw : nullptr;
    a.b = affine ? db : nullptr;
    a.lines = rows;
    a.size = size;
    a.scalar = 1e-5;
    a.y = y;
    std::vector<T> outputs[2][2];  // [warp or thread][forward or backward]
    for (int by_warps = 0; by_warps < 2; ++by_warps) {
      a.stat0 = stats[by_warps][0];
      a.stat1 = stats[by_warps][1];
      for (const LineOp op : {LineOp::layer_norm, LineOp::layer_norm_backward}) {
        if (by_warps) lines<T>(op, a, nullptr);
        else lines_by_threads<T>(op, a, nullptr);
        outputs[by_warps][op == LineOp::layer_norm ? 0 : 1] = from_gpu(y, n);
      }
    }
    const std::string where = " over [" + std::to_string(rows) + ", " + std::to_string(size) + "]" + (affine ? ", affine" : "");
    EXPECT_EQ(bit_differences(outputs[1][0], outputs[0][0]), 0u) << "layer_norm" << where;
    EXPECT_EQ(bit_differences(outputs[1][1], outputs[0][1]), 0u) << "layer_norm_backward" << where;
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(bit_differences(from_gpu(stats[1][s], zeros.size()), from_gpu(stats[0][s], zeros.size())), 0u)
          << (s == 0 ? "layer_norm's mean" : "layer_norm's rstd") << where;
    }
  }
  for (T* p : {dx, dg, dw, db, y}) cudaFree(p);
  for (auto& pair : stats) {
    for (double* p : pair) cudaFree(p);
  }
}

// max and min along a dim (contiguous and strided), over values from a few levels so ties are
// common, a -0 before a +0 in one line and a NaN in another: the warp's candidates meet in another
// order than one thread's loop, and must pick the same element (value to the bit, and position).
template <typename T>
void expect_extremum_warps_match_threads(int64_t outer, int64_t size, int64_t inner) {
  const size_t n = static_cast<size_t>(outer * size * inner);
  Prng prng(n + 1);
  const T levels[] = {T{0}, T{1}, T{-1}, T{2}, static_cast<T>(-INFINITY)};
  std::vector<T> host(n);
  for (T& v : host) v = levels[prng.uniform_int(0, 4)];
  for (size_t k = 0; k < static_cast<size_t>(size); ++k) host[k * static_cast<size_t>(inner)] = k == 40 ? T{0} : T{-1};
  host[5 * static_cast<size_t>(inner)] = -T{0};  // line 0: the max is the -0 at 5, not the +0 at 40
  host[n - 1] = static_cast<T>(NAN);
  T* x = on_gpu(host);
  const std::vector<T> no_values(static_cast<size_t>(outer * inner), T{7});
  const std::vector<double> no_positions(no_values.size(), -1.0);
  T* y[2] = {on_gpu(no_values), on_gpu(no_values)};
  double* at[2] = {on_gpu(no_positions), on_gpu(no_positions)};
  for (const LineOp op : {LineOp::max, LineOp::min}) {
    LineArgs a;
    a.x = x;
    a.lines = outer * inner;
    a.size = size;
    a.inner = inner;
    for (int by_warps = 0; by_warps < 2; ++by_warps) {
      a.y = y[by_warps];
      a.stat0 = at[by_warps];
      if (by_warps) lines<T>(op, a, nullptr);
      else lines_by_threads<T>(op, a, nullptr);
    }
    const std::string where = std::string(line_op_name(op)) + " over [" + std::to_string(outer) + ", " +
                              std::to_string(size) + ", " + std::to_string(inner) + "]";
    EXPECT_EQ(bit_differences(from_gpu(y[1], no_values.size()), from_gpu(y[0], no_values.size())), 0u) << where;
    EXPECT_EQ(from_gpu(at[1], no_values.size()), from_gpu(at[0], no_values.size())) << where << ": positions";
  }
  for (T* p : {x, y[0], y[1]}) cudaFree(p);
  for (double* p : at) cudaFree(p);
}

TEST(CudaGpu, LaneOrderWarpsGiveTheOneThreadFunctorsBits) {
  SKIP_WITHOUT_GPU();
  for (const auto& [outer, size, inner] : {std::tuple<int64_t, int64_t, int64_t>{64, 8192, 1}, {3, 5001, 1}, {4, 100, 3},
                                           {7, 33, 1}, {5, 40, 2}}) {
    expect_softmax_warps_match_threads<float>(outer, size, inner);
    expect_softmax_warps_match_threads<double>(outer, size, inner);
  }
  for (const auto& [rows, size] : {std::pair<int64_t, int64_t>{512, 1024}, {3, 5001}, {7, 33}, {2, 100}}) {
    expect_layer_norm_warps_match_threads<float>(rows, size);
    expect_layer_norm_warps_match_threads<double>(rows, size);
  }
  for (const auto& [outer, size, inner] : {std::tuple<int64_t, int64_t, int64_t>{64, 8192, 1}, {3, 77, 4}, {5, 41, 1}}) {
    expect_extremum_warps_match_threads<float>(outer, size, inner);
    expect_extremum_warps_match_threads<double>(outer, size, inner);
  }
}

TEST(CudaGpu, AStreamWaitsOnAnotherStreamsEvent) {
  SKIP_WITHOUT_GPU();
  CudaGpu gpu(0, nullptr);
  const int side = gpu.new_stream();
  const int64_t n = 1 << 24;
  auto* x = reinterpret_cast<float*>(gpu.allocate(n * sizeof(float)));
  fill<float>(x, n, 1.0f, gpu.stream_handle(0));
  for (int i = 0; i < 20; ++i) axpby<float>(x, x, 1.0f, x, n, gpu.stream_handle(0));  // x = 2^20, late
  const DeviceEvent written = gpu.record(0);
  gpu.wait(side, written);
  auto* y = reinterpret_cast<float*>(gpu.allocate(n * sizeof(float)));
  mul<float>(x, x, y, n, gpu.stream_handle(side));
  const DeviceEvent done = gpu.record(side);
  gpu.synchronize(done);
  EXPECT_TRUE(gpu.query(done));
  float last = 0;
  cudaMemcpy(&last, y + n - 1, sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(last, std::ldexp(1.0f, 40));
  gpu.release(reinterpret_cast<std::byte*>(x), n * sizeof(float));
  gpu.release(reinterpret_cast<std::byte*>(y), n * sizeof(float));
}

TEST(CudaGpu, AFiberWaitingForTheGpuLetsTheNodesOtherFibersRun) {
  SKIP_WITHOUT_GPU();
  fibers::LocalRuntime rt;
  runtime::Env& env = rt.add_node("worker0");
  CudaGpu gpu(0, &env.clock);
  int ticks = 0;
  bool waited = false;
  env.spawner.spawn("ticker", [&] {
    while (!waited) {
      ++ticks;
      env.clock.sleep(std::chrono::microseconds(5));
    }
  });
  rt.run_on(0, [&] {
    const int64_t n = 1 << 26;
    auto* x = reinterpret_cast<float*>(gpu.allocate(n * sizeof(float)));
    for (int i = 0; i < 50; ++i) fill<float>(x, n, static_cast<float>(i), gpu.current_handle());
    gpu.synchronize(gpu.record(0));
    waited = true;
    gpu.release(reinterpret_cast<std::byte*>(x), n * sizeof(float));
  });
  EXPECT_GT(ticks, 1) << "the ticker ran while the GPU worked";
}

TEST(CudaGpu, FibersCopyingAtOnceEachGetTheirOwnValues) {
  SKIP_WITHOUT_GPU();
  // They share one pinned staging buffer, which the second must wait for (and grow after).
  fibers::LocalRuntime rt;
  runtime::Env& env = rt.add_node("worker0");
  DeviceSet devices;
  devices.add(std::make_shared<CudaGpu>(0, &env.clock));
  rt.set_devices(0, &devices);
  std::vector<double> small, large;
  env.spawner.spawn("large", [&] { large = to_device(full({1 << 23}, 2.0), Device::cuda(0)).to_vector(); });
  rt.run_on(0, [&] { small = to_device(full({1 << 22}, 1.0), Device::cuda(0)).to_vector(); });
  EXPECT_EQ(small, std::vector<double>(1 << 22, 1.0));
  EXPECT_EQ(large, std::vector<double>(1 << 23, 2.0));
}

// dagsim's CPU autograd on the same model: linear, relu between layers, mse_loss.
template <typename T>
void expect_mlp_matches_cpu(double rtol) {
  CudaGpu gpu(0, nullptr);
  const std::vector<int64_t> widths{32, 64, 48, 16};
  const int64_t batch = 20;
  CudaMlp<T> mlp(gpu, widths, batch, 99);
  mlp.step(T{0});
  const Dtype dtype = dtype_of<T>();
  const auto to_values = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  std::vector<Tensor> weights, biases;
  Tensor h = from_values({batch, widths.front()}, to_values(mlp.input()), dtype);
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    weights.push_back(from_values({widths[l + 1], widths[l]}, to_values(mlp.initial_weights()[l]), dtype));
    biases.push_back(from_values({widths[l + 1]}, to_values(mlp.initial_biases()[l]), dtype));
    weights.back().set_requires_grad(true);
    biases.back().set_requires_grad(true);
    h = linear(h, weights.back(), biases.back());
    if (l + 2 < widths.size()) h = relu(h);
  }
  Tensor loss = mse_loss(h, from_values({batch, widths.back()}, to_values(mlp.target()), dtype));
  loss.backward();
  EXPECT_NEAR(mlp.loss(), loss.item(), rtol * std::abs(loss.item()));
  for (size_t l = 0; l < weights.size(); ++l) {
    const std::vector<T> dw = mlp.weight_grad(l), db = mlp.bias_grad(l);
    const std::vector<double> cw = weights[l].grad().to_vector(), cb = biases[l].grad().to_vector();
    double scale = 0;
    for (double v : cw) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < cw.size(); ++i) ASSERT_NEAR(dw[i], cw[i], rtol * scale) << "layer " << l << " weight " << i;
    for (size_t i = 0; i < cb.size(); ++i) ASSERT_NEAR(db[i], cb[i], rtol * scale) << "layer " << l << " bias " << i;
  }
}

TEST(CudaMlp, Float64GradientsEqualDagsimsCpuAutogradWithin1e10) {
  SKIP_WITHOUT_GPU();
  expect_mlp_matches_cpu<double>(1e-10);
}

TEST(CudaMlp, Float32GradientsEqualDagsimsCpuAutogradWithin2e4) {
  SKIP_WITHOUT_GPU();
  expect_mlp_matches_cpu<float>(2e-4);
}

TEST(CudaMlp, AfterItsFirstStepAStepMakesNoDeviceAllocation) {
  SKIP_WITHOUT_GPU();
  CudaGpu gpu(0, nullptr);
  CudaMlp<float> mlp(gpu, {256, 256, 256}, 64, 1);
  mlp.step(0.01f);
  const uint64_t before = gpu.allocator().stats().device_mallocs;
  for (int i = 0; i < 5; ++i) mlp.step(0.01f);
  EXPECT_EQ(gpu.allocator().stats().device_mallocs, before);
  EXPECT_TRUE(std::isfinite(mlp.loss()));
}

}  // namespace
}  // namespace dagsim::device::cuda
