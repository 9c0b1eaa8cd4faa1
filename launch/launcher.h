// Launcher: `dagsim launch`, torchrun's interface on dagsim's elastic agent. One Launcher per host:
// it joins the rendezvous (c10d on a TCPStore server it hosts or reaches, or etcd), runs the job's
// worker processes with torchrun's environment (net/process_worker_group.h), restarts them as
// torchrun does, and leaves. The agent's whole life (run, the close rule, the exit op, the
// departure, a store host's linger) is core/elastic/agent_life.h, the code the simulator proves
// with simulated worker processes; what is here is only what a process on a host adds: the plan
// from the flags, hosting the store, signals, the log folder, and what an operator reads.
//
// What an operator sees: one dated line on standard error per agent event (launch_log.h), a line
// every few seconds while it waits (wait_lines.h), `--events FILE` for the same as JSON lines
// (PyTorch's event metadata, with absolute times), per-rank logs and error files under the log
// folder (its path is printed first), and torchrun's root-cause report when the workers fail
// (root_cause.h). A survivor whose c10d store was hosted by an agent that left says so and why
// the job cannot go on (Rendezvous::store_gone).
//
// run()'s exit status: 0 the job succeeded (or this agent was a spare of a closed job); 1 it failed
// (workers failed with max_restarts spent, the rendezvous timed out, closed or its store was
// unreachable); 2 bad usage; 3 an internal error; 128+N stopped by signal N (SIGTERM, SIGINT,
// SIGHUP): the workers get SIGTERM, then SIGKILL after --stop-grace, and the agent leaves the
// rendezvous without closing it, as torchrun's does, so the others re-form.
//
// Threading: run() installs the process's handlers for SIGTERM, SIGINT and SIGHUP and runs the
// agent on its StoreHost's fibers; one Launcher per process.
#pragma once

#include "launch/launch_args.h"

namespace dagsim::launch {

enum LaunchExit : int { kSucceeded = 0, kFailed = 1, kBadUsage = 2, kInternal = 3, kSignalBase = 128 };

class Launcher {
 public:
  explicit Launcher(LaunchArgs args) : args_(std::move(args)) {}
  int run();

 private:
  LaunchArgs args_;
};

}  // namespace dagsim::launch
