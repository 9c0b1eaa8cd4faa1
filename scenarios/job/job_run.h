// One run of a [job] scenario (scenarios/workloads/job/job_spec.h) as real processes: the store
// (`dagsim store --record`, or etcd), the agents (`dagsim launch` or torchrun) and their workers,
// every fault struck on them, and the records the judge reads (job_spec.h's layout).
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "scenarios/format/scenario.h"
#include "scenarios/run/records.h"

namespace dagsim::scenarios {

struct JobRunOptions {
  uint64_t seed = 1;
  std::string scenario_file;  // the workers' default directory is its folder
  std::string dagsim_binary;  // this binary: `dagsim store` and `dagsim launch` run it
  // Where the run writes everything (agents' logs, store.jsonl, the workers' folders, records):
  // "" makes a fresh folder under $TMPDIR (dagsim-job-NAME-seedN-XXXXXX), named in the records.
  std::string run_dir;
  // Lines for the operator as the run goes ("agent2 killed (SIGKILL to pid 123) at 10.2 s").
  std::function<void(std::string_view line)> progress;
  // Polled every tick (20 ms): non-zero (a signal's number: SIGINT, SIGTERM, SIGHUP, or SIGALRM
  // for the wall-time limit) stops the run. Everything it started is stopped (agents, workers,
  // the store or etcd) and removed (namespaces, links, /etc/netns), then record_job throws
  // JobRunStopped. Set from a signal handler: it must only read an atomic.
  std::function<int()> stop_requested;
};

// What record_job throws when stop_requested asked it to stop, once nothing of the run is left.
class JobRunStopped : public std::runtime_error {
 public:
  explicit JobRunStopped(int signal) : std::runtime_error("the job run was stopped"), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Runs the job, strikes its faults, gathers its records; runs the reference run first when a
// check asks for one, and the `command` checks at the end. Throws Error(invalid_argument) naming
// what could not be started (no such script, no namespaces without root); JobRunStopped when
// options.stop_requested stopped it.
RunRecords record_job(const Scenario& scenario, const JobRunOptions& options);

}  // namespace dagsim::scenarios
