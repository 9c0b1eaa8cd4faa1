// The run driver (run_driver.h): the one sequence of a run, over either runtime.
#include "scenarios/run/swarm.h"
#include "scenarios/run/run_driver.h"

#include <algorithm>
#include <chrono>

namespace dagsim::scenarios {

using runtime::TimePoint;

RunRecords drive_run(const Scenario& scenario, uint64_t seed, const std::string& transport, Workload& workload,
                     DrivenCluster& cluster) {
  // The run's own cost, for the report: real time, whatever the runtime's clock is.
  const auto wall_start = std::chrono::steady_clock::now();
  RunRecords records;
  records.scenario_file = scenario.file;
  records.seed = seed;
  records.transport = transport;

  // Random faults stop with the workload, and never outlast max_virtual_time, which the loader
  // bounded their rates by (a workload may legally claim to run past it; the run stops there).
  const TimePoint max_time{scenario.max_virtual_time};
  const std::optional<TimePoint> end_time = workload.end_time();
  const std::vector<FaultSpec> faults = fault_timeline(scenario, seed, std::min(end_time.value_or(max_time), max_time));
  records.fault_timeline = faults_to_json(scenario, faults);
  // The swarm's mix for this seed (swarm.h), which the timeline above was drawn with.
  if (scenario.random_faults.swarm) records.swarm = swarm_json(scenario, draw_swarm(scenario, seed));
  FaultTriggers triggers(faults);

  cluster.start_all(faults, triggers);
  DrivenCluster::WorkEnd work = cluster.run_work(end_time, max_time);
  records.outcome = std::move(work.outcome);
  records.stuck_report = std::move(work.stuck_report);
  const bool finished = records.outcome == "finished";
  if (finished) records.workload_end = cluster.now();
  // A run that did not finish has nothing to drain; its running incarnations still leave their
  // last word.
  cluster.settle(finished ? workload.drain_time() : runtime::Duration::zero(), max_time);
  records.end = cluster.now();
  cluster.stop_all();
  cluster.gather(records);
  triggers.mark(records.fault_timeline);

  // One order and one time line for the judge, whichever runtime wrote them.
  std::stable_sort(records.nodes.begin(), records.nodes.end(), [](const NodeRecord& a, const NodeRecord& b) {
    return std::tie(a.node, a.incarnation) < std::tie(b.node, b.incarnation);
  });
  std::stable_sort(records.fault_history.begin(), records.fault_history.end(),
                   [](const runtime::FaultEvent& a, const runtime::FaultEvent& b) { return a.time < b.time; });
  for (runtime::FaultEvent& e : records.fault_history) e.time = std::min(e.time, records.end);
  for (FiberFailureRecord& f : records.failures) f.time = std::clamp(f.time, TimePoint{}, records.end);
  records.stats.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start).count();
  return records;
}

}  // namespace dagsim::scenarios
