// ProgramWorkload: the `program` workload and the `model` + `train` workload, which the loader
// compiles into a program (DESIGN.md, "Scenarios"; issue 4). Every node runs an RPC agent with
// distributed autograd, an optimizer host and the gradient service (fresh per incarnation); the
// driver runs the program in a foreground fiber, one distributed autograd context per backward
// call, and the run ends when it has.
//
// Records: the driver's first incarnation records what distributed autograd produced
// ({"finished", "error"?, "gradients", "params", "losses"}, tensors exact); every incarnation
// still running at the end records the autograd contexts it holds ("contexts_at_end").
//
// The judge (ProgramJudge) runs the same program on the local engine as the oracle, from the
// scenario and seed alone, and compares. Results: `gradients` (what distributed autograd
// accumulated, {owner: {name: nested list}}: leaf tensors under the driver, parameters under their
// owner), `local_gradients` (the oracle's, same shape), `params` and `local_params`, `losses` and
// `local_losses` (per backward call, when the program records a loss), `workload` ("program" or
// "model") and the program's error if it failed (and the oracle's, if it failed). Checks:
// gradients_match_local and params_match_local (allclose, rtol 1e-9 / atol 1e-12 unless given),
// no_leaked_contexts (no context on any live node once cleanup traffic has drained), expect_error
// (the program failed with a message containing the given text).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/optim/distributed_optimizer.h"
#include "scenarios/workloads/program/program.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

extern const WorkloadType kProgramWorkload;
extern const WorkloadType kModelWorkload;

// What a workload whose nodes run distributed autograd waits for once its work is done (program,
// model and elastic): release messages chain from worker to worker, so several latencies and a
// connection timeout; and a node is settled when it holds no context (or runs no autograd).
runtime::Duration autograd_drain_time(const Scenario& scenario);
bool autograd_settled(const dist_autograd::DistAutograd* autograd);

// The program a program or model scenario runs.
const Program& program_of(const Scenario& scenario);

class ProgramWorkload final : public Workload {
 public:
  ProgramWorkload(const Scenario& scenario, uint64_t seed);
  ~ProgramWorkload() override;

  void node_main(NodeContext& node) override;
  std::optional<runtime::TimePoint> end_time() const override { return std::nullopt; }
  runtime::Duration drain_time() const override;
  // No distributed autograd context left on the node's current life.
  bool settled(uint32_t node) const override;
  void release_nodes() override;

 private:
  struct NodeState {
    std::unique_ptr<rpc::RpcAgent> agent;
    std::unique_ptr<dist_autograd::DistAutograd> autograd;
    std::unique_ptr<optim::OptimizerHost> optimizer_host;
  };

  const Scenario& scenario_;
  Program program_;  // with seeded values materialised
  rpc::FunctionRegistry registry_;
  std::vector<std::vector<NodeState>> nodes_;  // [node][incarnation]
};

class ProgramJudge final : public Judge {
 public:
  ProgramJudge(const Scenario& scenario, const RunRecords& records);

  CheckResult gradients_match_local(const CheckSpec& spec) const;
  CheckResult params_match_local(const CheckSpec& spec) const;
  CheckResult no_leaked_contexts(const CheckSpec& spec) const;
  CheckResult expect_error(const CheckSpec& spec) const;
  nlohmann::json results(const ReportOptions& options) const override;

 private:
  const Scenario& scenario_;
  const RunRecords& records_;
  Program program_;  // materialised with the run's seed
  ProgramResult distributed_;
  ProgramResult local_;
  std::optional<std::string> error_;        // the distributed program's
  std::optional<std::string> local_error_;  // the oracle's
  bool finished_ = false;
};

// `t` exactly, for records: {"dtype", "shape", "values"} (non-finite values as strings).
nlohmann::json tensor_record(const Tensor& t);
// The tensor tensor_record wrote. Throws Error(invalid_records) naming `what`.
Tensor tensor_from_record(const nlohmann::json& j, const std::string& what);

}  // namespace dagsim::scenarios
