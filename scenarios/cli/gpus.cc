// What `dagsim run` and `dagsim node` give a scenario's nodes for GPUs with --gpus cuda.
#include <string>

#ifdef DAGSIM_HAVE_CUDA
#include "compute/device/cuda/cuda_gpu.h"
#endif
#include "core/base/error.h"
#include "scenarios/cli/commands.h"

namespace dagsim::cli {

// --gpus cuda: each node's cuda:N is a CudaGpu of its own on this machine's GPU N modulo how many
// it has (a scenario's two GPUs per node run on one card as two). Null where the cuda backend is
// not built.
scenarios::CudaGpuMaker cuda_gpu_maker() {
#ifdef DAGSIM_HAVE_CUDA
  return [](uint32_t, int ordinal, runtime::Clock& clock) -> std::shared_ptr<DeviceBackend> {
    const int count = device::cuda::device_count();
    if (count == 0) {
      throw errors::invalid_argument(std::string("--gpus cuda: no GPU to run on: ") + device::cuda::why_no_device());
    }
    return std::make_shared<device::cuda::CudaGpu>(ordinal, &clock, ordinal % count);
  };
#else
  return nullptr;
#endif
}

// Why --gpus cuda cannot run here, or "" when it can.
std::string cuda_unavailable() {
#ifdef DAGSIM_HAVE_CUDA
  return device::cuda::device_count() == 0 ? device::cuda::why_no_device() : "";
#else
  return "this dagsim was built without the cuda backend (no nvcc at build time)";
#endif
}

}  // namespace dagsim::cli
