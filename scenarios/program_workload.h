// ProgramWorkload: the `program` workload and the `model` + `train` workload, which the loader
// compiles into a program (DESIGN.md, "Scenarios"; issue 4). Every node runs an RPC agent with
// distributed autograd, an optimizer host and the gradient service (fresh per incarnation); the
// driver runs the program in a foreground fiber, one distributed autograd context per backward
// call, and the run ends when it has. The same program on the local engine is the oracle.
//
// Results: `gradients` (what distributed autograd accumulated, {owner: {name: nested list}}: leaf
// tensors under the driver, parameters under their owner), `local_gradients` (the oracle's, same
// shape), `params` and `local_params` (final parameter values, same shape), `losses` and
// `local_losses` (per backward call, when the program records a loss), `workload` ("program" or
// "model") and the program's error if it failed. Checks: gradients_match_local and
// params_match_local (allclose, rtol 1e-9 / atol 1e-12 unless given), no_leaked_contexts (no
// context on any live node once cleanup traffic has drained), expect_error (the program failed
// with a message containing the given text).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/optim/distributed_optimizer.h"
#include "scenarios/program.h"
#include "scenarios/workload.h"

namespace dagsim::scenarios {

class ProgramWorkload final : public Workload {
 public:
  ProgramWorkload(const Scenario& scenario, uint64_t seed);
  ~ProgramWorkload() override;

  sim::SimWorld::NodeMain node_main(uint32_t index) override;
  void install(sim::SimWorld& world) override { world_ = &world; }
  std::optional<runtime::TimePoint> end_time() const override { return std::nullopt; }
  runtime::Duration drain_time() const override;
  CheckResult check(const CheckSpec& spec, const sim::SimWorld& world) const override;
  nlohmann::json results(const sim::SimWorld& world) const override;
  void release_nodes() override;

  // For tests that prove the checks can fail (RunOptions::before_checks).
  ProgramResult& mutable_distributed_for_testing() { return distributed_; }

 private:
  struct NodeState {
    std::unique_ptr<rpc::RpcAgent> agent;
    std::unique_ptr<dist_autograd::DistAutograd> autograd;
    std::unique_ptr<optim::OptimizerHost> optimizer_host;
  };

  const Scenario& scenario_;
  Program program_;  // with seeded values materialised
  rpc::FunctionRegistry registry_;
  sim::SimWorld* world_ = nullptr;
  std::vector<std::vector<NodeState>> nodes_;  // [node][incarnation]
  ProgramResult distributed_;
  ProgramResult local_;
  std::optional<std::string> error_;
  bool finished_ = false;
};

// `t` as nested JSON arrays following its shape (a scalar is a number).
nlohmann::json tensor_to_json(const Tensor& t);

}  // namespace dagsim::scenarios
