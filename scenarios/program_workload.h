// ProgramWorkload: the `program` workload (DESIGN.md, "Scenarios"; issue 4). Every node runs an
// RPC agent with distributed autograd (a fresh pair per incarnation); the driver (node 0) runs the
// program in a foreground fiber, one distributed autograd context per backward call, and the run
// ends when it has. The same program on the local engine is the oracle.
//
// Results: `gradients` (what distributed autograd accumulated, {driver: {tensor: nested list}}),
// `local_gradients` (the oracle's, same shape), and the program's error if it failed. Checks:
// gradients_match_local (allclose, rtol 1e-9 / atol 1e-12 unless given), no_leaked_contexts (no
// context on any live node once cleanup traffic has drained), expect_error (the program failed
// with a message containing the given text).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
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


 private:
  struct NodeState {
    std::unique_ptr<rpc::RpcAgent> agent;
    std::unique_ptr<dist_autograd::DistAutograd> autograd;
  };

  const Scenario& scenario_;
  Program program_;  // with seeded values materialised
  rpc::FunctionRegistry registry_;
  sim::SimWorld* world_ = nullptr;
  std::vector<std::vector<NodeState>> nodes_;  // [node][incarnation]
  Gradients distributed_;
  Gradients local_;
  std::optional<std::string> error_;
  bool finished_ = false;
};

// `t` as nested JSON arrays following its shape (a scalar is a number).
nlohmann::json tensor_to_json(const Tensor& t);

}  // namespace dagsim::scenarios
