// Every op of the op table on the simulated GPU, by enumerating the table: on cuda:0 each op gives
// the CPU's outputs and, through a backward pass, the CPU's gradients, bit for bit in float64,
// with every output and gradient on cuda:0 and no racy read. A new op is covered the moment it is
// in the table. Then the same through the kernel table (the cuda backend's path, HostKernels
// computing it): every op gives the CPU's bits, and an op without kernels is refused by name.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "compute/device/device_ops_test_util.h"
#include "compute/device/sim_gpu.h"
#include "core/tensor/device_guard.h"
#include "core/fibers/local_runtime.h"

namespace dagsim::device {
namespace {

using testing::same_bits;

// Runs `body` on a node with one sim GPU, cuda:0 (through its kernel table when `kernel_table`);
// no read may race.
void on_sim_gpu(bool kernel_table, const std::function<void()>& body) {
  fibers::LocalRuntime rt;
  runtime::Env& env = rt.add_node("worker0");
  DeviceSet devices;
  auto gpu = std::make_shared<SimGpu>(0, env.clock, Prng(3));
  SimGpu& sim = *gpu;
  sim.use_kernel_table(kernel_table);
  devices.add(std::move(gpu));
  rt.set_devices(0, &devices);
  rt.run_on(0, body);
  EXPECT_EQ(sim.stats().racy_reads, 0u);
}

std::vector<std::string> check_op_table_on_sim_gpu(bool kernel_table) {
  std::vector<std::string> ran;
  on_sim_gpu(kernel_table, [&] { ran = testing::check_op_table_on_cuda0(kernel_table, "sim", same_bits); });
  return ran;
}

TEST(SimGpuOps, EveryOpOfTheOpTableGivesTheCpusOutputsAndGradientsOnCuda0) {
  EXPECT_EQ(check_op_table_on_sim_gpu(/*kernel_table=*/false).size(), rpc::op_table().size());
}

TEST(SimGpuOps, EveryOpOfTheOpTableGivesTheCpusBitsThroughTheKernelTable) {
  // The cuda backend's path, checked without a GPU: each op calls only the table's primitives
  // (HostKernels computes them as the CPU code does), in float64 to the bit.
  const std::vector<std::string> ran = check_op_table_on_sim_gpu(/*kernel_table=*/true);
  EXPECT_EQ(ran.size(), rpc::op_table().size()) << "an op of the op table has no kernels";
  for (const std::string& op : ran) EXPECT_TRUE(has_device_kernel(op)) << op;
}

TEST(SimGpuOps, AnOpWithoutKernelsIsRefusedByNameBeforeItReadsDeviceMemory) {
  on_sim_gpu(/*kernel_table=*/true, [&] {
    const Tensor x = to_device(ones({3}), Device::cuda(0));
    ASSERT_FALSE(has_device_kernel("an_op_without_kernels"));
    try {
      DeviceGuard guard("an_op_without_kernels", {&x});
      ADD_FAILURE() << "an op without kernels opened on a kernel-table device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("an_op_without_kernels: dagsim has no sim kernel for this op yet (cuda:0;"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(add(x, x).to_vector(), (std::vector<double>{2, 2, 2})) << "the device is usable after the refusal";
  });
}

TEST(SimGpuOps, BroadcastsReductionsAnMlpStepAndAClassifiersTrainingGiveTheCpusBitsThroughTheKernelTable) {
  on_sim_gpu(/*kernel_table=*/true, [] { testing::check_workloads_on_cuda0(same_bits); });
}

}  // namespace
}  // namespace dagsim::device
