// The runner's simulator path (runner.h): a SimWorld as the Cluster, one NodeContext per node
// incarnation, and the records they leave. Nothing here judges: judge.cc does, from the records.
#include "scenarios/run/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/run/fault_triggers.h"
#include "scenarios/run/node_gpus.h"
#include "scenarios/workloads/registry.h"
#include "sim/sim_network.h"
#include "sim/trace.h"
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

// How often a drain looks whether every node has settled.
constexpr runtime::Duration kSettleCheck = std::chrono::milliseconds(1);

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

// The simulator under every NodeContext. The world's time is the scenario's clock: the simulator
// knows the true time, which is what the judge compares with the fault history. A workload event
// is handed to the triggers at once, from the reporting fiber: a fault it triggers strikes at that
// virtual instant (or its `after`), once the node's fibers yield to the driver.
class SimRuntime final : public NodeRuntime {
 public:
  SimRuntime(SimWorld& world, FaultTriggers& triggers) : world_(world), triggers_(triggers) {}

  TimePoint scenario_now() const override { return world_.now(); }
  void spawn_foreground(WorkerId node, std::string name, std::function<void()> fn) override {
    world_.spawn_foreground(node, std::move(name), std::move(fn));
  }
  bool wants(WorkloadEvent event) const override { return triggers_.wants(event); }
  void report(WorkerId node, WorkloadEvent event, uint64_t value) override {
    if (!triggers_.wants(event)) return;
    for (FaultTriggers::Strike& strike : triggers_.observe(world_, node, event, value)) {
      world_.at(world_.now(), std::move(strike.what), std::move(strike.fn));
    }
  }

 private:
  SimWorld& world_;
  FaultTriggers& triggers_;
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

  const TimePoint max_time{scenario.max_virtual_time};
  const std::optional<TimePoint> end = workload.end_time();
  // Random faults stop with the workload, and never outlast max_virtual_time, which the loader
  // bounded their rates by (a workload may legally claim to run past it; the run stops there).
  const std::vector<FaultSpec> faults = fault_timeline(scenario, options.seed, std::min(end.value_or(max_time), max_time));
  FaultTriggers triggers(faults);

  // Deques: records and contexts keep their addresses while incarnations are added.
  std::deque<NodeRecord> node_records;
  std::deque<NodeContext> contexts;
  // Each node's simulated GPUs ([devices]): they outlive the world and whatever holds their tensors.
  std::vector<std::unique_ptr<DeviceSet>> node_devices;
  SimWorld world(world_options(scenario, options));
  SimRuntime runtime(world, triggers);
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
      NodeContext& context = contexts.emplace_back(runtime, env, record.data);
      workload.node_main(context);
    });
  }
  for (uint32_t i = 0; i < scenario.cluster.nodes && scenario.devices.gpus > 0; ++i) {
    node_devices.push_back(make_node_gpus(scenario, i, options.seed, world.node_clock(i), options.gpus, options.make_cuda_gpu));
    world.set_devices(i, node_devices.back().get());
  }
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) world.start(i);

  install_faults(world, faults);

  const SimWorld::Outcome outcome = world.run({.stop_at = end, .max_virtual_time = max_time});
  if (outcome == SimWorld::Outcome::finished) records.workload_end = world.now();
  if (outcome == SimWorld::Outcome::finished && workload.drain_time() > runtime::Duration{0}) {
    // The drain ends early, as over TCP, once every running node is settled (Workload::settled)
    // and nothing sent is still on the wire; drain_time stays the bound. Looked at every
    // kSettleCheck of virtual time, so the end is still a function of the seed.
    const TimePoint drained = std::min(world.now() + workload.drain_time(), max_time);
    const auto settled = [&] {
      const sim::NetworkStats& net = world.network().stats();
      if (net.sent != net.delivered + net.dropped) return false;
      for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
        const runtime::NodeState state = world.state(i);
        if ((state == runtime::NodeState::up || state == runtime::NodeState::paused) && !workload.settled(i)) return false;
      }
      return true;
    };
    while (world.now() < drained && !settled()) {
      const SimWorld::Outcome step = world.run({.stop_at = std::min(world.now() + kSettleCheck, drained), .max_virtual_time = max_time});
      if (step != SimWorld::Outcome::finished) break;  // nothing can happen any more, or a limit
    }
  }
  records.outcome = outcome_name(outcome);
  records.end = world.now();
  if (outcome == SimWorld::Outcome::time_limit || outcome == SimWorld::Outcome::deadlock ||
      outcome == SimWorld::Outcome::livelock) {
    records.stuck_report = world.stuck_report();
  }
  // Final snapshots, from the incarnations still running: a node's last word before it stops.
  for (NodeContext& context : contexts) {
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
  records.fault_timeline = faults_to_json(scenario, faults);
  triggers.mark(records.fault_timeline);

  records.stats.trace_hash = world.trace().hash();
  records.stats.trace_events = world.trace().count();
  const sim::NetworkStats& stats = world.network().stats();
  records.stats.messages = stats.sent;
  records.stats.messages_delivered = stats.delivered;
  records.stats.messages_dropped = stats.dropped;
  records.stats.connection_failures = stats.connection_failures;
  if (options.keep_trace) records.trace = std::make_shared<const sim::Trace>(world.trace());
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
  RunResult result = judge_run(scenario, records, options.report);
  if (options.chrome_trace != nullptr && records.trace) {
    write_chrome_trace(*options.chrome_trace, records, result, options.trace_level);
  }
  return result;
}

void write_chrome_trace(std::ostream& out, const RunRecords& records, const RunResult& result, std::string_view level_name) {
  DAGSIM_ASSERT(records.trace != nullptr);
  sim::TraceLevel level = sim::TraceLevel::network;
  if (!sim::parse_trace_level(level_name, level)) {
    throw errors::invalid_argument("trace level \"" + std::string(level_name) + "\": expected workload, rpc or network");
  }
  std::vector<sim::TraceSpan> spans;
  spans.reserve(result.spans.size());
  for (const WorkloadSpan& s : result.spans) {
    spans.push_back({s.node, s.name, s.category, TimePoint{runtime::Duration{s.begin_ns}},
                     TimePoint{runtime::Duration{s.end_ns}}, s.detail});
  }
  records.trace->write_chrome_json(out, records.node_names, level, spans);
}

}  // namespace dagsim::scenarios
