// AutogradCluster: a simulated world whose nodes each run an RPC agent with distributed autograd
// (made once, on each node's first incarnation), for the conformance suites and the benchmarks.
// The world is shut down before the agents go, and the agents outlive every fiber that uses them.
// With `gpus` per node, each node has that many simulated GPUs (their delays seeded per node).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compute/device/sim_gpu.h"
#include "core/dist_autograd/dist_autograd.h"
#include "sim/sim_world.h"

namespace dagsim::conformance {

struct AutogradCluster {
  AutogradCluster(sim::SimOptions options, int nodes, const rpc::FunctionRegistry& registry,
                  rpc::RpcOptions rpc_options = {}, dist_autograd::DistEngineOptions engine_options = {},
                  int gpus = 0, device::SimGpuDelays delays = {})
      : world(std::move(options)) {
    Prng gpu_seeds(world.random_stream().fork(0x69b0));
    for (int i = 0; i < nodes; ++i) {
      const auto id = static_cast<WorkerId>(i);
      world.add_node("worker" + std::to_string(i));
      world.start(id);
      if (gpus > 0) {
        devices.push_back(std::make_unique<DeviceSet>());
        for (int g = 0; g < gpus; ++g) {
          devices.back()->add(std::make_shared<device::SimGpu>(g, world.node_clock(id), gpu_seeds.fork(static_cast<uint64_t>(i * gpus + g)), delays));
        }
        world.set_devices(id, devices.back().get());
      }
      agents.push_back(std::make_unique<rpc::RpcAgent>(world.env(id), registry, rpc_options));
      autograd.push_back(std::make_unique<dist_autograd::DistAutograd>(*agents.back(), engine_options));
      agents.back()->start();
    }
  }
  ~AutogradCluster() { world.shutdown(); }
  AutogradCluster(const AutogradCluster&) = delete;
  AutogradCluster& operator=(const AutogradCluster&) = delete;

  static sim::SimOptions zero_latency() {
    sim::SimOptions o;
    o.network.latency = runtime::LatencyModel::constant(runtime::Duration{0});
    return o;
  }

  sim::SimWorld world;  // first: destroyed last
  std::vector<std::unique_ptr<DeviceSet>> devices;  // outlive the agents, whose tensors they hold
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents;
  std::vector<std::unique_ptr<dist_autograd::DistAutograd>> autograd;
};

}  // namespace dagsim::conformance
