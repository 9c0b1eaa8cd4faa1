// Tests of the simulated GPU (sim_gpu.h) and of tensors on a device (device.h, device_guard.h):
// ops on cuda:0 give the CPU's values and gradients exactly (float64), mixing devices fails with
// PyTorch's text, to_device carries gradients home, the host waits in virtual time for what it
// reads, and a read on another stream without waiting for the writer's event is poisoned, the same
// way for the same seed.
#include "compute/device/sim_gpu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/node.h"
#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/ops.h"

namespace dagsim::device {
namespace {

using fibers::LocalRuntime;

class SimGpuTest : public ::testing::Test {
 protected:
  explicit SimGpuTest(uint64_t seed = 7) {
    runtime::Env& env = rt_.add_node("worker0");
    for (int i = 0; i < 2; ++i) {
      auto gpu = std::make_shared<SimGpu>(i, env.clock, Prng(seed).fork(static_cast<uint64_t>(i)));
      gpus_.push_back(gpu.get());
      devices_.add(std::move(gpu));
    }
    rt_.set_devices(0, &devices_);
  }

  template <typename F>
  auto on_node(F&& fn) {
    return rt_.run_on(0, std::forward<F>(fn));
  }

  LocalRuntime rt_;
  DeviceSet devices_;
  std::vector<SimGpu*> gpus_;
};

Tensor leaf(const Shape& shape, uint64_t seed, Device device = Device::cpu()) {
  Prng prng(seed);
  Tensor t = to_device(randn(shape, prng), device);
  t.set_requires_grad(true);
  return t;
}

// loss(x, w, b) = sum(relu(x @ w + b) * x.mean()) - mean(tanh(x)), on whatever device they are.
Tensor program(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor h = relu(add(matmul(x, w), b));
  return sub(sum(mul(h, mean(x))), mean(tanh(x)));
}

TEST_F(SimGpuTest, OpsOnTheSimGpuGiveTheCpusValuesAndGradientsExactly) {
  Tensor x = leaf({4, 3}, 1), w = leaf({3, 5}, 2), b = leaf({5}, 3);
  Tensor loss = program(x, w, b);
  loss.backward();
  on_node([&] {
    const Device gpu = Device::cuda(1);
    Tensor gx = leaf({4, 3}, 1, gpu), gw = leaf({3, 5}, 2, gpu), gb = leaf({5}, 3, gpu);
    Tensor gloss = program(gx, gw, gb);
    EXPECT_EQ(gloss.device(), gpu);
    gloss.backward();
    EXPECT_EQ(gloss.item(), loss.item());
    for (const auto& [g, c] : {std::pair{gx, x}, std::pair{gw, w}, std::pair{gb, b}}) {
      ASSERT_TRUE(g.grad().defined());
      EXPECT_EQ(g.grad().device(), gpu) << "a gradient lands on its tensor's device";
      EXPECT_EQ(g.grad().to_vector(), c.grad().to_vector());
    }
  });
  EXPECT_GT(gpus_[1]->stats().kernels, 10u);
  EXPECT_EQ(gpus_[1]->stats().racy_reads, 0u);
  EXPECT_EQ(gpus_[0]->stats().kernels, 0u) << "cuda:1's work stays on cuda:1";
}

TEST_F(SimGpuTest, MixingDevicesNamesBothAsPyTorchDoes) {
  on_node([&] {
    Tensor cpu = ones({2, 2});
    Tensor gpu = to_device(ones({2, 2}), Device::cuda(0));
    Tensor gpu1 = to_device(ones({2, 2}), Device::cuda(1));
    const std::string text = "Expected all tensors to be on the same device, but found at least two devices, ";
    EXPECT_TRUE(throws_error([&] { add(gpu, cpu); }, ErrorCode::invalid_argument, {text + "cuda:0 and cpu!"}));
    EXPECT_TRUE(throws_error([&] { add(cpu, gpu); }, ErrorCode::invalid_argument, {text + "cuda:0 and cpu!"}));
    EXPECT_TRUE(throws_error([&] { matmul(gpu, gpu1); }, ErrorCode::invalid_argument, {text + "cuda:0 and cuda:1!"}));
    // A 0-dim CPU tensor is a scalar argument, as in PyTorch.
    Tensor scaled = mul(gpu, scalar_tensor(3.0));
    EXPECT_EQ(scaled.device(), Device::cuda(0));
    EXPECT_EQ(scaled.to_vector(), std::vector<double>(4, 3.0));
  });
}

TEST_F(SimGpuTest, ToDeviceIsDifferentiableAndTheGradientGoesHome) {
  on_node([&] {
    Tensor x = leaf({3}, 5);                        // cpu
    Tensor y = mul(to_device(x, Device::cuda(0)), 2.0);   // cuda:0
    Tensor z = to_device(y, Device::cuda(1));             // cuda:1
    EXPECT_EQ(z.grad_fn()->name(), "ToCopyBackward");
    sum(to_device(z, Device::cpu())).backward();
    EXPECT_EQ(x.grad().device(), Device::cpu());
    EXPECT_EQ(x.grad().to_vector(), std::vector<double>(3, 2.0));
    EXPECT_TRUE(to_device(x, Device::cpu()).is_same(x)) << "to its own device: the tensor itself";
    EXPECT_EQ(z.to_string().find("device='cuda:1'") != std::string::npos, true) << z.to_string();
  });
}

TEST_F(SimGpuTest, TheHostWaitsInVirtualTimeForWhatItReadsAndNotForWhatItLaunches) {
  on_node([&] {
    Tensor x = to_device(ones({8}), Device::cuda(0));
    const runtime::TimePoint launched = rt_.now();
    Tensor y = exp(mul(x, 2.0));
    EXPECT_EQ(rt_.now(), launched) << "a launch does not block the host";
    const double value = y.to_vector()[0];
    EXPECT_EQ(value, std::exp(2.0));
    const SimGpuDelays& d = gpus_[0]->delays();
    EXPECT_GE(rt_.now() - launched, runtime::Duration{2 * d.kernel_min_ns + d.copy_min_ns})
        << "the read waited for the copy-in, two kernels and the copy-out";
  });
  EXPECT_GE(gpus_[0]->stats().host_waits, 1u);
}

TEST_F(SimGpuTest, AReadOnAnotherStreamWithoutTheWritersEventSeesPoison) {
  on_node([&] {
    DeviceBackend& gpu = *gpus_[0];
    const int side = gpu.new_stream();
    Tensor x = to_device(full({64}, 1.5), Device::cuda(0));  // default stream
    Tensor y = mul(x, 2.0);                                   // default stream, ends later
    gpu.set_current_stream(side);
    Tensor racy = add(y, 1.0);  // no wait: starts now, before y's kernel ends
    gpu.set_current_stream(0);
    const std::vector<double> seen = racy.to_vector();
    EXPECT_NE(seen, std::vector<double>(64, 4.0)) << "read before its writer finished";

    // The same with the event: the side stream waits for y's writer.
    Tensor y2 = mul(x, 2.0);
    const DeviceEvent written = gpu.record(0);
    gpu.set_current_stream(side);
    gpu.wait(side, written);
    Tensor ordered = add(y2, 1.0);
    const DeviceEvent done = gpu.record(side);
    gpu.set_current_stream(0);
    EXPECT_FALSE(gpu.query(done));
    gpu.synchronize(done);
    EXPECT_TRUE(gpu.query(done));
    EXPECT_EQ(ordered.to_vector(), std::vector<double>(64, 4.0));
  });
  EXPECT_EQ(gpus_[0]->stats().racy_reads, 1u);
}

TEST_F(SimGpuTest, AFiberBlockedWithADeviceOpOpenHidesItFromTheNodesOtherFibers) {
  // A backward node on cuda:0 that sends its gradients may block with its guard open; meanwhile
  // another fiber's plain op must allocate on the cpu, and the guards must still close in order.
  runtime::Env& env = rt_.env(0);
  Device seen = Device::cuda(1);
  env.spawner.spawn("other", [&] {
    env.clock.sleep(std::chrono::microseconds(10));
    seen = ones({3}).device();
  });
  on_node([&] {
    Tensor x = to_device(ones({2}), Device::cuda(0));
    DeviceGuard open("a backward node", {&x});
    env.clock.sleep(std::chrono::microseconds(100));
    EXPECT_EQ(zeros({2}).device(), Device::cuda(0)) << "back in its own op after the wait";
  });
  EXPECT_EQ(seen, Device::cpu());
}

TEST_F(SimGpuTest, AnOpThatClosesWhileAnotherFiberUnwindsStillLaunches) {
  // std::uncaught_exceptions counts per OS thread, not per fiber: another fiber of the node that
  // blocks while unwinding must not make an op that returned normally look like one that threw
  // (which launches nothing, so its output would never become ready).
  runtime::Env& env = rt_.env(0);
  struct BlocksWhileUnwinding {
    runtime::Env& env;
    ~BlocksWhileUnwinding() { env.clock.sleep(std::chrono::microseconds(200)); }
  };
  env.spawner.spawn("unwinder", [&] {
    env.clock.sleep(std::chrono::microseconds(10));
    try {
      BlocksWhileUnwinding blocks{env};
      throw std::runtime_error("unwinding");
    } catch (const std::runtime_error&) {
    }
  });
  on_node([&] {
    Tensor x = to_device(ones({2}), Device::cuda(0));
    const uint64_t before = gpus_[0]->stats().kernels;
    {
      DeviceGuard open("a backward node", {&x});
      Tensor y = zeros({2});
      env.clock.sleep(std::chrono::microseconds(100));  // the unwinder blocks in its destructor meanwhile
    }
    EXPECT_EQ(gpus_[0]->stats().kernels, before + 1) << "the guard's kernel, which writes y";
  });
}

TEST_F(SimGpuTest, EachFiberHasItsOwnCurrentStreamAsEachThreadHasInPyTorch) {
  // The RPC agent places an incoming tensor with its copy stream current and may block there
  // (waiting for the staging buffer); another fiber's ops meanwhile must stay on its own stream,
  // or its next op, back on the default stream, would read their outputs without a wait.
  runtime::Env& env = rt_.env(0);
  SimGpu& gpu = *gpus_[0];
  const int side = gpu.new_stream();
  int seen_by_other = -1;
  env.spawner.spawn("other", [&] {
    env.clock.sleep(std::chrono::microseconds(10));
    seen_by_other = gpu.current_stream();
    Tensor x = to_device(full({4}, 3.0), Device::cuda(0));
    Tensor y = add(x, x);
    env.clock.sleep(std::chrono::microseconds(100));
    EXPECT_EQ(mul(y, y).to_vector(), std::vector<double>(4, 36.0)) << "no racy read of y";
  });
  on_node([&] {
    gpu.set_current_stream(side);
    env.clock.sleep(std::chrono::microseconds(50));
    EXPECT_EQ(gpu.current_stream(), side) << "its own stream, whatever the other fiber did";
    gpu.set_current_stream(0);
    env.clock.sleep(std::chrono::microseconds(200));
  });
  EXPECT_EQ(seen_by_other, 0) << "a fiber starts on the default stream";
  EXPECT_EQ(gpu.stats().racy_reads, 0u);
}

TEST_F(SimGpuTest, AHostReadSeesTheValuesAsOfWhenItWasIssued) {
  // Another fiber's in-place kernel, queued after the read's copy on the same stream, must not
  // show through while the reader sleeps for its copy (the sim computes eagerly).
  runtime::Env& env = rt_.env(0);
  Tensor x;
  env.spawner.spawn("writer", [&] {
    env.clock.sleep(std::chrono::microseconds(1));
    mul_(x, 2.0);
  });
  on_node([&] {
    x = to_device(full({4}, 3.0), Device::cuda(0));
    EXPECT_EQ(x.to_vector(), std::vector<double>(4, 3.0));
    EXPECT_EQ(x.to_vector(), std::vector<double>(4, 6.0)) << "the next read sees the write";
  });
}

TEST_F(SimGpuTest, AnInPlaceOpOnACpuScalarWithAGpuArgumentIsAMismatch) {
  on_node([&] {
    Tensor self = scalar_tensor(1.0);
    Tensor gpu = to_device(scalar_tensor(2.0), Device::cuda(0));
    EXPECT_TRUE(throws_error([&] { add_(self, gpu); }, ErrorCode::invalid_argument,
                             {"add_: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"}));
    EXPECT_EQ(self.item(), 1.0);
  });
}

std::vector<double> racy_values(uint64_t seed) {
  LocalRuntime rt;
  runtime::Env& env = rt.add_node("worker0");
  DeviceSet devices;
  auto gpu = std::make_shared<SimGpu>(0, env.clock, Prng(seed));
  SimGpu& g = *gpu;
  devices.add(std::move(gpu));
  rt.set_devices(0, &devices);
  return rt.run_on(0, [&] {
    std::vector<double> all;
    for (int i = 0; i < 8; ++i) {
      Tensor x = to_device(full({4}, 1.0), Device::cuda(0));
      g.set_current_stream(g.new_stream());
      Tensor r = add(x, 1.0);  // the copy-in is on stream 0, unwaited
      g.set_current_stream(0);
      for (double v : r.to_vector()) all.push_back(v);
    }
    return all;
  });
}

TEST(SimGpuReplay, TheSameSeedPoisonsTheSameWayAndAnotherSeedOtherwise) {
  const std::vector<double> a = racy_values(11), b = racy_values(11), c = racy_values(12);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    // NaN != NaN: compare the bits.
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0) << i;
  }
  EXPECT_NE(std::memcmp(a.data(), c.data(), a.size() * sizeof(double)), 0);
}

TEST(SimGpuAbsent, ANodeWithoutDevicesSaysSoByName) {
  LocalRuntime rt;
  rt.add_node("worker4");
  rt.run_on(0, [&] {
    EXPECT_TRUE(throws_error([&] { to_device(ones({2}), Device::cuda(0)); }, ErrorCode::invalid_argument, {"Torch not compiled with CUDA enabled: cuda:0 was asked for, and worker4 has no cuda device"}));
  });
}

TEST_F(SimGpuTest, AnInvalidOrdinalIsCudasError) {
  on_node([&] {
    EXPECT_TRUE(throws_error([&] { to_device(ones({2}), Device::cuda(2)); }, ErrorCode::invalid_argument, {"CUDA error: invalid device ordinal: cuda:2 (this node has cuda:0, cuda:1)"}));
  });
}

TEST(DeviceParse, AcceptsWhatTorchDeviceAccepts) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(3).str(), "cuda:3");
  EXPECT_TRUE(throws_error([&] { parse_device("gpu"); }, ErrorCode::invalid_argument, {"Expected one of cpu, cuda device type at start of device string: gpu"}));
  EXPECT_TRUE(throws_error([&] { parse_device("cuda:x"); }, ErrorCode::invalid_argument, {"Invalid device string: 'cuda:x'"}));
  EXPECT_TRUE(throws_error([&] { parse_device("cuda:-1"); }, ErrorCode::invalid_argument, {"Invalid device string: 'cuda:-1'"}));
}

}  // namespace
}  // namespace dagsim::device
