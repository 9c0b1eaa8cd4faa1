// WorkerGroup: the workers of one round as the elastic agent starts, watches and stops them
// (PyTorch 1.13's WorkerGroup and WorkerState, and the part of LocalElasticAgent behind
// _start_workers, _monitor_workers and _stop_workers). The agent (elastic_agent.h) owns the
// protocol: rendezvous, rank assignment, restarts, the exit barrier. A group only runs workers.
// Three kinds share the agent, so its logic is proven in the simulator before it runs processes:
//  - fiber_worker_group(): a worker function on a fiber of the node, in a CancelScope of its own
//    (the simulated training workloads);
//  - SimulatedWorkerProcesses (simulated_worker_processes.h): scripted worker processes in virtual
//    time that crash, hang, start slowly or exit non-zero;
//  - net::ProcessWorkerGroup: real worker processes (`dagsim launch`).
//
// What a group promises the agent:
//  - poll() never blocks and says what torchrun's monitor says: HEALTHY while any worker runs and
//    none failed, FAILED as soon as one failed (the failure names the first, by local and global
//    rank, and how it ended), SUCCEEDED once all ended well.
//  - stop() returns when nothing of the group runs any more (bounded: a group that needs a grace,
//    as processes do, takes at most its grace plus a kill).
//  - The destructor never waits: it cancels or kills what still runs (an agent unwinding from a
//    cancel, a node that died).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/elastic/worker_ranks.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/runtime/env.h"

namespace dagsim::elastic {

// PyTorch's WorkerState. The agent's group is INIT while it rendezvouses, HEALTHY once started,
// STOPPED after a stop for a restart, then SUCCEEDED or FAILED. UNHEALTHY and UNKNOWN are
// PyTorch's too: no group here reports them, and the agent acts on them as PyTorch's does (UNHEALTHY
// is restarted as FAILED; UNKNOWN ends the run).
enum class WorkerState : uint8_t { unknown, init, healthy, unhealthy, stopped, succeeded, failed };
const char* worker_state_name(WorkerState state);  // PyTorch's names: "HEALTHY", ...
// PyTorch's WorkerState.is_running: HEALTHY or UNHEALTHY.
inline bool is_running(WorkerState state) { return state == WorkerState::healthy || state == WorkerState::unhealthy; }

// What the agent gives the group of one round.
struct WorkerGroupSpec {
  rendezvous::RendezvousInfo info;
  std::vector<rendezvous::NodeDesc> members;  // [group rank]; addr "" where a member was gone at the start
  WorkerRound round;                          // role, run id, group rank and world, master, restart count
  std::vector<WorkerRanks> workers;           // [local rank]
};

struct WorkerGroupStatus {
  WorkerState state = WorkerState::healthy;  // healthy, succeeded or failed (unhealthy, unknown: see above)
  std::optional<Error> failure;              // failed (unhealthy, optional): why, naming the first worker
};

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;
  virtual WorkerGroupStatus poll() = 0;
  virtual void stop() = 0;
};

using WorkerGroupFactory = std::function<std::unique_ptr<WorkerGroup>(const WorkerGroupSpec& spec)>;

// A worker group that is one fiber running `worker`: returning is SUCCEEDED, throwing an Error is
// FAILED with that error. stop() cancels and joins the fiber.
using WorkerFn = std::function<void(const WorkerGroupSpec& group)>;
WorkerGroupFactory fiber_worker_group(runtime::Env& env, WorkerFn worker);

// How a process ended, as the agent says it: "exited with code 3", "was killed by signal 9
// (Killed)". `signal` 0: it exited with `exit_code`.
std::string describe_exit(int exit_code, int signal);

// The error of a failed worker, as the agent reports it: worker_group_failed naming the local and
// global rank, how it ended, and its own message when it left one (its error file).
Error worker_failure(const WorkerGroupSpec& spec, uint32_t local_rank, const std::string& how,
                     const std::string& message = "");

}  // namespace dagsim::elastic
