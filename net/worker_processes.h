// WorkerProcesses: the worker processes of one round of `dagsim launch`, as PyTorch 1.13's
// SubprocessContext runs a binary entrypoint for torchrun's agent: started together, each with its
// whole environment (worker_ranks.h builds it), in a process group of its own, with its standard
// output and error in files when asked; polled without blocking; stopped as torchrun stops them.
//
// What it promises:
//  - poll() never blocks: it reaps what has exited (waitpid WNOHANG) and says what torchrun's
//    monitor would: healthy while any runs and none failed, failed as soon as one exited non-zero
//    or by a signal (the first such exit, by time of reaping then local rank, is named), succeeded
//    once all exited 0.
//  - stop() sends SIGTERM to each live worker's process group (so what a worker started goes too),
//    waits up to `grace` on the caller's clock (the calling fiber sleeps between polls; no thread
//    blocks), then SIGKILLs the groups still there and reaps them. torchrun's default grace is
//    30 s.
//  - Nothing is left behind: the destructor SIGKILLs and reaps whatever still runs, and each worker
//    is started through net/process (process.h), so a SIGKILLed agent leaves no worker holding its
//    peers in a collective (torchrun's workers outlive it), nor anything a worker started (a
//    DataLoader's worker processes): a worker's leftovers also die when the worker ends.
//  - A worker that cannot start (no such program, not executable) fails the constructor with
//    invalid_argument naming the program and why, after the workers already started are killed
//    and reaped. An output file that cannot be opened is the same.
//
// Threading: one thread (the agent's fibers). Reaps only its own children, by pid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/elastic/worker_group.h"
#include "core/runtime/clock.h"
#include "net/process/process.h"

namespace dagsim::net {

struct WorkerProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on the environment's PATH, as execvp does
  std::vector<std::string> env;   // NAME=VALUE, the worker's whole environment
  std::string stdout_path;        // "": the agent's own standard output
  std::string stderr_path;        // "": the agent's own standard error
};

// How a worker ended: an exit code, or the signal that ended it (then exit_code is -1).
struct WorkerExit {
  uint32_t local_rank = 0;
  pid_t pid = 0;
  int exit_code = -1;
  int signal = 0;
  bool failed() const { return signal != 0 || exit_code != 0; }
  std::string describe() const;  // "exited with code 3", "was killed by signal 9 (Killed)"
};

struct WorkerGroupPoll {
  elastic::WorkerState state = elastic::WorkerState::healthy;  // healthy, succeeded or failed
  std::optional<WorkerExit> first_failure;  // failed: the first worker seen to fail
  std::vector<WorkerExit> exited;           // every worker that has ended, in the order seen
};

class WorkerProcesses {
 public:
  explicit WorkerProcesses(const std::vector<WorkerProcessSpec>& specs);
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  WorkerGroupPoll poll();
  void stop(runtime::Clock& clock, runtime::Duration grace);
  // The pid of each worker by local rank (0 once reaped).
  std::vector<pid_t> pids() const;

 private:
  void reap(bool block);

  std::vector<Process> processes_;  // [local rank]
  std::vector<WorkerExit> exited_;
};

}  // namespace dagsim::net
