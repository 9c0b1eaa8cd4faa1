// ElasticAgent: one node's torchrun agent (PyTorch's SimpleElasticAgent._invoke_run;
// shared/reference/rendezvous.md §5): runs rendezvous, starts the worker group with the round's
// rank and world, monitors it, and restarts it on failure (counted against max_restarts) or when
// nodes are waiting (not counted); on success it runs the exit barrier. Beyond PyTorch, it also
// restarts (not counted) when the monitor's sync finds its round gone from the state: a store that
// restarted empty, or this node removed as dead after a pause. PyTorch's agent would train on as
// a member of nothing, and its peers would wait for it for ever.
//
// The worker group is a WorkerGroup (worker_group.h): a fiber, simulated processes or real ones.
// After each rendezvous, the round's agents publish their role and local world size under the
// round's keys in the store, and group rank 0 its master address (PyTorch's _assign_worker_ranks
// and _set_master_addr_port); every agent computes its workers' ranks from them
// (assign_worker_ranks) and starts its group with them and TORCHELASTIC_RESTART_COUNT's count. A
// restart stops the group (stop(): nothing of it runs past its round) and the node and its agent
// live on. The agent polls the group every monitor_interval, as PyTorch's loop does.
//
// run() returns an AgentResult instead of raising, and never hangs: every wait is bounded by the
// rendezvous's timeouts, the store's timeout or the exit barrier's. Outcomes:
//  - succeeded: the group succeeded and the exit barrier passed (or timed out: PyTorch logs it and
//    still succeeds; barrier_timed_out says so);
//  - failed: the group failed with max_restarts spent (worker_group_failed, naming the count and
//    the group's error), or a rendezvous call failed (its own error: timeout, store unreachable);
//  - closed: the rendezvous was closed (rendezvous_closed), found by next_rendezvous or, unlike
//    PyTorch's agent, by the monitor loop's own sync (PyTorch's agents learn it only when their
//    workers fail and they rendezvous again; here they stop at once);
//  - graceful_exit: a spare that found the rendezvous closed (PyTorch's run returns None).
//
// What run() does not do is the launcher's part (PyTorch's launch_agent `finally`): shutting the
// handler down (leave) or closing the rendezvous for the job. The caller decides: a SIGTERM'd agent
// leaves without closing (reference §4, #67742); a job that ended closes it (close_job()).
// Threading: a node fiber; the listener runs on it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/elastic/worker_group.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/env.h"
#include "core/store/store.h"

namespace dagsim::elastic {

using runtime::Duration;

struct ElasticAgentOptions {
  uint32_t max_restarts = 3;                                       // WorkerSpec's default
  // PyTorch 1.13's WorkerSpec says 30 s and torchrun 5 s; 0.1 s is later PyTorch's WorkerSpec
  // default, and what the simulated scenarios were written with.
  Duration monitor_interval = std::chrono::milliseconds(100);
  Duration exit_barrier_timeout = std::chrono::seconds(300);       // PyTorch's
  std::string role = "default";                                     // WorkerSpec's role
  uint32_t local_world_size = 1;                                    // workers per node (nproc_per_node)
  // Group rank 0's answer to "where do the workers meet" (PyTorch's _set_master_addr_port: the
  // agent's host and a free port), published to the round's other agents through the store. Unset:
  // no master is published and the workers get none (the simulated workloads need none).
  std::function<std::pair<std::string, uint16_t>()> master_endpoint = nullptr;
  // The static backend's: the workers' master is the agents' own store (MASTER_ADDR:MASTER_PORT),
  // and they are told so (TORCHELASTIC_USE_AGENT_STORE=True), as PyTorch's LocalElasticAgent does.
  bool use_agent_store = false;
};

enum class AgentOutcome : uint8_t { succeeded, failed, closed, graceful_exit };
const char* outcome_name(AgentOutcome outcome);

struct AgentResult {
  AgentOutcome outcome = AgentOutcome::failed;
  std::optional<Error> error;  // failed, closed, graceful_exit: why
  uint32_t restarts = 0;       // counted ones (worker failures), as PyTorch's remaining_restarts
  uint32_t rounds = 0;         // worker groups started
  bool barrier_timed_out = false;
  // PyTorch's put_metric values, the last of each name (see set_metric_listener).
  std::map<std::string, int64_t> metrics;
};

// What the agent did, for records and traces, in order.
struct AgentEvent {
  enum class Kind : uint8_t {
    group_started,      // info: the round's rank and world
    group_failed,       // detail: the worker's error; remaining: restarts left before it
    nodes_waiting,      // waiting: num_nodes_waiting() (a restart not counted)
    group_succeeded,
    exit_barrier,       // detail: "passed" or the barrier's error
    round_lost,         // detail: why the group's round is gone from the state, or why it could not
                        // start (a member that never published its role); a restart not counted
  };
  Kind kind = Kind::group_started;
  rendezvous::RendezvousInfo info;  // the group's round
  uint64_t waiting = 0;
  uint32_t remaining = 0;
  std::string detail;
};
const char* event_name(AgentEvent::Kind kind);

class ElasticAgent {
 public:
  // `env`, `handler` and `store` (the exit barrier's) outlive the agent. `run_id` scopes the
  // barrier's keys.
  ElasticAgent(runtime::Env& env, rendezvous::RendezvousHandler& handler, store::Store& store, std::string run_id,
               ElasticAgentOptions options, WorkerGroupFactory workers);
  // A worker group that is one fiber running `worker` (fiber_worker_group).
  ElasticAgent(runtime::Env& env, rendezvous::RendezvousHandler& handler, store::Store& store, std::string run_id,
               ElasticAgentOptions options, WorkerFn worker);
  ~ElasticAgent();
  ElasticAgent(const ElasticAgent&) = delete;
  ElasticAgent& operator=(const ElasticAgent&) = delete;

  void set_listener(std::function<void(const AgentEvent&)> listener) { listener_ = std::move(listener); }
  // Each metric as PyTorch's agent puts it (put_metric(name, value)), in order: every monitor tick
  // "workers.<role>.remaining_restarts" and "workers.<role>.<state>" (1, the state's name in lower
  // case); when a group run ends in success or in failure with the restarts spent (PyTorch's
  // _record_metrics), "workers.<role>.flakiness" (100 on failure, else
  // 100 - 100 * (remaining + 1) / (max_restarts + 1), truncated), "run_total" (1) and the four
  // outcome flags run_{success,failed}_{with,no}_retries (1 for the one that holds, 0 for the
  // others). A rendezvous error or a closed job records none, as PyTorch's raise does.
  void set_metric_listener(std::function<void(const std::string&, int64_t)> listener) {
    metric_listener_ = std::move(listener);
  }

  // PyTorch's run(). Blocks the calling fiber; a cancelled caller (SIGTERM: its scope cancelled)
  // unwinds from it with its worker group stopped.
  AgentResult run();
  // Closes the rendezvous for every node, as the launcher does when the job ended (success, or
  // failure with restarts spent); false when the close failed with a rendezvous error.
  bool close_job();

  uint32_t remaining_restarts() const { return remaining_; }
  // The worker group's state, as PyTorch's agent keeps it (INIT while it rendezvouses).
  WorkerState state() const { return state_; }
  // The spec of the last group started (its round, ranks and environment's facts).
  const std::optional<WorkerGroupSpec>& group_spec() const { return spec_; }
  // While the exit barrier runs, its deadline; else nullopt. For an operator's "waiting until"
  // line; nothing decides on it.
  const std::optional<runtime::TimePoint>& exit_barrier_deadline() const { return barrier_deadline_; }

 private:
  struct Group;
  // next_rendezvous, the ranks, then the group; false (with `lost` set and a round_lost event) when
  // a member of the round did not publish its role in time, so the round cannot start (a restart,
  // not counted).
  bool initialize_workers(std::string& lost);
  // PyTorch's _share_and_gather and _get_master_addr_port: publishes this agent's role, local
  // world size (and group rank 0's master) under the round's keys and reads every member's;
  // false (with `lost` set) when a member has not published within the keep-alive expiry.
  bool gather_round(WorkerGroupSpec& spec, std::string& lost);
  void stop_workers();
  void restart_workers();
  // The store-based barrier of the round's group (PyTorch's _exit_barrier); false on time-out.
  bool exit_barrier(const rendezvous::RendezvousInfo& info, std::string& detail);
  void emit(AgentEvent event);
  void put_metric(const std::string& name, int64_t value);
  void record_metrics(bool failed);
  // Why the group's round is gone from the last synced state ("" while it is there).
  std::string round_lost(const rendezvous::RendezvousInfo& info) const;
  // Which member of the group has been missing from the synced state for longer than the
  // keep-alive expiry ("" while none has).
  std::string member_lost(Group& group);
  // The one place state_ changes: asserts the move is one the agent's life makes (see the .cc).
  void set_state(WorkerState next);

  runtime::Env& env_;
  rendezvous::RendezvousHandler& handler_;
  store::Store& store_;
  const std::string run_id_;
  const ElasticAgentOptions options_;
  WorkerGroupFactory workers_;
  std::function<void(const AgentEvent&)> listener_;
  std::function<void(const std::string&, int64_t)> metric_listener_;
  std::map<std::string, int64_t> metrics_;
  uint32_t remaining_;
  uint32_t rounds_ = 0;
  WorkerState state_ = WorkerState::init;
  std::optional<WorkerGroupSpec> spec_;
  std::optional<runtime::TimePoint> barrier_deadline_;
  std::unique_ptr<Group> group_;
};

}  // namespace dagsim::elastic
