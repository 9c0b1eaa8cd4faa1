// SimulatedWorkerProcesses (simulated_worker_processes.h): scripted worker processes read off the clock.
#include "core/elastic/simulated_worker_processes.h"

#include <algorithm>

#include "core/base/assert.h"

namespace dagsim::elastic {

SimulatedWorkerProcesses::SimulatedWorkerProcesses(runtime::Clock& clock, const WorkerGroupSpec& spec,
                                                   const SimulatedWorkerScript& script, runtime::Duration grace,
                                                   const Environment& agent_env, std::vector<SimulatedGroupRecord>* records)
    : clock_(clock), spec_(spec), grace_(grace), started_(clock.now()), records_(records) {
  DAGSIM_ASSERT(script != nullptr);
  for (uint32_t rank = 0; rank < spec.workers.size(); ++rank) {
    Worker worker{script(spec, rank)};
    if (worker.script.start_delay < runtime::Duration::zero() || worker.script.run_time < runtime::Duration::zero()) {
      throw errors::invalid_argument("simulated worker " + std::to_string(rank) + ": negative start delay or run time");
    }
    workers_.push_back(worker);
  }
  if (records_ != nullptr) {
    SimulatedGroupRecord record;
    record.spec = spec;
    for (const WorkerRanks& worker : spec.workers) record.environments.push_back(worker_environment(agent_env, spec.round, worker));
    record.started = started_;
    record_ = records_->size();
    records_->push_back(std::move(record));
  }
}

std::optional<runtime::TimePoint> SimulatedWorkerProcesses::end_of(const Worker& w) const {
  if (w.script.end == SimulatedWorker::End::hang) return std::nullopt;
  return started_ + w.script.start_delay + w.script.run_time;
}

WorkerGroupStatus SimulatedWorkerProcesses::poll() {
  const runtime::TimePoint now = clock_.now();
  WorkerGroupStatus status;
  // The first failure by the time it ended, then by local rank (as real processes are reaped).
  std::optional<std::pair<runtime::TimePoint, uint32_t>> first;
  std::optional<uint32_t> unhealthy;
  size_t ended = 0;
  for (uint32_t rank = 0; rank < workers_.size(); ++rank) {
    const Worker& w = workers_[rank];
    const std::optional<runtime::TimePoint> end = end_of(w);
    if (w.stopped || !end || *end > now) continue;
    if (w.script.end == SimulatedWorker::End::unhealthy) {
      if (!unhealthy) unhealthy = rank;
      continue;  // it still runs
    }
    ++ended;
    const bool failed = w.script.end == SimulatedWorker::End::signal || w.script.exit_code != 0;
    if (failed && (!first || *end < first->first)) first = {*end, rank};
  }
  if (first) {
    const SimulatedWorker& w = workers_[first->second].script;
    const bool by_signal = w.end == SimulatedWorker::End::signal;
    status.state = WorkerState::failed;
    status.failure = worker_failure(spec_, first->second, describe_exit(by_signal ? -1 : w.exit_code, by_signal ? w.signal : 0));
  } else if (unhealthy) {
    status.state = WorkerState::unhealthy;
    status.failure = worker_failure(spec_, *unhealthy, "was reported UNHEALTHY");
  } else if (ended == workers_.size()) {
    status.state = WorkerState::succeeded;
  }
  return status;
}

void SimulatedWorkerProcesses::stop() {
  const runtime::TimePoint now = clock_.now();
  // SIGTERM: what runs and honours it ends now; what ignores it holds the stop for the grace.
  bool holds = false;
  for (Worker& w : workers_) {
    const std::optional<runtime::TimePoint> end = end_of(w);
    const bool running = !w.stopped && (!end || *end > now || w.script.end == SimulatedWorker::End::unhealthy);
    if (running && w.script.ignores_sigterm) holds = true;
    if (running) w.stopped = true;
  }
  if (holds) clock_.sleep(grace_);  // then SIGKILL, which nothing survives
  if (records_ != nullptr) (*records_)[record_].stopped = clock_.now();
}

WorkerGroupFactory simulated_worker_group(runtime::Clock& clock, SimulatedWorkerScript script, runtime::Duration grace,
                                          Environment agent_env, std::vector<SimulatedGroupRecord>* records) {
  DAGSIM_ASSERT(script != nullptr);
  return [&clock, script = std::move(script), grace, agent_env = std::move(agent_env),
          records](const WorkerGroupSpec& spec) -> std::unique_ptr<WorkerGroup> {
    return std::make_unique<SimulatedWorkerProcesses>(clock, spec, script, grace, agent_env, records);
  };
}

}  // namespace dagsim::elastic
