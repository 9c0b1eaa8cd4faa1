// ElasticWorkload: elastic training as a scenario (issue 12; elastic_spec.h says what the nodes
// do). The store node serves the built-in store; every other node runs an ElasticAgent over a
// RendezvousHandler, with an RPC agent, distributed autograd and an optimizer host that its worker
// groups train on (elastic_training.h). A node joins at once, or at its join action's time; a leave
// action is SIGTERM: the agent is cancelled, its group stopped, and it leaves the rendezvous
// without closing it for the others (PyTorch #67742). Each agent lives the life `dagsim launch`
// lives (core/elastic/agent_life.h): when its run ends with the job's end (the close rule: success,
// or a failure with max_restarts spent) it closes the rendezvous for every node; in every case it
// then leaves (the exit op) and departs from its last round.
//
// Records, all on the scenario's clock:
//  - the store node: "checkpoints", each committed write of the checkpoint key ({"t", "v", "step",
//    "round"}), in the store's own order; "final", the last checkpoint ({"step", "round", "params"
//    as tensor records}) when the run ends with the store alive;
//  - each agent incarnation: "node" (its name), "events" (the agent's: {"t", "event", "round",
//    "rank", "world", "waiting"?, "remaining"?, "detail"?}), "groups" ({"t", "round", "rank",
//    "world", "members", "start_step"?} per group started; start_step from rank 0), "commits"
//    ({"t", "step", "round", "v", "loss"}, rank 0's) and "result" ({"outcome", "restarts",
//    "rounds", "error"?, "code"?, "closed_job"? (present when the close rule held: whether the
//    close succeeded)}, or {"outcome": "left"} after a leave), absent while it ran;
//    and "final", as the store node's, the last commit its rank 0 made (when the job's last step
//    commits, and at the end while the incarnation lives): the committed parameters outlive a
//    store that dies.
#pragma once

#include <deque>
#include <optional>
#include <memory>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/elastic/elastic_agent.h"
#include "core/optim/distributed_optimizer.h"
#include "core/rpc/rpc_agent.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"
#include "scenarios/workloads/elastic/elastic_training.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

extern const WorkloadType kElasticWorkload;

class ElasticWorkload final : public Workload {
 public:
  ElasticWorkload(const Scenario& scenario, uint64_t seed);
  ~ElasticWorkload() override;

  void node_main(NodeContext& node) override;
  std::optional<runtime::TimePoint> end_time() const override { return std::nullopt; }
  runtime::Duration drain_time() const override;
  bool settled(uint32_t node) const override;
  void release_nodes() override;

 private:
  struct Life {
    std::unique_ptr<rpc::RpcAgent> agent;
    std::unique_ptr<dist_autograd::DistAutograd> autograd;
    std::unique_ptr<optim::OptimizerHost> optimizer_host;
    std::unique_ptr<store::StoreService> service;
    std::unique_ptr<store::Store> client;
    std::unique_ptr<rendezvous::RendezvousHandler> handler;
    std::unique_ptr<elastic::ElasticAgent> elastic;
    std::unique_ptr<runtime::CancelScope> agent_scope;  // cancelled by a leave action (SIGTERM)
    rpc::Bytes last_checkpoint;                         // the store node's
    std::optional<Checkpoint> last_commit;              // an agent's: its rank 0's last commit
  };
  void run_store(NodeContext& node, Life& life);
  void run_agent(NodeContext& node, Life& life);
  // The round's members as nodes of the scenario; throws invalid_argument for one it does not name.
  std::vector<WorkerId> resolve(const std::vector<rendezvous::NodeDesc>& members) const;

  const Scenario& scenario_;
  const ElasticSpec& spec_;
  ElasticModel model_;
  rpc::FunctionRegistry registry_;
  std::vector<std::deque<Life>> lives_;  // by node, then incarnation
};

}  // namespace dagsim::scenarios
