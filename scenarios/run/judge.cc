// Judging a run from its records alone (runner.h, judge_run): the run's own checks, then the
// scenario's, each through its workload's table of check kinds (workloads/registry.h).
#include <string>

#include "core/base/assert.h"
#include "scenarios/run/runner.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

namespace {

double ms(runtime::TimePoint t) { return static_cast<double>(t.ns()) / 1e6; }

// The run itself: it must end by the workload's own end, not by the time limit or a deadlock.
CheckResult run_completed(const Scenario& scenario, const RunRecords& r) {
  CheckResult completed{"run_completed", true, "the workload ran to its end"};
  if (r.outcome == "finished") return completed;
  completed.passed = false;
  if (r.outcome == "time_limit" && !r.job.is_null()) {
    // A job's processes are real: its limit is [job] timeout_ms, and nothing has fibers to list.
    completed.detail = "[job] timeout_ms (" + std::to_string(scenario.max_virtual_time.count() / 1000000) +
                       " ms) reached before every agent exited; the run stopped those still running" +
                       (r.stuck_report.empty() ? std::string() : ":\n" + r.stuck_report);
  } else if (r.outcome == "time_limit") {
    completed.detail = "max_virtual_time (" + std::to_string(scenario.max_virtual_time.count() / 1000000) +
                       " ms) reached before the workload ended; blocked fibers:\n" + r.stuck_report;
  } else if (r.outcome == "deadlock") {
    completed.detail = "deadlock: no fiber can ever wake; blocked fibers:\n" + r.stuck_report;
  } else if (r.outcome == "livelock") {
    completed.detail = "livelock: virtual time stopped advancing at " + std::to_string(ms(r.end)) +
                       " ms (fibers re-arm zero-delay timers forever); fibers:\n" + r.stuck_report;
  } else {
    completed.detail = "the run ended as \"" + r.outcome + "\"";
  }
  return completed;
}

CheckResult no_fiber_failures(const RunRecords& r) {
  CheckResult fibers{"no_fiber_failures", r.failures.empty(), "no node fiber ended with an exception"};
  if (fibers.passed) return fibers;
  fibers.detail.clear();
  for (const FiberFailureRecord& f : r.failures) {
    fibers.detail += "node " + f.node + ", fiber " + f.fiber + " at " + std::to_string(ms(f.time)) + " ms: " + f.what + "\n";
  }
  return fibers;
}

}  // namespace

RunResult judge_run(const Scenario& scenario, const RunRecords& records, const ReportOptions& report) {
  DAGSIM_ASSERT_MSG(records.node_names.size() == scenario.cluster.nodes,
                    "records of " + std::to_string(records.node_names.size()) + " nodes for a scenario of " +
                        std::to_string(scenario.cluster.nodes));
  const WorkloadType& type = workload_type(scenario);
  RunResult result;
  result.scenario = scenario.name;
  result.seed = records.seed;
  result.transport = records.transport;
  result.outcome = records.outcome;
  result.stuck_report = records.stuck_report;
  result.virtual_time_ms = ms(records.end);
  if (records.workload_end) result.workload_end_ms = ms(*records.workload_end);
  result.faults = records.fault_timeline;
  result.warnings = mark_fired_faults(result.faults, records.end);
  result.trace_hash = records.stats.trace_hash;
  result.trace_events = records.stats.trace_events;
  result.messages = records.stats.messages;
  result.messages_delivered = records.stats.messages_delivered;
  result.messages_dropped = records.stats.messages_dropped;
  result.connection_failures = records.stats.connection_failures;
  result.wall_ms = records.stats.wall_ms;
  result.probes = records.probes;
  result.buggify = records.buggify;
  result.swarm = records.swarm;

  result.checks.push_back(run_completed(scenario, records));
  result.checks.push_back(no_fiber_failures(records));
  const std::unique_ptr<Judge> judge = type.make_judge(scenario, records);
  for (const CheckSpec& spec : scenario.checks) {
    const CheckKind* kind = type.find_check(spec.kind);
    // The loader accepts only the workload's own kinds; a scenario built as data may not.
    if (kind == nullptr) {
      result.checks.push_back({spec.kind, false, "unknown check kind for the " + std::string(type.name) + " workload"});
      continue;
    }
    result.checks.push_back(kind->judge(*judge, spec));
  }
  result.workload = judge->results(report);
  if (records.trace || report.spans) result.spans = judge->spans();
  result.passed = true;
  for (const CheckResult& c : result.checks) result.passed = result.passed && c.passed;
  return result;
}

}  // namespace dagsim::scenarios
