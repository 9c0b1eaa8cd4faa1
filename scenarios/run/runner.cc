// The runner's simulator path (runner.h): a SimWorld as the Cluster, one NodeContext per node
// incarnation, and the records they leave. Nothing here judges: judge.cc does, from the records.
#include "scenarios/run/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/buggify.h"
#include "core/base/probe.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/run/fault_triggers.h"
#include "scenarios/run/node_gpus.h"
#include "scenarios/run/run_driver.h"
#include "scenarios/run/swarm.h"
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
  explicit SimRuntime(SimWorld& world) : world_(world) {}
  void set_triggers(FaultTriggers& triggers) { triggers_ = &triggers; }

  TimePoint scenario_now() const override { return world_.now(); }
  void spawn_foreground(WorkerId node, std::string name, std::function<void()> fn) override {
    world_.spawn_foreground(node, std::move(name), std::move(fn));
  }
  bool wants(WorkloadEvent event) const override { return triggers_ != nullptr && triggers_->wants(event); }
  void report(WorkerId node, WorkloadEvent event, uint64_t value) override {
    if (!wants(event)) return;
    for (FaultTriggers::Strike& strike : triggers_->observe(world_, node, event, value)) {
      world_.at(world_.now(), std::move(strike.what), std::move(strike.fn));
    }
  }

 private:
  SimWorld& world_;
  FaultTriggers* triggers_ = nullptr;  // set when the run starts, before any node does
};

// The simulator as the run driver's cluster (run_driver.h): a SimWorld with one NodeContext per
// node incarnation, the records they leave, and the world's trace and figures.
class SimCluster final : public DrivenCluster {
 public:
  SimCluster(const Scenario& scenario, Workload& workload, const RunOptions& options)
      : scenario_(scenario), workload_(workload), options_(options), world_(world_options(scenario, options)), runtime_(world_) {
    if (options.progress) world_.set_progress(options.progress);
    for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
      world_.add_node(scenario.cluster.node_name(i), [this, i](runtime::Env& env) {
        NodeRecord& record = node_records_.emplace_back(NodeRecord{i, env.incarnation});
        NodeContext& context = contexts_.emplace_back(runtime_, env, record.data);
        workload_.node_main(context);
      });
    }
    for (uint32_t i = 0; i < scenario.cluster.nodes && scenario.devices.gpus > 0; ++i) {
      node_devices_.push_back(
          make_node_gpus(scenario, i, options.seed, world_.node_clock(i), options.gpus, options.make_cuda_gpu));
      world_.set_devices(i, node_devices_.back().get());
    }
  }
  // Whatever the workload binds to nodes goes before the world does.
  ~SimCluster() override {
    world_.shutdown();
    workload_.release_nodes();
  }

  void start_all(const std::vector<FaultSpec>& faults, FaultTriggers& triggers) override {
    runtime_.set_triggers(triggers);
    for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) world_.start(i);
    install_faults(world_, faults);
  }

  WorkEnd run_work(std::optional<TimePoint> end_time, TimePoint max_time) override {
    const SimWorld::Outcome outcome = world_.run({.stop_at = end_time, .max_virtual_time = max_time});
    WorkEnd end{outcome_name(outcome), {}};
    if (outcome == SimWorld::Outcome::time_limit || outcome == SimWorld::Outcome::deadlock ||
        outcome == SimWorld::Outcome::livelock) {
      end.stuck_report = world_.stuck_report();
    }
    return end;
  }

  void settle(runtime::Duration drain, TimePoint max_time) override {
    // Looked at every kSettleCheck of virtual time between driver steps, so the end is still a
    // function of the seed.
    const TimePoint drained = std::min(world_.now() + drain, max_time);
    while (world_.now() < drained && !settled()) {
      const SimWorld::Outcome step = world_.run({.stop_at = std::min(world_.now() + kSettleCheck, drained), .max_virtual_time = max_time});
      if (step != SimWorld::Outcome::finished) break;  // nothing can happen any more, or a limit
    }
    // Final snapshots, from the incarnations still running: a node's last word before it stops.
    for (NodeContext& context : contexts_) {
      const runtime::NodeState state = world_.state(context.index());
      const bool running = state == runtime::NodeState::up || state == runtime::NodeState::paused;
      if (running && world_.incarnation(context.index()) == context.incarnation()) context.run_at_end();
    }
  }

  void stop_all() override {
    for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) final_states_.push_back(world_.state(i));
    // Background fibers end with the workload; exceptions thrown while they unwind count too.
    world_.shutdown();
  }

  void gather(RunRecords& records) override {
    for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) records.node_names.push_back(world_.node_name(i));
    records.final_states = final_states_;
    for (const sim::FiberFailure& f : world_.failures()) records.failures.push_back({f.time, f.node, f.fiber, f.what});
    records.fault_history = world_.fault_history();
    records.stats.trace_hash = world_.trace().hash();
    records.stats.trace_events = world_.trace().count();
    const sim::NetworkStats& stats = world_.network().stats();
    records.stats.messages = stats.sent;
    records.stats.messages_delivered = stats.delivered;
    records.stats.messages_dropped = stats.dropped;
    records.stats.connection_failures = stats.connection_failures;
    if (options_.keep_trace) records.trace = std::make_shared<const sim::Trace>(world_.trace());
    if (options_.inspect_trace) options_.inspect_trace(world_.trace(), world_.node_names());
    records.nodes.assign(node_records_.begin(), node_records_.end());
  }

  TimePoint now() const override { return world_.now(); }

 private:
  // Every running node's workload is settled and nothing sent is still on the wire.
  bool settled() {
    const sim::NetworkStats& net = world_.network().stats();
    if (net.sent != net.delivered + net.dropped) return false;
    for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) {
      const runtime::NodeState state = world_.state(i);
      if ((state == runtime::NodeState::up || state == runtime::NodeState::paused) && !workload_.settled(i)) return false;
    }
    return true;
  }

  const Scenario& scenario_;
  Workload& workload_;
  const RunOptions& options_;
  // Deques: records and contexts keep their addresses while incarnations are added.
  std::deque<NodeRecord> node_records_;
  std::deque<NodeContext> contexts_;
  // Each node's simulated GPUs ([devices]): they outlive the world and whatever holds their tensors.
  std::vector<std::unique_ptr<DeviceSet>> node_devices_;
  SimWorld world_;
  SimRuntime runtime_;
  std::vector<runtime::NodeState> final_states_;
};

}  // namespace

RunRecords record_scenario(const Scenario& scenario, const RunOptions& options) {
  const std::unique_ptr<Workload> workload = workload_type(scenario).make(scenario, options.seed);
  return record_workload(scenario, *workload, options);
}

RunRecords record_workload(const Scenario& scenario, Workload& workload, const RunOptions& options) {
  // The probes count this run alone (one run at a time in a process: probe.h).
  probe::reset();
  // [buggify]: the points' context lives on this thread, the world's, for the whole run and the
  // world's teardown (buggify.h); without it every point is false.
  std::optional<buggify::Context> buggify_context;
  std::optional<buggify::ScopedContext> buggify_scope;
  if (scenario.buggify.enabled) {
    buggify::Settings settings;
    settings.points = scenario.buggify.points;
    settings.enable_probability = scenario.buggify.enable_probability;
    settings.fire_probability = scenario.buggify.fire_probability;
    if (scenario.random_faults.swarm) settings.enabled = draw_swarm(scenario, options.seed).buggify_points;
    buggify_context.emplace(options.seed, settings);
    buggify_scope.emplace(*buggify_context);
  }
  RunRecords records;
  {
    SimCluster cluster(scenario, workload, options);
    records = drive_run(scenario, options.seed, "sim", workload, cluster);
  }
  records.probes = probe::snapshot();
  if (buggify_context) {
    records.buggify = {{"enabled", buggify_context->enabled_points()}, {"fired", buggify_context->fired()}};
  }
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
