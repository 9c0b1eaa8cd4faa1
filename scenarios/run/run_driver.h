// The run driver: one run of a scenario's workload, whatever runtime runs its nodes (DESIGN.md,
// "Data flow"). The simulator (runner.cc) and the TCP launcher (tcp_launcher.cc) each implement
// DrivenCluster; drive_run is the one sequence both follow, so a run means the same on both:
//
//   1. the fault timeline, from the scenario and the seed, bounded by the workload's end and
//      max_virtual_time; the triggers that strike faults on workload events;
//   2. start_all: every node started, scenario time 0, every fault armed from it;
//   3. run_work: until the workload's work is done (its foreground fibers ended, its end time
//      passed) or max_virtual_time; the outcome, and a stuck report when it did not finish;
//   4. settle: only after a finished run, at most the workload's drain_time, ended early once every
//      running node is settled (Workload::settled, nothing it sent still on the wire); each running
//      incarnation then takes its final snapshot (NodeContext::run_at_end);
//   5. stop_all: every node stops, and what ran there unwinds;
//   6. gather: node names, final states, fault history, fiber failures, every incarnation's
//      record and the transport's figures; then the driver puts records in (node, incarnation)
//      order, clamps event times to the run's end, marks which faults fired, and times the run.
//
// What stays each runtime's own: how a node starts and dies, what scenario time is (virtual, or
// wall time since the start), how a node's settledness is learned (read between driver steps, or
// told over the control link), and extras such as the simulator's trace.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scenarios/format/scenario.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/run/fault_triggers.h"
#include "scenarios/run/records.h"
#include "scenarios/workloads/workload.h"

namespace dagsim::scenarios {

class DrivenCluster {
 public:
  virtual ~DrivenCluster() = default;

  // Starts every node; from now on scenario time runs, and every fault of `faults` is armed on
  // it. `triggers` strike the faults that wait for workload events; it outlives the run.
  virtual void start_all(const std::vector<FaultSpec>& faults, FaultTriggers& triggers) = 0;
  struct WorkEnd {
    std::string outcome;       // RunRecords::outcome: finished, time_limit, deadlock, livelock
    std::string stuck_report;  // when not finished
  };
  virtual WorkEnd run_work(std::optional<runtime::TimePoint> end_time, runtime::TimePoint max_time) = 0;
  // Step 4 above. `drain` is the workload's drain_time (possibly 0).
  virtual void settle(runtime::Duration drain, runtime::TimePoint max_time) = 0;
  virtual void stop_all() = 0;
  virtual void gather(RunRecords& records) = 0;
  // The scenario's clock.
  virtual runtime::TimePoint now() const = 0;
};

// Runs `workload` on `cluster` (steps 1-6) and returns its records, `transport` named in them.
RunRecords drive_run(const Scenario& scenario, uint64_t seed, const std::string& transport, Workload& workload,
                     DrivenCluster& cluster);

}  // namespace dagsim::scenarios
