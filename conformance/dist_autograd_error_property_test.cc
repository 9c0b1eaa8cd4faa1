// Distributed autograd's error paths over generated programs (issue 4, "beyond PyTorch": no
// hangs, no leaks), in the simulator over random networks and schedules:
//   - an RPC whose result is unused fails the backward by termination detection, naming the
//     statement, long before the timeout, and no pass or context is left on any worker;
//   - a backward function that throws on a remote node fails the backward with that node's error;
//   - a node killed or crashed at a random moment never hangs the program: it either finishes with
//     local autograd's gradients or fails naming the dead node (a crash seen by a forward call
//     through a relay may name the relay instead: RPC timeouts nest), within the RPC timeout, and
//     the survivors hold no context once cleanup has drained.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <functional>
#include <memory>

#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/program/program.h"
#include "conformance/autograd_cluster.h"
#include "conformance/program_gen.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using runtime::Duration;
using runtime::TimePoint;
using scenarios::Statement;
using scenarios::Via;

constexpr Duration kRpcTimeout = 5s;
constexpr Duration kBackwardTimeout = 30s;

// A node whose backward throws: the forward is a copy, its gradient an error.
std::vector<Tensor> failing_grad(rpc::CallContext&, const rpc::CallArgs& args) {
  struct Failing final : autograd::Node {
    autograd::variable_list apply(autograd::variable_list&&) override {
      throw errors::autograd_error("exploding gradient");
    }
    std::string_view name() const override { return "FailingBackward"; }
  };
  Tensor out = clone(detach(args.tensors.at(0)));
  auto node = std::make_shared<Failing>();
  node->add_next_edge(autograd::gradient_edge(args.tensors[0]));
  out.set_history(node, node->add_input_metadata(out));
  return {out};
}

rpc::FunctionRegistry make_registry() {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(registry);
  registry.add("failing_grad", &failing_grad);
  return registry;
}

struct Run {
  sim::SimWorld::Outcome outcome = sim::SimWorld::Outcome::finished;
  std::string failure;
  TimePoint ended{};
  scenarios::Gradients gradients;
  std::string leftovers;  // live workers still holding contexts or passes after the drain
};

// Runs `c` on worker0, with `faults` armed before the run; drains cleanup for 2 RPC timeouts.
Run run(const ProgramCase& c, const rpc::FunctionRegistry& registry,
        const std::function<void(sim::SimWorld&)>& faults = {}) {
  sim::SimOptions options;
  options.seed = c.seed;
  options.random_schedule = c.random_schedule;
  options.network.latency = runtime::LatencyModel::uniform(Duration{0}, c.latency_max);
  AutogradCluster cluster(options, static_cast<int>(c.workers), registry, rpc::RpcOptions{.default_timeout = kRpcTimeout, .limits = {}},
                          dist_autograd::DistEngineOptions{.backward_timeout = kBackwardTimeout,
                                                           .termination_probe_interval = c.probe_interval});
  sim::SimWorld& world = cluster.world;
  Run out;
  world.spawn_foreground(0, "program", [&] {
    try {
      out.gradients = scenarios::run_program_distributed(c.program, *cluster.agents[0], *cluster.autograd[0]).gradients;
    } catch (const std::exception& e) {
      out.failure = e.what();
    }
    out.ended = world.now();
  });
  if (faults) faults(world);
  out.outcome = world.run({.max_virtual_time = TimePoint{std::chrono::minutes(10)}});
  RC_LOG() << world.stuck_report();
  world.run({.stop_at = world.now() + 2 * kRpcTimeout});
  for (uint32_t i = 0; i < c.workers; ++i) {
    if (world.state(static_cast<WorkerId>(i)) != sim::NodeState::up) continue;
    const dist_autograd::DebugInfo info = cluster.autograd[i]->debug_info();
    if (info.num_autograd_contexts + info.num_current_backward_passes > 0) {
      out.leftovers += "worker" + std::to_string(i) + ": " + std::to_string(info.num_autograd_contexts) + " context(s), " +
                       std::to_string(info.num_current_backward_passes) + " pass(es); ";
    }
  }
  RC_LOG() << "failure: " << out.failure << "\nleftovers: " << out.leftovers << "\n";
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Inserts `s` among the program's statements before its loss (the last statement).
void insert_before_loss(scenarios::Program& p, Statement s) {
  const size_t at = *rc::gen::inRange<size_t>(0, p.statements.size());
  p.statements.insert(p.statements.begin() + static_cast<std::ptrdiff_t>(at), std::move(s));
}

RC_GTEST_PROP(DistAutogradErrorProperties, AnUnusedRpcIsNamedAndFailsEveryWorkerInsteadOfHanging, ()) {
  ProgramCase c = *gen_program_case();
  // t0 always requires grad, so the call is recorded; nothing reads its result.
  insert_before_loss(c.program, Statement{{"unused_rpc"}, *rc::gen::element<std::string>("neg", "tanh"), {"t0"}, {},
                                          *rc::gen::element(Via::rpc_sync, Via::rpc_async),
                                          *rc::gen::inRange<uint32_t>(0, c.workers)});
  RC_LOG() << c;
  const Run r = run(c, make_registry());
  RC_ASSERT(r.outcome == sim::SimWorld::Outcome::finished);
  RC_ASSERT(contains(r.failure, "can never finish"));
  RC_ASSERT(contains(r.failure, "'unused_rpc' (autograd message id"));
  RC_ASSERT(r.ended < TimePoint{kBackwardTimeout});
  RC_ASSERT(r.leftovers.empty());
}

RC_GTEST_PROP(DistAutogradErrorProperties, AThrowingRemoteBackwardFailsWithThatNodesError, ()) {
  ProgramCase c = *gen_program_case();
  const auto node = *rc::gen::inRange<uint32_t>(1, c.workers);
  // loss2 = loss + sum(failing_grad(t0) on `node`): the failing function is on the gradient path.
  c.program.statements.push_back(Statement{{"boom"}, "failing_grad", {"t0"}, {}, Via::rpc_sync, node});
  c.program.statements.push_back(Statement{{"boom_sum"}, "sum", {"boom"}, {}, Via::local, 0});
  c.program.statements.push_back(Statement{{"loss2"}, "add", {"loss", "boom_sum"}, {}, Via::local, 0});
  c.program.roots = {"loss2"};
  RC_LOG() << c;
  const Run r = run(c, make_registry());
  RC_ASSERT(r.outcome == sim::SimWorld::Outcome::finished);
  RC_ASSERT(contains(r.failure, "Error on Node " + std::to_string(node) + ": exploding gradient"));
  RC_ASSERT(r.leftovers.empty());
}

RC_GTEST_PROP(DistAutogradErrorProperties, ANodeDeathNeverHangsAndIsNamed, ()) {
  ProgramCase c = *gen_program_case();
  const auto victim = static_cast<WorkerId>(*rc::gen::inRange<uint32_t>(1, c.workers));
  const bool crash = *rc::gen::arbitrary<bool>();
  const TimePoint at{std::chrono::microseconds(*rc::gen::inRange(0, 40000))};
  RC_LOG() << c << (crash ? "crash" : "kill") << " worker" << victim << " at " << at.since_epoch.count() / 1000 << " us\n";
  const rpc::FunctionRegistry registry = make_registry();
  const Run r = run(c, registry, [&](sim::SimWorld& world) {
    world.at(at, crash ? "crash" : "kill", [&world, victim, crash] { crash ? world.crash(victim) : world.kill(victim); });
  });
  RC_ASSERT(r.outcome == sim::SimWorld::Outcome::finished);
  if (r.failure.empty()) {
    // The victim was not needed, or its part was done: the gradients are still local autograd's.
    const scenarios::Gradients expected = scenarios::run_program_locally(c.program, registry).gradients;
    RC_ASSERT(r.gradients.size() == expected.size());
    for (const auto& [name, grad] : expected) RC_ASSERT(allclose(r.gradients.at(name), grad));
  } else {
    const std::string id = std::to_string(victim);
    const bool named = contains(r.failure, "worker" + id) || contains(r.failure, "node " + id) || contains(r.failure, "Node " + id);
    // A forward call or RRef fetch that reached the silent victim through another worker (a relay,
    // or a remote call whose RRef argument the victim owns) times out at its caller first, naming
    // the worker it called (RPC timeouts nest): the one case that need not name it.
    const bool forward_timeout =
        (contains(r.failure, "rpc '") || contains(r.failure, "RRef fetch")) && contains(r.failure, "timed out");
    RC_ASSERT(named || (crash && forward_timeout));
    // A kill is seen within about a latency, a crash by the RPC timeout (and the probe's).
    RC_ASSERT(r.ended <= at + 2 * kRpcTimeout + 1s);
  }
  RC_ASSERT(r.leftovers.empty());
}

}  // namespace
}  // namespace dagsim::conformance
