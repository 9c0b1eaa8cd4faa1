// DistGradsEqualLocalOnSimGpus (issue 27): the generated programs of the gradient property, with
// leaves and statements placed on the workers' simulated GPUs (cpu, cuda:0 or cuda:1 each), GPU
// tensors sent through identity device maps, and each GPU's streams running late by seeded
// delays, give local autograd's gradients. And the planted bug: the same programs with the
// receiver's stream not waiting for the copy that placed an incoming tensor on its GPU
// (RpcOptions::skip_copy_event_wait) fail the property: the sim GPU poisons the racy reads, so
// the missing wait shows as wrong gradients instead of passing by luck.
#include <gtest/gtest.h>

#include <rapidcheck/gtest.h>

#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/program/program.h"
#include "conformance/autograd_cluster.h"
#include "conformance/program_gen.h"

namespace dagsim::conformance {
namespace {

using runtime::Duration;
using scenarios::Statement;
using scenarios::Via;

constexpr int kGpus = 2;

struct GpuCase {
  ProgramCase base;
  device::SimGpuDelays delays;
};

// Places a generated program on GPUs. Remote calls and calls with RRef arguments stay on the cpu
// (an RRef's value lives where its owner made it, and an op cannot mix it with GPU tensors); the
// accumulation into the loss is on the cpu; everything else goes to a random device of its
// worker, its arguments moved there first.
rc::Gen<GpuCase> gen_gpu_case() {
  return rc::gen::exec([] {
    GpuCase c{*gen_program_case(), {}};
    const auto random_device = [] {
      const int d = *rc::gen::inRange(-1, kGpus);
      return d < 0 ? Device::cpu() : Device::cuda(d);
    };
    for (scenarios::ProgramTensor& t : c.base.program.tensors) t.device = random_device();
    for (Statement& s : c.base.program.statements) {
      if (s.call == scenarios::kToHere) continue;
      const bool accumulation = s.out().starts_with("acc") || s.out() == "loss";
      s.device = (s.via == Via::remote || !s.rrefs.empty() || accumulation) ? Device::cpu() : random_device();
    }
    c.delays.kernel_min_ns = *rc::gen::inRange<int64_t>(0, 5'000);
    c.delays.kernel_max_ns = c.delays.kernel_min_ns + *rc::gen::inRange<int64_t>(0, 50'000);
    c.delays.copy_min_ns = *rc::gen::inRange<int64_t>(1'000, 10'000);
    c.delays.copy_max_ns = c.delays.copy_min_ns + *rc::gen::inRange<int64_t>(0, 100'000);
    return c;
  });
}

// Whether the case's distributed gradients equal the local oracle's (a message says how not).
std::string run_gpu_case(const GpuCase& c, bool skip_copy_event_wait) {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(registry);
  const scenarios::Gradients expected = scenarios::run_program_locally(c.base.program, registry).gradients;

  rpc::RpcOptions rpc_options;
  rpc::DeviceMap identity;
  for (int g = 0; g < kGpus; ++g) identity[Device::cuda(g)] = Device::cuda(g);
  for (uint32_t w = 0; w < c.base.workers; ++w) {
    rpc_options.device_maps[w] = identity;
    rpc_options.reverse_device_maps[w] = identity;
  }
  rpc_options.skip_copy_event_wait = skip_copy_event_wait;
  sim::SimOptions options;
  options.seed = c.base.seed;
  options.random_schedule = c.base.random_schedule;
  options.network.latency = runtime::LatencyModel::uniform(Duration{0}, c.base.latency_max);
  AutogradCluster cluster(options, static_cast<int>(c.base.workers), registry, rpc_options,
                          dist_autograd::DistEngineOptions{.termination_probe_interval = c.base.probe_interval}, kGpus,
                          c.delays);
  scenarios::Gradients actual;
  std::string failure;
  cluster.world.spawn_foreground(0, "program", [&] {
    try {
      actual = scenarios::run_program_distributed(c.base.program, *cluster.agents[0], *cluster.autograd[0]).gradients;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  const auto outcome = cluster.world.run({.max_virtual_time = runtime::TimePoint{std::chrono::minutes(10)}});
  if (outcome != sim::SimWorld::Outcome::finished) return "did not finish:\n" + cluster.world.stuck_report();
  if (!failure.empty()) return "failed: " + failure;
  if (actual.size() != expected.size()) return "gradients for " + std::to_string(actual.size()) + " of " + std::to_string(expected.size());
  for (const auto& [name, grad] : expected) {
    if (actual.count(name) == 0) return name + ": no gradient";
    if (!allclose(actual.at(name), grad)) {
      return name + ": distributed " + actual.at(name).to_string() + ", local " + grad.to_string();
    }
  }
  return {};
}

RC_GTEST_PROP(DistAutogradGpuProperties, DistGradsEqualLocalOnSimGpus, ()) {
  const GpuCase c = *gen_gpu_case();
  RC_LOG() << c.base << "delays: kernel " << c.delays.kernel_min_ns << ".." << c.delays.kernel_max_ns << " ns, copy "
           << c.delays.copy_min_ns << ".." << c.delays.copy_max_ns << " ns\n";
  bool on_gpu = false;
  for (const Statement& s : c.base.program.statements) on_gpu = on_gpu || (s.device && s.device->is_cuda());
  RC_CLASSIFY(on_gpu, "statements on a GPU");
  const std::string failure = run_gpu_case(c, false);
  RC_LOG() << failure << "\n";
  RC_ASSERT(failure.empty());
}

// The planted bug: the property must find it. Its cases are the same generator's, so this also
// shows the property's cases do send GPU tensors over RPC.
TEST(DistAutogradGpuProperties, APlantedMissingCopyWaitIsCaught) {
  const bool held = rc::check("gradients equal local with the copy wait skipped", [] {
    const GpuCase c = *gen_gpu_case();
    RC_ASSERT(run_gpu_case(c, /*skip_copy_event_wait=*/true).empty());
  });
  EXPECT_FALSE(held) << "the property did not catch a receiver that never waits for its copy";
}

}  // namespace
}  // namespace dagsim::conformance
