// SimulatedWorkerProcesses: a WorkerGroup of scripted worker processes in virtual time, so the
// elastic agent that `dagsim launch` runs over real processes is proven first in the simulator,
// with the failures real workers have: a crash (a signal), a non-zero exit, a hang, a slow start,
// a process that ignores SIGTERM and is killed at the end of the grace.
//
// Each worker follows a SimulatedWorker, chosen by the script for its group (round, restart count)
// and local rank. It starts `start_delay` after the group, runs `run_time`, then ends as its script
// says (a hang never ends). Nothing runs on a fiber: poll() reads the clock, so the group costs no
// stack and replays exactly. stop() is SIGTERM then SIGKILL: workers that honour SIGTERM end at
// once; one that ignores it holds stop() for the whole grace, as a real one would.
//
// Each worker's environment is the one `dagsim launch` would give it (worker_environment), kept
// for tests to read: the simulated agent and the real one compute it the same way.
//
// Threading: the agent's fibers (the node's clock).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/elastic/worker_group.h"
#include "core/runtime/clock.h"

namespace dagsim::elastic {

struct SimulatedWorker {
  // unhealthy: alive but reported UNHEALTHY from its run time on (PyTorch's monitor can say so;
  // the agent restarts it as a failure), until stopped.
  enum class End : uint8_t { exit, signal, hang, unhealthy };
  runtime::Duration start_delay{};                     // a slow start
  runtime::Duration run_time = std::chrono::seconds(1);
  End end = End::exit;
  int exit_code = 0;           // End::exit: 0 is success
  int signal = 9;              // End::signal: SIGKILL by default (an OOM kill)
  bool ignores_sigterm = false;
};

// The script: what worker `local_rank` of the group `spec` does.
using SimulatedWorkerScript = std::function<SimulatedWorker(const WorkerGroupSpec& spec, uint32_t local_rank)>;

struct SimulatedGroupRecord {
  WorkerGroupSpec spec;
  std::vector<Environment> environments;  // [local rank]
  runtime::TimePoint started{};
  std::optional<runtime::TimePoint> stopped;  // when stop() returned
};

class SimulatedWorkerProcesses final : public WorkerGroup {
 public:
  // `records` (optional) gets the group's record when it starts, updated when it stops.
  SimulatedWorkerProcesses(runtime::Clock& clock, const WorkerGroupSpec& spec, const SimulatedWorkerScript& script,
                           runtime::Duration grace, const Environment& agent_env, std::vector<SimulatedGroupRecord>* records);

  WorkerGroupStatus poll() override;
  void stop() override;

 private:
  struct Worker {
    SimulatedWorker script;
    bool stopped = false;  // ended by stop()
  };
  // When worker `w` ends by its script (nullopt: a hang).
  std::optional<runtime::TimePoint> end_of(const Worker& w) const;

  runtime::Clock& clock_;
  const WorkerGroupSpec spec_;
  const runtime::Duration grace_;
  const runtime::TimePoint started_;
  std::vector<Worker> workers_;
  std::vector<SimulatedGroupRecord>* records_;
  size_t record_ = 0;
};

// A factory for ElasticAgent: every group it starts is simulated with `script`, and appended to
// `records` when given.
WorkerGroupFactory simulated_worker_group(runtime::Clock& clock, SimulatedWorkerScript script, runtime::Duration grace,
                                          Environment agent_env = {}, std::vector<SimulatedGroupRecord>* records = nullptr);

}  // namespace dagsim::elastic
