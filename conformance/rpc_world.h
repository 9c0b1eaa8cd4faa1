// RpcWorld: a simulated world whose nodes each run an RpcAgent, a fresh one per incarnation, for
// the RPC conformance suites. Agents outlive every fiber: the world shuts down (unwinding
// listeners and handlers) before any agent is destroyed, and a dead incarnation's agent is kept,
// since its fibers may still be unwinding when the next starts. `on_start` runs on each
// incarnation's main fiber once its agent has started.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/rpc/rpc_agent.h"
#include "sim/sim_world.h"

namespace dagsim::conformance {

struct RpcWorld {
  RpcWorld(sim::SimOptions options, int nodes, rpc::FunctionRegistry registry,
           std::function<void(WorkerId, rpc::RpcAgent&)> on_start = nullptr)
      : world(std::move(options)), functions(std::move(registry)), started(std::move(on_start)) {
    current.resize(static_cast<size_t>(nodes));
    for (int i = 0; i < nodes; ++i) {
      world.add_node("worker" + std::to_string(i), [this, i](runtime::Env& env) {
        all.push_back(std::make_unique<rpc::RpcAgent>(env, functions));
        current[static_cast<size_t>(i)] = all.back().get();
        all.back()->start();
        if (started) started(static_cast<WorkerId>(i), *all.back());
      });
      world.start(static_cast<WorkerId>(i));
    }
  }
  ~RpcWorld() { world.shutdown(); }
  RpcWorld(const RpcWorld&) = delete;
  RpcWorld& operator=(const RpcWorld&) = delete;
  rpc::RpcAgent& agent(int i) { return *current[static_cast<size_t>(i)]; }

  sim::SimWorld world;  // first: destroyed last, after the agents that use its clocks
  rpc::FunctionRegistry functions;
  std::function<void(WorkerId, rpc::RpcAgent&)> started;
  std::vector<std::unique_ptr<rpc::RpcAgent>> all;
  std::vector<rpc::RpcAgent*> current;
};

inline sim::SimOptions latency(runtime::Duration lo, runtime::Duration hi, uint64_t seed = 1) {
  sim::SimOptions o;
  o.seed = seed;
  o.network.latency = runtime::LatencyModel::uniform(lo, hi);
  return o;
}

}  // namespace dagsim::conformance
