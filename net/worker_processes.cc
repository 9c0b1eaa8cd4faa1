#include "net/worker_processes.h"

#include <algorithm>
#include <csignal>

namespace dagsim::net {

std::string WorkerExit::describe() const { return elastic::describe_exit(exit_code, signal); }

WorkerProcesses::WorkerProcesses(const std::vector<WorkerProcessSpec>& specs) {
  for (size_t rank = 0; rank < specs.size(); ++rank) {
    const WorkerProcessSpec& spec = specs[rank];
    ProcessSpec process;
    process.argv = spec.argv;
    process.env = spec.env;
    process.stdout_path = spec.stdout_path;
    process.stderr_path = spec.stderr_path;
    process.name = "worker " + std::to_string(rank);
    // A worker that cannot start throws from here; the workers already started are killed and
    // reaped by their handles' destructors as the exception leaves.
    processes_.push_back(spawn(process));
  }
}

WorkerProcesses::~WorkerProcesses() {
  for (Process& p : processes_) p.kill();
  reap(true);
}

std::vector<pid_t> WorkerProcesses::pids() const {
  std::vector<pid_t> out;
  for (const Process& p : processes_) out.push_back(p.running() ? p.pid() : 0);
  return out;
}

void WorkerProcesses::reap(bool block) {
  for (uint32_t rank = 0; rank < processes_.size(); ++rank) {
    Process& p = processes_[rank];
    if (!p.running()) continue;
    const std::optional<ProcessExit> end = block ? std::optional<ProcessExit>(p.wait()) : p.poll();
    if (!end) continue;
    WorkerExit exit{rank, p.pid()};
    if (end->signal() != 0) {
      exit.signal = end->signal();
    } else {
      exit.exit_code = end->exit_code();
    }
    exited_.push_back(exit);
  }
}

WorkerGroupPoll WorkerProcesses::poll() {
  reap(false);
  WorkerGroupPoll result;
  result.exited = exited_;
  const auto failure = std::find_if(exited_.begin(), exited_.end(), [](const WorkerExit& e) { return e.failed(); });
  if (failure != exited_.end()) {
    result.state = elastic::WorkerState::failed;
    result.first_failure = *failure;
  } else if (exited_.size() == processes_.size()) {
    result.state = elastic::WorkerState::succeeded;
  }
  return result;
}

void WorkerProcesses::stop(runtime::Clock& clock, runtime::Duration grace) {
  for (Process& p : processes_) p.signal(SIGTERM);  // a no-op for those already reaped
  const runtime::TimePoint until = clock.now() + grace;
  const auto live = [&] { return std::any_of(processes_.begin(), processes_.end(), [](const Process& p) { return p.running(); }); };
  for (reap(false); live() && clock.now() < until; reap(false)) {
    clock.sleep_until(std::min(until, clock.now() + std::chrono::milliseconds(10)));
  }
  for (Process& p : processes_) p.kill();
  reap(true);
}

}  // namespace dagsim::net
