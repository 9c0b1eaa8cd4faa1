// DistGradsEqualLocal (issue 4): random programs, randomly placed on 2..6 workers with random
// `via`, nested calls (relays), shared inputs and unused local branches, run in the simulator
// over random networks and schedules, give the gradients local autograd gives (allclose, float64),
// and leave no autograd context behind once cleanup traffic has drained.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>

#include "core/dist_autograd/dist_autograd.h"
#include "scenarios/program.h"
#include "conformance/autograd_cluster.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using runtime::Duration;
using scenarios::Program;
using scenarios::Statement;
using scenarios::Via;

struct Case {
  Program program;
  uint32_t workers = 2;
  Duration latency_max{0};
  bool random_schedule = false;
  uint64_t seed = 1;
};

std::ostream& operator<<(std::ostream& out, const Case& c) {
  out << "workers=" << c.workers << " latency_max_us=" << c.latency_max.count() / 1000
      << " schedule=" << (c.random_schedule ? "random" : "fifo") << " seed=" << c.seed << "\n";
  for (const auto& t : c.program.tensors) out << "  tensor " << t.name << (t.requires_grad ? " (grad)" : "") << "\n";
  const char* via[] = {"local", "rpc_sync", "rpc_async"};
  for (const Statement& s : c.program.statements) {
    out << "  " << s.out << " = " << s.call << "(";
    for (size_t i = 0; i < s.args.size(); ++i) out << (i ? ", " : "") << s.args[i];
    out << ") via " << via[static_cast<int>(s.via)];
    if (s.via != Via::local) out << " on worker" << s.on;
    if (s.attributes.count("to")) out << " to worker" << s.attributes.at("to");
    out << "\n";
  }
  return out;
}

rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case c;
    c.workers = *rc::gen::inRange<uint32_t>(2, 7);
    c.latency_max = std::chrono::microseconds(*rc::gen::inRange(0, 5000));
    c.random_schedule = *rc::gen::arbitrary<bool>();
    c.seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
    Program& p = c.program;
    const int leaves = *rc::gen::inRange(1, 5);
    std::vector<std::string> names;
    for (int i = 0; i < leaves; ++i) {
      scenarios::ProgramTensor t;
      t.name = "t" + std::to_string(i);
      t.shape = {2, 3};
      for (int k = 0; k < 6; ++k) t.values.push_back(*rc::gen::inRange(-8, 9) / 4.0);
      t.requires_grad = i == 0 || *rc::gen::inRange(0, 4) != 0;
      p.tensors.push_back(t);
      names.push_back(t.name);
    }
    std::vector<std::string> rpc_outputs;
    const int statements = *rc::gen::inRange(5, 41);
    for (int i = 0; i < statements; ++i) {
      Statement s;
      s.out = "v" + std::to_string(i);
      const int kind = *rc::gen::inRange(0, 9);
      const char* binary[] = {"add", "sub", "mul"};
      const char* unary[] = {"neg", "tanh", "sigmoid"};
      const char* relay[] = {"relay_add", "relay_mul"};
      auto pick = [&] { return names[*rc::gen::inRange<size_t>(0, names.size())]; };
      if (kind < 4) {
        s.call = binary[kind % 3];
        s.args = {pick(), pick()};  // may repeat: shared inputs
      } else if (kind < 7) {
        s.call = unary[kind - 4];
        s.args = {pick()};
      } else {
        s.call = relay[kind - 7];
        s.args = {pick(), pick()};
        s.attributes["to"] = *rc::gen::inRange<uint32_t>(0, c.workers);
      }
      const bool nested = s.call.rfind("relay_", 0) == 0;
      const int via = nested ? *rc::gen::inRange(1, 3) : *rc::gen::inRange(0, 3);
      s.via = static_cast<Via>(via);
      if (s.via != Via::local) {
        s.on = *rc::gen::inRange<uint32_t>(1, c.workers);
        rpc_outputs.push_back(s.out);
      }
      names.push_back(s.out);
      p.statements.push_back(s);
    }
    // Every RPC result reaches the loss (an unused one is the hang case, tested on its own);
    // local results nobody uses are the unused branches that stay local.
    // Through t0 (which always requires grad) so the loss always has a graph.
    p.statements.push_back(Statement{"acc", "add", {names.back(), "t0"}, {}, Via::local, 0});
    std::string acc = "acc";
    for (size_t i = 0; i < rpc_outputs.size(); ++i) {
      Statement s{"acc" + std::to_string(i), "add", {acc, rpc_outputs[i]}, {}, Via::local, 0};
      acc = s.out;
      p.statements.push_back(s);
    }
    p.statements.push_back(Statement{"loss", "sum", {acc}, {}, Via::local, 0});
    p.roots = {"loss"};
    return c;
  });
}


bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-9, double atol = 1e-12) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

void check_case(const Case& c) {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(registry);
  const scenarios::Gradients expected = scenarios::run_program_locally(c.program, registry).gradients;

  sim::SimOptions options;
  options.seed = c.seed;
  options.random_schedule = c.random_schedule;
  options.network.latency = sim::LatencyModel::uniform(Duration{0}, c.latency_max);
  AutogradCluster cluster(options, static_cast<int>(c.workers), registry);
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
  // Let the release traffic drain, then no node may hold a context.
  world.run({.stop_at = world.now() + std::chrono::seconds(1)});
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

RC_GTEST_PROP(DistAutogradProperties, DistGradsEqualLocal, ()) { check_case(*gen_case()); }

// Many contexts at once on shared workers, as PyTorch's trainer/parameter-server test: 2..4
// trainers run their own programs concurrently, calling the same workers (each other included);
// every trainer's gradients equal its program's local ones and no context survives.
RC_GTEST_PROP(DistAutogradProperties, ConcurrentContextsOnSharedWorkers, ()) {
  const int trainers = *rc::gen::inRange(2, 5);
  const uint32_t workers = static_cast<uint32_t>(trainers) + *rc::gen::inRange<uint32_t>(1, 3);
  std::vector<Program> programs;
  for (int t = 0; t < trainers; ++t) {
    Case c = *gen_case();
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
  options.network.latency = sim::LatencyModel::uniform(Duration{0}, std::chrono::milliseconds(2));
  AutogradCluster cluster(options, static_cast<int>(workers), registry);
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
  world.run({.stop_at = world.now() + std::chrono::seconds(1)});
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
  Case c = *gen_case();
  c.program.retain_graph = true;
  c.program.backward_calls = 2;
  check_case(c);
}

}  // namespace
}  // namespace dagsim::conformance
