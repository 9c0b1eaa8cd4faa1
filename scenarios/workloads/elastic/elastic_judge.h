// ElasticJudge: an elastic run judged from its records alone (elastic_workload.h says what they
// hold).
//
// Checks:
//  - params_match_local: the last checkpoint's parameters (the store's; or, when the store died,
//    the latest commit a rank 0 recorded) equal the same model trained on the local engine
//    for the same number of steps (allclose; rtol 1e-9, atol 1e-12 unless given);
//  - no_step_twice: the store committed steps 1, 2, 3, ... each exactly once and in order across
//    all its lives, nothing else was written to the checkpoint, and every commit a rank 0 was told
//    of is in the store's history (none lost);
//  - all_steps_committed: the job's last step committed, the run finished (not at its time
//    limit), and no agent ended failed;
//  - restarts: each agent counted its restarts as PyTorch does: a failed group restarts while
//    restarts remain, each decrementing them by one; a restart for waiting nodes counts nothing;
//    an agent ends failed with worker_group_failed exactly when a group failed with none left;
//  - expect_error: the job ended with an agent's error containing `message`.
// Results: `rendezvous` (the rounds, as the rendezvous workload reports them: store_life, round,
// world, members as {node, rank}, removed as {node, at_ms, why}, and start_step, the committed
// step the round started from), `elastic` (steps, committed, agents' outcomes and restarts), `params` and
// `local_params`, and `timeline`, what happened round by round in words (the text report's).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/workloads/elastic/elastic_training.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

class ElasticJudge final : public Judge {
 public:
  // Throws Error(invalid_records) naming the node and key of a malformed record.
  ElasticJudge(const Scenario& scenario, const RunRecords& records);

  CheckResult params_match_local(const CheckSpec& spec) const;
  CheckResult no_step_twice(const CheckSpec& spec) const;
  CheckResult all_steps_committed(const CheckSpec& spec) const;
  CheckResult restarts(const CheckSpec& spec) const;
  CheckResult expect_error(const CheckSpec& spec) const;
  nlohmann::json results(const ReportOptions& options) const override;
  // Each agent life's rounds (member with its rank), the steps its rank 0 drove, and each restart.
  std::vector<WorkloadSpan> spans() const override;

 private:
  struct Event {
    int64_t t = 0;
    std::string event;
    uint64_t round = 0;
    uint32_t rank = 0, world = 0;
    uint64_t waiting = 0;
    uint32_t remaining = 0;
    std::string detail;
  };
  struct Group {
    int64_t t = 0;
    uint64_t store_life = 0;
    uint64_t round = 0;
    uint32_t rank = 0, world = 0;
    std::vector<std::string> members;
    std::optional<uint64_t> start_step;
  };
  struct Commit {
    int64_t t = 0;
    uint64_t step = 0, round = 0, version = 0;
    double loss = 0;  // the step's loss, as its rank 0 computed it
  };
  struct Result {
    std::string outcome, error, code;
    uint32_t restarts = 0;
    int64_t t = 0;
  };
  struct AgentLife {
    std::string name;  // "worker3" or "worker3 (life 2)"
    uint32_t node = 0;  // the node's index
    uint32_t life = 0;  // the node's incarnation
    std::optional<int64_t> started;  // when the agent began (a late join waits for its time first)
    std::vector<Event> events;
    std::vector<Group> groups;
    std::vector<Commit> commits;
    std::optional<Result> result;
    bool died = false;  // a later life exists, or the node ended killed or crashed
  };
  struct StoreWrite {
    int64_t t = 0;
    uint64_t version = 0;
    uint32_t life = 0;
    std::optional<uint64_t> step, round;
    std::string problem;  // a deletion or a foreign value
  };

  // "1.234 s", for details and the timeline.
  static std::string seconds(int64_t ns);

  struct LocalTraining {
    uint64_t steps = 0;
    std::vector<Tensor> params;  // after the steps
    std::vector<double> losses;  // each step's
  };
  // The oracle's `steps` steps, trained once: params_match_local and the report both read them.
  const LocalTraining& local_training(uint64_t steps) const;
  // The timeline's stalls: stretches with no commit far longer than a step takes, each with what
  // ended it. `rounds` as results() gathers them, by (store life, round).
  std::vector<std::pair<int64_t, std::string>> stall_lines(
      const std::map<std::pair<uint64_t, uint64_t>, nlohmann::json>& rounds) const;
  // Who left `round` (as results() gathers it) while it was the newest, as the rendezvous workload
  // names them (`removed`: node, at_ms, why): a member whose node was killed or crashed, whose
  // agent ended other than succeeded (its outcome), or that `next` round left out.
  nlohmann::json left_round(const nlohmann::json& round, const nlohmann::json* next) const;

  const Scenario& scenario_;
  const RunRecords& records_;
  const ElasticSpec& spec_;
  ElasticModel model_;
  std::vector<AgentLife> agents_;
  std::vector<StoreWrite> writes_;  // every store life's, in order
  std::optional<uint64_t> final_step_;  // the store's last life's checkpoint, else the driver's below
  std::vector<Tensor> final_params_;
  std::optional<uint64_t> driver_final_step_;  // the latest commit a rank 0 recorded
  std::vector<Tensor> driver_final_params_;
  mutable std::optional<LocalTraining> local_;  // local_training's, for its steps
};

}  // namespace dagsim::scenarios
