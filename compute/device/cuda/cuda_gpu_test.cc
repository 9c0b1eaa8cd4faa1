// Tests of the cuda backend on a real GPU (cuda_gpu.h, caching_allocator.h, cuda_kernels.h,
// cuda_mlp.h). Without a GPU every test reports itself skipped, saying why (CI never has one).
// On a GPU: the allocator reuses blocks, copies round-trip through the pinned staging buffer,
// a stream waits on another's event, a fiber waiting on an event lets the node's other fibers
// run, dagsim's ops with kernels give the CPU's values through the kernel table (the op table, and
// broadcasting and training), and the MLP step's loss and gradients equal dagsim's CPU autograd on the same model:
// exactly the same formulas, within 1e-10 in float64 (cuBLAS sums in another order than
// OpenBLAS) and 2e-4 relative in float32 (the same, at float32's 24 bits).
#include "compute/device/cuda/cuda_gpu.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "compute/device/cuda/cuda_kernels.h"
#include "compute/device/cuda/cuda_op_kernels.h"
#include "compute/device/device_ops_test_util.h"
#include "compute/device/cuda/cuda_mlp.h"
#include "core/tensor/device_guard.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"
#include "compute/kernels/warp_walk_test_util.h"

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

// Line kernels on the GPU, as warp_walk_test_util.h's backend wants them: device copies (freed with
// the backend), and the line ops by a thread or a warp per line.
class GpuLines {
 public:
  GpuLines() = default;
  GpuLines(const GpuLines&) = delete;
  GpuLines& operator=(const GpuLines&) = delete;
  ~GpuLines() {
    for (void* p : owned_) cudaFree(p);
  }

  template <typename T> T* put(const std::vector<T>& host) {
    T* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
    owned_.push_back(p);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return p;
  }
  template <typename T> std::vector<T> get(const T* p, size_t n) {
    std::vector<T> host(n);
    EXPECT_EQ(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  // `lines` runs a warp per line from kWarpLineMin elements a line; all the shapes it is given here
  // are that long.
  template <typename T> void run(LineOp op, const LineArgs& a, bool by_warps) {
    if (by_warps) lines<T>(op, a, nullptr);
    else lines_by_threads<T>(op, a, nullptr);
  }

 private:
  std::vector<void*> owned_;
};

// The line ops that take a walk (softmax, log_softmax, layer_norm and their backwards; max and
// min along a dim) run a warp per long line (cuda_op_kernels.h); the warp's shuffle fold is lane
// order's, so its bits are the one-thread functor's, to the bit (warp_walk.h; warp_walk_test.cc
// checks the same on the host, in an emulated warp).
TEST(CudaGpu, LaneOrderWarpsGiveTheOneThreadFunctorsBits) {
  SKIP_WITHOUT_GPU();
  GpuLines lines;
  dagsim::testing::expect_warps_match_threads(lines, /*short_lines=*/false);
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
