// The elastic workload's [elastic] reader and its registry entry (docs/scenarios.md, "Elastic
// training"): the job (steps, batch, optimizer), the agent (max_restarts, monitor interval, exit
// barrier), the model (input, layers) and [elastic.rendezvous], read as strictly as the rest.
#include <array>

#include "scenarios/workloads/elastic/elastic_judge.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/workloads/elastic/elastic_workload.h"
#include "scenarios/workloads/program/scenario_optimizer.h"
#include "scenarios/workloads/rendezvous/rendezvous_workload.h"

namespace dagsim::scenarios {

namespace {

constexpr int64_t kMaxWidth = 1024;
constexpr int64_t kMaxLayers = 32;
constexpr int64_t kMaxBatch = 1024;
constexpr int64_t kMaxSteps = 10000;

constexpr std::string_view kKeys[] = {"elastic"};
constexpr std::string_view kTableKeys[] = {"steps",       "batch",     "optimizer", "max_restarts", "monitor_interval_ms",
                                           "exit_barrier_timeout_ms", "input", "layers", "rendezvous"};
constexpr std::string_view kLayerKeys[] = {"out", "activation"};
const KeySetRegistration kTableKeysListed{{"[elastic]", "", "", kTableKeys}};
const KeySetRegistration kLayerKeysListed{{"[elastic]", "elastic.layers", "", kLayerKeys}};

void read(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) {
  const detail::Table t{reader.table(*top.get("elastic"), "elastic"), "elastic"};
  reader.check_keys(t, kTableKeys, "keys in [elastic]");
  ElasticSpec spec;
  spec.rendezvous = read_rendezvous_table(reader, reader.required(t, "rendezvous"), "elastic.rendezvous", scenario,
                                          RendezvousTableUse::elastic);
  spec.steps = static_cast<uint32_t>(reader.integer(reader.required(t, "steps"), t.key_path("steps"), 1, kMaxSteps));
  spec.batch = static_cast<uint32_t>(reader.opt_integer(t, "batch", 1, kMaxBatch).value_or(spec.batch));
  spec.optimizer = detail::read_optimizer(reader, reader.required(t, "optimizer"), t.key_path("optimizer"));
  spec.agent.max_restarts = static_cast<uint32_t>(reader.opt_integer(t, "max_restarts", 0, 1000).value_or(spec.agent.max_restarts));
  spec.agent.monitor_interval =
      reader.opt_duration(t, "monitor_interval_ms", detail::kPositiveMs).value_or(spec.agent.monitor_interval);
  spec.agent.exit_barrier_timeout =
      reader.opt_duration(t, "exit_barrier_timeout_ms", detail::kPositiveMs).value_or(spec.agent.exit_barrier_timeout);
  spec.input = static_cast<uint32_t>(reader.integer(reader.required(t, "input"), t.key_path("input"), 1, kMaxWidth));
  const toml::node& layers = reader.required(t, "layers");
  const std::vector<const toml::table*> tables = reader.tables(layers, t.key_path("layers"));
  if (tables.empty()) reader.fail(layers, t.key_path("layers"), "must have at least one layer");
  if (static_cast<int64_t>(tables.size()) > kMaxLayers) {
    reader.fail(layers, t.key_path("layers"), std::to_string(tables.size()) + " layers; at most " + std::to_string(kMaxLayers));
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    const detail::Table l{*tables[i], "elastic.layers[" + std::to_string(i) + "]"};
    reader.check_keys(l, kLayerKeys, "keys in elastic.layers");
    ElasticModelLayer layer;
    layer.out = static_cast<uint32_t>(reader.integer(reader.required(l, "out"), l.key_path("out"), 1, kMaxWidth));
    layer.activation = static_cast<Activation>(reader.opt_choice(l, "activation", kActivationNames).value_or(0));
    spec.layers.push_back(layer);
  }
  scenario.workload = WorkloadSpec("elastic", spec);
}

std::string summary(const Scenario& scenario) {
  const ElasticSpec& spec = scenario.workload.as<ElasticSpec>();
  return "elastic (" + std::to_string(spec.steps) + " steps, " + std::to_string(spec.layers.size()) + " layers, " +
         std::to_string(spec.rendezvous.settings.min_nodes) + ".." + std::to_string(spec.rendezvous.settings.max_nodes) + " of " +
         std::to_string(scenario.cluster.nodes - 1) + " nodes)";
}

std::unique_ptr<Workload> make(const Scenario& scenario, uint64_t seed) {
  return std::make_unique<ElasticWorkload>(scenario, seed);
}

std::unique_ptr<Judge> make_judge(const Scenario& scenario, const RunRecords& records) {
  return std::make_unique<ElasticJudge>(scenario, records);
}

// The store node runs no agent: it is never a member and runs no step. Steps commit from 1 to
// `steps`, so a later one never does.
std::string impossible_trigger(const Scenario& scenario, const FaultTrigger& trigger) {
  const ElasticSpec& spec = scenario.workload.as<ElasticSpec>();
  if (trigger.node && !spec.is_agent(*trigger.node)) {
    return scenario.cluster.node_name(*trigger.node) + " hosts the store and runs no agent, so it is never a member and runs no "
           "backward pass";
  }
  if (trigger.event == WorkloadEvent::step_committed && trigger.at_least > spec.steps) {
    return "the job has " + std::to_string(spec.steps) + " steps ([elastic] steps), so step " +
           std::to_string(trigger.at_least) + " is never committed";
  }
  return "";
}

constexpr CheckKind kChecks[] = {
    {"params_match_local", false, true, false, &judge_by<ElasticJudge, &ElasticJudge::params_match_local>},
    {"no_step_twice", false, false, false, &judge_by<ElasticJudge, &ElasticJudge::no_step_twice>},
    {"all_steps_committed", false, false, false, &judge_by<ElasticJudge, &ElasticJudge::all_steps_committed>},
    {"restarts", false, false, false, &judge_by<ElasticJudge, &ElasticJudge::restarts>},
    {"expect_error", false, false, true, &judge_by<ElasticJudge, &ElasticJudge::expect_error>},
};

}  // namespace

constexpr WorkloadEvent kEvents[] = {WorkloadEvent::member, WorkloadEvent::step_committed, WorkloadEvent::backward,
                                     WorkloadEvent::store_round};

const WorkloadType kElasticWorkload = {
    .name = "elastic",
    .keys = kKeys,
    .required = kKeys,
    .shown = "[elastic]",
    .to_add = "an [elastic] table",
    .read = &read,
    .summary = &summary,
    .make = &make,
    .make_judge = &make_judge,
    .checks = kChecks,
    .events = kEvents,
    .impossible_trigger = &impossible_trigger,
};

}  // namespace dagsim::scenarios
