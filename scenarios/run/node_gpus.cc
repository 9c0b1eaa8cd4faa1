#include "scenarios/run/node_gpus.h"

#include "core/base/assert.h"
#include "core/base/error.h"
#include "compute/device/sim_gpu.h"

namespace dagsim::scenarios {

std::unique_ptr<DeviceSet> make_node_gpus(const Scenario& scenario, uint32_t node, uint64_t seed, runtime::Clock& clock,
                                          const std::string& gpus, const CudaGpuMaker& make_cuda_gpu) {
  DAGSIM_ASSERT_MSG(gpus == "sim" || gpus == "sim-kernels" || gpus == "cuda", "unknown GPU kind " + gpus);
  if (gpus == "cuda" && !make_cuda_gpu) {
    throw errors::invalid_argument("--gpus cuda: this dagsim was built without the cuda backend (no nvcc at build time)");
  }
  auto set = std::make_unique<DeviceSet>();
  const Prng seeds = Prng(seed).fork(0x69b0);
  for (uint32_t g = 0; g < scenario.devices.gpus; ++g) {
    if (gpus == "cuda") {
      set->add(make_cuda_gpu(node, static_cast<int>(g), clock));
      continue;
    }
    auto gpu = std::make_shared<device::SimGpu>(static_cast<int>(g), clock, seeds.fork(uint64_t{node} * 64 + g),
                                                scenario.devices.delays);
    gpu->use_kernel_table(gpus == "sim-kernels");
    set->add(std::move(gpu));
  }
  return set;
}

}  // namespace dagsim::scenarios
