// DistGradsEqualLocal (issue 4), and SMART mode's (issue 13): random programs, randomly placed on 2..6 workers with random
// `via`, nested calls (relays), shared inputs and unused local branches, run in the simulator
// over random networks and schedules, give the gradients local autograd gives (allclose, float64),
// and leave no autograd context behind once cleanup traffic has drained. Termination detection
// probes beside these healthy passes (down to every 100 us, below the latency) and must never
// declare one of them unfinishable.
#include <gtest/gtest.h>

#include <algorithm>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>

#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/program/program.h"
#include "conformance/autograd_cluster.h"
#include "conformance/program_gen.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using runtime::Duration;
// Long enough for every release to arrive and for a context left by a call that ran after its
// release to be attached and dropped (DistEngineOptions::attach_after).
const Duration kDrain = dist_autograd::DistEngineOptions{}.attach_after + 1s;
using scenarios::Program;
using scenarios::Statement;
using scenarios::Via;

void check_case(const ProgramCase& c) {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(registry);
  const scenarios::Gradients expected = scenarios::run_program_locally(c.program, registry).gradients;

  sim::SimOptions options;
  options.seed = c.seed;
  options.random_schedule = c.random_schedule;
  options.network.latency = runtime::LatencyModel::uniform(Duration{0}, c.latency_max);
  AutogradCluster cluster(options, static_cast<int>(c.workers), registry, {},
                          dist_autograd::DistEngineOptions{.termination_probe_interval = c.probe_interval});
  sim::SimWorld& world = cluster.world;
  scenarios::Gradients actual;
  std::string failure;
  world.spawn_foreground(0, "program", [&] {
    try {
      actual = scenarios::run_program_distributed(c.program, *cluster.agents[0], *cluster.autograd[0]).gradients;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  const auto outcome = world.run({.max_virtual_time = runtime::TimePoint{std::chrono::minutes(10)}});
  RC_LOG() << world.stuck_report();
  RC_ASSERT(outcome == sim::SimWorld::Outcome::finished);
  RC_LOG() << failure;
  RC_ASSERT(failure.empty());
  // Let the release traffic drain, then no node may hold a context. Past attach_after: a release
  // that a node's random schedule ran before the call it follows leaves the call's context until
  // the node attaches it and learns the originator released it (found by RapidCheck with
  // seed=17418599587619479929: an unused rpc.remote under SMART mode).
  world.run({.stop_at = world.now() + kDrain});
  for (uint32_t i = 0; i < c.workers; ++i) {
    RC_LOG() << "worker" << i << " holds " << cluster.autograd[i]->debug_info().num_autograd_contexts << " context(s)\n";
  }
  for (uint32_t i = 0; i < c.workers; ++i) RC_ASSERT(cluster.autograd[i]->debug_info().num_autograd_contexts == 0u);
  RC_ASSERT(actual.size() == expected.size());
  for (const auto& [name, grad] : expected) {
    RC_LOG() << name << ": distributed " << (actual.count(name) ? actual.at(name).to_string() : "missing") << " local "
             << grad.to_string();
    RC_ASSERT(actual.count(name) == 1u);
    RC_ASSERT(allclose(actual.at(name), grad));
  }
}

RC_GTEST_PROP(DistAutogradProperties, DistGradsEqualLocal, ()) {
  const ProgramCase c = *gen_program_case();
  const bool forks = std::any_of(c.program.statements.begin(), c.program.statements.end(),
                                 [](const Statement& s) { return !s.rrefs.empty() && s.call != scenarios::kToHere; });
  RC_CLASSIFY(forks, "RRef arguments");
  check_case(c);
}

// Many contexts at once on shared workers, as PyTorch's trainer/parameter-server test: 2..4
// trainers run their own programs concurrently, calling the same workers (each other included);
// every trainer's gradients equal its program's local ones and no context survives.
RC_GTEST_PROP(DistAutogradProperties, ConcurrentContextsOnSharedWorkers, ()) {
  const int trainers = *rc::gen::inRange(2, 5);
  const uint32_t workers = static_cast<uint32_t>(trainers) + *rc::gen::inRange<uint32_t>(1, 3);
  std::vector<Program> programs;
  for (int t = 0; t < trainers; ++t) {
    ProgramCase c = *gen_program_case();
    for (Statement& s : c.program.statements) {
      if (s.via != Via::local) s.on = *rc::gen::inRange<uint32_t>(0, workers);
      if (s.attributes.count("to")) s.attributes["to"] = *rc::gen::inRange<uint32_t>(0, workers);
    }
    programs.push_back(c.program);
  }
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(registry);
  sim::SimOptions options;
  options.seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  options.random_schedule = true;
  options.network.latency = runtime::LatencyModel::uniform(Duration{0}, std::chrono::milliseconds(2));
  // Termination detection probing all the time, beside every trainer's healthy passes.
  AutogradCluster cluster(options, static_cast<int>(workers), registry, {},
                          dist_autograd::DistEngineOptions{.termination_probe_interval = std::chrono::microseconds(200)});
  sim::SimWorld& world = cluster.world;
  std::vector<scenarios::Gradients> actual(static_cast<size_t>(trainers));
  std::vector<std::string> failures(static_cast<size_t>(trainers));
  for (int t = 0; t < trainers; ++t) {
    world.spawn_foreground(static_cast<WorkerId>(t), "trainer", [&, t] {
      try {
        actual[static_cast<size_t>(t)] = scenarios::run_program_distributed(
            programs[static_cast<size_t>(t)], *cluster.agents[static_cast<size_t>(t)], *cluster.autograd[static_cast<size_t>(t)])
            .gradients;
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(t)] = e.what();
      }
    });
  }
  RC_ASSERT(world.run({.max_virtual_time = runtime::TimePoint{std::chrono::minutes(10)}}) == sim::SimWorld::Outcome::finished);
  world.run({.stop_at = world.now() + kDrain});
  for (int t = 0; t < trainers; ++t) {
    RC_LOG() << "trainer " << t << ": " << failures[static_cast<size_t>(t)] << "\n";
    RC_ASSERT(failures[static_cast<size_t>(t)].empty());
    const scenarios::Gradients expected =
        scenarios::run_program_locally(programs[static_cast<size_t>(t)], registry).gradients;
    RC_ASSERT(actual[static_cast<size_t>(t)].size() == expected.size());
    for (const auto& [name, grad] : expected) RC_ASSERT(allclose(actual[static_cast<size_t>(t)].at(name), grad));
  }
  for (uint32_t i = 0; i < workers; ++i) RC_ASSERT(cluster.autograd[i]->debug_info().num_autograd_contexts == 0u);
}

RC_GTEST_PROP(DistAutogradProperties, DistGradsEqualLocalWithRetainedGraphs, ()) {
  ProgramCase c = *gen_program_case();
  c.program.retain_graph = true;
  c.program.backward_calls = 2;
  check_case(c);
}

// SMART mode (issue 13; PyTorch RFC #23110): the same programs with 1..4 RPCs whose results
// nobody uses (a unary op by rpc_sync, rpc_async or remote, or a relay through a third worker),
// in SMART mode and with the backward run 1..3 times in one context, give local autograd's
// gradients and leave nothing behind. FAST mode fails on such programs, naming the unused call
// (DistAutogradErrorProperties.AnUnusedRpcIsNamedAndFailsEveryWorkerInsteadOfHanging).
RC_GTEST_PROP(DistAutogradProperties, SmartModeGradsEqualLocalWithUnusedRpcs, ()) {
  ProgramCase c = *gen_program_case();
  const int unused = *rc::gen::inRange(1, 5);
  for (int k = 0; k < unused; ++k) {
    Statement s;
    s.outs = {"unused" + std::to_string(k)};
    s.on = *rc::gen::inRange<uint32_t>(0, c.workers);
    if (*rc::gen::inRange(0, 4) == 0) {
      s.call = "relay_mul";
      s.args = {"t0", "t0"};
      s.attributes["to"] = *rc::gen::inRange<uint32_t>(0, c.workers);
      s.via = *rc::gen::element(Via::rpc_sync, Via::rpc_async);
    } else {
      s.call = *rc::gen::element<std::string>("neg", "tanh", "exp");
      s.args = {"t0"};  // t0 always requires grad, so the call is recorded
      s.via = *rc::gen::element(Via::rpc_sync, Via::rpc_async, Via::remote);
    }
    const size_t at = *rc::gen::inRange<size_t>(0, c.program.statements.size());
    c.program.statements.insert(c.program.statements.begin() + static_cast<std::ptrdiff_t>(at), std::move(s));
  }
  c.program.smart = true;
  c.program.backward_repeat = *rc::gen::inRange<uint32_t>(1, 4);
  RC_LOG() << c << "smart, repeat " << c.program.backward_repeat << "\n";
  check_case(c);
}

}  // namespace
}  // namespace dagsim::conformance
