#include "scenarios/runner.h"

#include <cstdio>

#include "scenarios/fault_schedule.h"
#include "sim/sim_network.h"

namespace dagsim::scenarios {

using runtime::TimePoint;
using sim::SimWorld;

std::string hash_hex(uint64_t hash) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(hash));
  return text;
}

namespace {

const char* outcome_name(SimWorld::Outcome outcome) {
  switch (outcome) {
    case SimWorld::Outcome::finished: return "finished";
    case SimWorld::Outcome::idle: return "finished";
    case SimWorld::Outcome::time_limit: return "time_limit";
    case SimWorld::Outcome::deadlock: return "deadlock";
    case SimWorld::Outcome::livelock: return "livelock";
  }
  return "?";
}

sim::SimOptions world_options(const Scenario& scenario, const RunOptions& options) {
  sim::SimOptions o;
  o.seed = options.seed;
  o.random_schedule = scenario.schedule == Schedule::random;
  o.network = scenario.network;
  o.clock_skew_max = scenario.cluster.clock_skew_max;
  o.clock_drift_max_ppm = scenario.cluster.clock_drift_max_ppm;
  o.keep_trace_events = options.keep_trace;
  return o;
}

}  // namespace

RunResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  RunResult result;
  result.scenario = scenario.name;
  result.seed = options.seed;
  std::unique_ptr<Workload> workload = make_workload(scenario, options.seed);
  SimWorld world(world_options(scenario, options));
  // Whatever the workload binds to nodes goes before the world does.
  struct Release {
    Workload& workload;
    SimWorld& world;
    ~Release() {
      world.shutdown();
      workload.release_nodes();
    }
  } release{*workload, world};
  if (options.progress) world.set_progress(options.progress);
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) world.add_node(scenario.cluster.node_name(i), workload->node_main(i));
  workload->install(world);
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) world.start(i);

  const TimePoint max_time{scenario.max_virtual_time};
  const std::optional<TimePoint> end = workload->end_time();
  const std::vector<FaultSpec> faults = fault_timeline(scenario, options.seed, end.value_or(max_time));
  install_faults(world, faults);
  result.faults = faults_to_json(scenario, faults);

  SimWorld::Outcome outcome = world.run({.stop_at = end, .max_virtual_time = max_time});
  if (outcome == SimWorld::Outcome::finished && workload->drain_time() > runtime::Duration{0}) {
    const TimePoint drained = std::min(world.now() + workload->drain_time(), max_time);
    world.run({.stop_at = drained, .max_virtual_time = max_time});
  }
  result.outcome = outcome_name(outcome);
  result.virtual_time_ms = static_cast<double>(world.now().ns()) / 1e6;

  // The run itself: it must end by the workload's own end, not by the time limit or a deadlock.
  CheckResult completed{"run_completed", true, "the workload ran to its end"};
  if (outcome == SimWorld::Outcome::time_limit || outcome == SimWorld::Outcome::deadlock ||
      outcome == SimWorld::Outcome::livelock) {
    result.stuck_report = world.stuck_report();
    completed.passed = false;
    if (outcome == SimWorld::Outcome::time_limit) {
      completed.detail = "max_virtual_time (" + std::to_string(scenario.max_virtual_time.count() / 1000000) +
                         " ms) reached before the workload ended; blocked fibers:\n" + result.stuck_report;
    } else if (outcome == SimWorld::Outcome::deadlock) {
      completed.detail = "deadlock: no fiber can ever wake; blocked fibers:\n" + result.stuck_report;
    } else {
      completed.detail = "livelock: virtual time stopped advancing at " + std::to_string(result.virtual_time_ms) +
                         " ms (fibers re-arm zero-delay timers forever); fibers:\n" + result.stuck_report;
    }
  }
  result.checks.push_back(completed);
  // The scenario's checks see the world as the workload left it (which nodes are up).
  if (options.before_checks) options.before_checks(*workload, world);
  std::vector<CheckResult> scenario_checks;
  for (const CheckSpec& spec : scenario.checks) scenario_checks.push_back(workload->check(spec, world));
  result.workload = workload->results(world);
  // Background fibers end with the workload; exceptions thrown while they unwind count too.
  world.shutdown();
  CheckResult fibers{"no_fiber_failures", world.failures().empty(), "no node fiber ended with an exception"};
  if (!fibers.passed) {
    fibers.detail.clear();
    for (const sim::FiberFailure& f : world.failures()) {
      fibers.detail += "node " + f.node + ", fiber " + f.fiber + " at " +
                       std::to_string(static_cast<double>(f.time.ns()) / 1e6) + " ms: " + f.what + "\n";
    }
  }
  result.checks.push_back(fibers);
  result.checks.insert(result.checks.end(), scenario_checks.begin(), scenario_checks.end());

  result.trace_hash = world.trace().hash();
  result.trace_events = world.trace().count();
  const sim::NetworkStats& stats = world.network().stats();
  result.messages = stats.sent;
  result.messages_delivered = stats.delivered;
  result.messages_dropped = stats.dropped;
  result.connection_failures = stats.connection_failures;
  if (options.keep_trace && options.chrome_trace != nullptr) {
    world.trace().write_chrome_json(*options.chrome_trace, world.node_names());
  }
  result.passed = true;
  for (const CheckResult& c : result.checks) result.passed = result.passed && c.passed;
  return result;
}

}  // namespace dagsim::scenarios
