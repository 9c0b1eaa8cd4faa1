// The runner's simulator path (runner.h): a SimWorld as the Cluster, one NodeContext per node
// incarnation, and the records they leave. Nothing here judges: judge.cc does, from the records.
#include "scenarios/run/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>

#include "core/base/assert.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/workloads/registry.h"
#include "sim/sim_network.h"
#include "sim/sim_world.h"

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
  o.keep_trace_events = options.keep_trace || options.inspect_trace != nullptr;
  return o;
}

// One incarnation of a node in the simulator. The world's time is the scenario's clock: the
// simulator knows the true time, which is what the judge compares with the fault history.
class SimNodeContext final : public NodeContext {
 public:
  SimNodeContext(SimWorld& world, runtime::Env& env, NodeRecord& record)
      : world_(world), env_(env), record_(record) {
    DAGSIM_ASSERT(record.node == env.self);
    DAGSIM_ASSERT(record.incarnation == env.incarnation);
  }

  runtime::Env& env() override { return env_; }
  uint32_t index() const override { return record_.node; }
  uint32_t incarnation() const override { return record_.incarnation; }
  nlohmann::json& record() override { return record_.data; }
  TimePoint scenario_now() const override { return world_.now(); }
  void spawn_foreground(std::string name, std::function<void()> fn) override {
    world_.spawn_foreground(env_.self, std::move(name), std::move(fn));
  }
  void at_end(std::function<void()> fn) override { at_end_.push_back(std::move(fn)); }

  void run_at_end() {
    // Taken out first: a hook that registers another must not invalidate the loop.
    const std::vector<std::function<void()>> hooks = std::move(at_end_);
    at_end_.clear();
    for (const auto& fn : hooks) fn();
  }

 private:
  SimWorld& world_;
  runtime::Env& env_;
  NodeRecord& record_;
  std::vector<std::function<void()>> at_end_;
};

}  // namespace

RunRecords record_scenario(const Scenario& scenario, const RunOptions& options) {
  const std::unique_ptr<Workload> workload = workload_type(scenario).make(scenario, options.seed);
  return record_workload(scenario, *workload, options);
}

RunRecords record_workload(const Scenario& scenario, Workload& workload, const RunOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  RunRecords records;
  records.scenario_file = scenario.file;
  records.seed = options.seed;
  records.transport = "sim";

  // Deques: records and contexts keep their addresses while incarnations are added.
  std::deque<NodeRecord> node_records;
  std::deque<SimNodeContext> contexts;
  SimWorld world(world_options(scenario, options));
  // Whatever the workload binds to nodes goes before the world does.
  struct Release {
    Workload& workload;
    SimWorld& world;
    ~Release() {
      world.shutdown();
      workload.release_nodes();
    }
  } release{workload, world};
  if (options.progress) world.set_progress(options.progress);
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
    world.add_node(scenario.cluster.node_name(i), [&, i](runtime::Env& env) {
      NodeRecord& record = node_records.emplace_back(NodeRecord{i, env.incarnation});
      SimNodeContext& context = contexts.emplace_back(world, env, record);
      workload.node_main(context);
    });
  }
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) world.start(i);

  const TimePoint max_time{scenario.max_virtual_time};
  const std::optional<TimePoint> end = workload.end_time();
  // Random faults stop with the workload, and never outlast max_virtual_time, which the loader
  // bounded their rates by (a workload may legally claim to run past it; the run stops there).
  const std::vector<FaultSpec> faults = fault_timeline(scenario, options.seed, std::min(end.value_or(max_time), max_time));
  install_faults(world, faults);
  records.fault_timeline = faults_to_json(scenario, faults);

  const SimWorld::Outcome outcome = world.run({.stop_at = end, .max_virtual_time = max_time});
  if (outcome == SimWorld::Outcome::finished && workload.drain_time() > runtime::Duration{0}) {
    const TimePoint drained = std::min(world.now() + workload.drain_time(), max_time);
    world.run({.stop_at = drained, .max_virtual_time = max_time});
  }
  records.outcome = outcome_name(outcome);
  records.end = world.now();
  if (outcome == SimWorld::Outcome::time_limit || outcome == SimWorld::Outcome::deadlock ||
      outcome == SimWorld::Outcome::livelock) {
    records.stuck_report = world.stuck_report();
  }
  // Final snapshots, from the incarnations still running: a node's last word before it stops.
  for (SimNodeContext& context : contexts) {
    const runtime::NodeState state = world.state(context.index());
    const bool running = state == runtime::NodeState::up || state == runtime::NodeState::paused;
    if (running && world.incarnation(context.index()) == context.incarnation()) context.run_at_end();
  }
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
    records.node_names.push_back(world.node_name(i));
    records.final_states.push_back(world.state(i));
  }
  // Background fibers end with the workload; exceptions thrown while they unwind count too.
  world.shutdown();
  for (const sim::FiberFailure& f : world.failures()) records.failures.push_back({f.time, f.node, f.fiber, f.what});
  records.fault_history = world.fault_history();

  records.stats.trace_hash = world.trace().hash();
  records.stats.trace_events = world.trace().count();
  const sim::NetworkStats& stats = world.network().stats();
  records.stats.messages = stats.sent;
  records.stats.messages_delivered = stats.delivered;
  records.stats.messages_dropped = stats.dropped;
  records.stats.connection_failures = stats.connection_failures;
  if (options.keep_trace && options.chrome_trace != nullptr) {
    world.trace().write_chrome_json(*options.chrome_trace, world.node_names());
  }
  if (options.inspect_trace) options.inspect_trace(world.trace(), world.node_names());
  // Records in (node, incarnation) order, whatever order the incarnations started in.
  records.nodes.assign(node_records.begin(), node_records.end());
  std::stable_sort(records.nodes.begin(), records.nodes.end(), [](const NodeRecord& a, const NodeRecord& b) {
    return std::tie(a.node, a.incarnation) < std::tie(b.node, b.incarnation);
  });
  records.stats.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start).count();
  return records;
}

RunResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  RunRecords records = record_scenario(scenario, options);
  if (options.before_checks) options.before_checks(records);
  return judge_run(scenario, records, options.report);
}

}  // namespace dagsim::scenarios
