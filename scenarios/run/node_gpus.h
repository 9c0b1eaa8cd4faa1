// The GPUs a run gives each node ([devices] gpus = N), in the simulator and over TCP alike: the
// simulated GPU (running each op's CPU code, or its kernel table's host reference) seeded per node
// and ordinal from the run's seed, or real ones from a maker the CLI supplies where the cuda
// backend is built.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/runtime/clock.h"
#include "core/tensor/device.h"
#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

// Node `node`'s GPU `ordinal`, polling on `clock` (a CudaGpu; docs/devices.md).
using CudaGpuMaker = std::function<std::shared_ptr<DeviceBackend>(uint32_t node, int ordinal, runtime::Clock& clock)>;

// "sim", "sim-kernels" or "cuda" (RunOptions::gpus); anything else is a programmer error.
// Throws invalid_argument for "cuda" without a maker (a build without nvcc).
std::unique_ptr<DeviceSet> make_node_gpus(const Scenario& scenario, uint32_t node, uint64_t seed, runtime::Clock& clock,
                                          const std::string& gpus, const CudaGpuMaker& make_cuda_gpu);

}  // namespace dagsim::scenarios
