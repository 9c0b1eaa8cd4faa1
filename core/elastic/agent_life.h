// AgentLife: the whole life of one elastic agent, from its first join to its departure, as one
// piece of code. `dagsim launch` (launch/launcher.h) lives it over real worker processes; the
// simulated elastic workload and the simulated-launcher property (conformance/) live it over fiber
// and simulated workers, so the rule a real job ends by is the rule the simulator proves.
//
// A life, in order (PyTorch's launch_agent with its `finally`, less the close on SIGTERM):
//  1. run: ElasticAgent::run() inside the agent's CancelScope. A cancelled scope is SIGTERM: the
//     agent unwinds with its worker group stopped.
//  2. after_run (the caller's hook, optional): what must happen once no group of this agent runs
//     any more, before the rendezvous hears of it (the launcher stops orphaned workers with their
//     grace; the simulated node refuses calls, as a process whose workers are gone).
//  3. A life that was cancelled leaves: shutdown() (the exit op) and nothing else, never a close
//     (PyTorch #67742): the others re-form without it.
//  4. Otherwise: the job is closed for every node when closes_job(result) (the close rule below),
//     the handler shuts down (exit op), and the agent departs: it adds itself to its last round's
//     departed count in the store. An agent that serves the store (`serves_store`) then lingers
//     until every member of that round has departed or `linger` ran out, so the others' last
//     store calls (exit barrier, close, exit op, their own departure) find it there: a store gone
//     under them costs each a store timeout per call. The departure uses `depart_timeout` as the
//     store's timeout: its last use, and a store already gone costs little.
//
// The close rule (docs/invariants.md, "When the job is closed"), written once: an agent closes the
// rendezvous for every node exactly when its own job ended, that is when run() returned
//  - succeeded (its group succeeded; the exit barrier passed or timed out), or
//  - failed with worker_group_failed (a group failed with max_restarts spent, or in a state the
//    agent cannot act on).
// It does not close on a rendezvous error (a join that timed out, a store unreachable), on finding
// the rendezvous closed or on a graceful exit, nor when it was cancelled. PyTorch's launcher closes
// on every end but a signal: a late joiner whose join timed out, or an agent that lost the store
// for a moment, then ends a job the others are still training.
//
// Never hangs: every step is bounded by the agent's and the handler's own timeouts, the store's
// timeout and `linger`. Store and rendezvous errors after the run are swallowed (the life's end
// says what happened); a death of the node (node_killed) unwinds through it.
// Threading: a node fiber, outside the agent's scope.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/env.h"
#include "core/store/store.h"

namespace dagsim::elastic {

// The close rule (above): true when an agent whose run() returned `result` ends the job.
bool closes_job(const AgentResult& result);

struct AgentLifeOptions {
  bool serves_store = false;                                   // this agent's process hosts the store
  runtime::Duration linger = std::chrono::seconds(60);         // how long a store host waits for the others
  runtime::Duration depart_timeout = std::chrono::seconds(5);  // the store's timeout from the departure on
  runtime::Duration linger_poll = std::chrono::milliseconds(50);
};

struct AgentLifeEnd {
  std::optional<AgentResult> result;  // nullopt: cancelled (left on SIGTERM)
  bool left = false;                  // cancelled: shut down without closing or departing
  bool closed_job = false;            // closes_job(result) held and the close op succeeded
  bool close_failed = false;          // closes_job(result) held and the close op failed
  bool shut_down = false;             // shutdown() (the exit op) succeeded
  // The departed count of the last round when the life ended (0: never in a round, or the store
  // was gone); a store host that lingered to the end sees the round's world size.
  int64_t departed = 0;
};

class AgentLife {
 public:
  // `agent` runs over `handler`; `store` is the store the agent's exit barrier uses. All outlive
  // the life.
  AgentLife(runtime::Env& env, ElasticAgent& agent, rendezvous::RendezvousHandler& handler, store::Store& store,
            AgentLifeOptions options = {});

  // Runs the life on the calling fiber (outside `scope`); `scope` is the agent's: cancelling it is
  // SIGTERM. `after_run` (may be null) runs once run() has returned or unwound.
  AgentLifeEnd live(runtime::CancelScope& scope, const std::function<void()>& after_run = nullptr);

  // The store key an agent of `run_id` adds itself to when it departs from `round`.
  static std::string departed_key(const std::string& run_id, uint64_t round);

 private:
  // Step 4's departure: adds this agent to its last round's count; a store host lingers.
  int64_t depart();

  runtime::Env& env_;
  ElasticAgent& agent_;
  rendezvous::RendezvousHandler& handler_;
  store::Store& store_;
  const AgentLifeOptions options_;
};

}  // namespace dagsim::elastic
