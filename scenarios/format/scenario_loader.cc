// The scenario loader (scenario_loader.h): the top level, [cluster], [network], the workload and
// [[checks]]. The fault sections are in scenario_faults.cc; typed reads in toml_reader.cc.
//
// Sections are read in dependency order, not file order: [cluster] first (node names resolve
// against it), then max_virtual_time_ms (faults must fall before it), then everything else.
#include "scenarios/format/scenario_loader.h"

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>
#include <utility>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/scenario_devices.h"
#include "scenarios/format/scenario_faults.h"
#include "scenarios/format/scenario_text.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/format/toml_reader.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {
namespace {

using detail::Names;
using detail::Range;
using detail::Table;
using detail::TomlReader;
using Dist = runtime::LatencyModel::Dist;

constexpr int64_t kNsPerUs = 1'000;

// The top-level keys other than the workload tables.
constexpr std::array<std::string_view, 13> kTopKeys = {
    "name",    "description", "schedule", "max_virtual_time_ms", "max_wall_time_ms", "max_memory_mib",
    "cluster", "network",     "devices",  "faults",              "random_faults",    "checks", "buggify"};
const KeySetRegistration kTopKeysListed{{"Top level", "", "", kTopKeys}};

constexpr std::string_view kClusterKeys[] = {"nodes", "name_prefix", "clock_skew_max_ms", "clock_drift_max_ppm"};
const KeySetRegistration kClusterKeysListed{{"[cluster]", "", "", kClusterKeys}};

// Latency tables: `dist` picks which keys apply.
constexpr std::array<std::string_view, 4> kDists = {"constant", "uniform", "exponential", "normal"};
constexpr std::string_view kConstantKeys[] = {"dist", "us"};
constexpr std::string_view kUniformKeys[] = {"dist", "min_us", "max_us"};
constexpr std::string_view kExponentialKeys[] = {"dist", "mean_us", "min_us", "max_us"};
constexpr std::string_view kNormalKeys[] = {"dist", "mean_us", "stddev_us", "min_us", "max_us"};
constexpr std::string_view kAllLatencyKeys[] = {"dist", "us", "min_us", "max_us", "mean_us", "stddev_us"};
constexpr std::array<Names, 4> kLatencyKeys = {kConstantKeys, kUniformKeys, kExponentialKeys, kNormalKeys};
const KeySetRegistration kConstantKeysListed{{"Latency tables", "", "dist \"constant\"", kConstantKeys}};
const KeySetRegistration kUniformKeysListed{{"Latency tables", "", "dist \"uniform\"", kUniformKeys}};
const KeySetRegistration kExponentialKeysListed{{"Latency tables", "", "dist \"exponential\"", kExponentialKeys}};
const KeySetRegistration kNormalKeysListed{{"Latency tables", "", "dist \"normal\"", kNormalKeys}};

constexpr std::string_view kLinkKeys[] = {"from", "to", "latency", "bandwidth_mbps", "bidirectional"};
const KeySetRegistration kLinkKeysListed{{"[[network.links]]", "", "", kLinkKeys}};

constexpr std::string_view kNetworkKeys[] = {"latency", "bandwidth_mbps", "connection_failure_rate",
                                             "connection_timeout_ms", "links"};
const KeySetRegistration kNetworkKeysListed{{"[network]", "", "", kNetworkKeys}};

constexpr std::string_view kCheckKeys[] = {"kind", "nodes", "rtol", "atol", "equal_nan", "message"};
const KeySetRegistration kCheckKeysListed{{"[[checks]]", "", "", kCheckKeys}};

// The host's limits on a run (max_wall_time_ms, max_memory_mib): the CLI enforces them, the
// simulation never reads them (a run's course never depends on the host).
void read_host_limits(const TomlReader& reader, const Table& top, Scenario& scenario) {
  scenario.max_wall_time = reader.opt_duration(top, "max_wall_time_ms", detail::kPositiveMs);
  if (const auto mib = reader.opt_integer(top, "max_memory_mib", kMinMemoryMib, kMaxMemoryMib)) {
    scenario.max_memory_mib = static_cast<uint64_t>(*mib);
  }
}

std::string us(Duration d) { return detail::format_duration(d, kNsPerUs); }

ClusterSpec read_cluster(const TomlReader& reader, const toml::node& node) {
  const Table t{reader.table(node, "cluster"), "cluster"};
  reader.check_keys(t, kClusterKeys, "keys in [cluster]");
  ClusterSpec cluster;
  cluster.nodes = static_cast<uint32_t>(reader.opt_integer(t, "nodes", 1, 1024).value_or(cluster.nodes));
  if (std::optional<std::string> prefix = reader.opt_string(t, "name_prefix")) {
    const toml::node& at = *t.get("name_prefix");
    const bool valid_chars = std::all_of(prefix->begin(), prefix->end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
    if (prefix->empty()) reader.fail(at, "cluster.name_prefix", "must not be empty");
    if (!valid_chars) {
      reader.fail(at, "cluster.name_prefix", quote(*prefix) + " may contain only letters, digits, _ and -");
    }
    // A prefix ending in a digit would make "w12" both node 12 of "w" and node 2 of "w1".
    if (prefix->back() >= '0' && prefix->back() <= '9') {
      reader.fail(at, "cluster.name_prefix", quote(*prefix) + " must not end in a digit");
    }
    cluster.name_prefix = *prefix;
  }
  cluster.clock_skew_max = reader.opt_duration(t, "clock_skew_max_ms", Range{0, 1e6}).value_or(cluster.clock_skew_max);
  cluster.clock_drift_max_ppm =
      reader.opt_integer(t, "clock_drift_max_ppm", 0, 100'000).value_or(cluster.clock_drift_max_ppm);
  return cluster;
}

// One latency table (the default one or a link's): `dist` picks which keys apply.
runtime::LatencyModel read_latency(const TomlReader& reader, const toml::node& node, const std::string& path) {
  const Table t{reader.table(node, path), path};
  const size_t dist = reader.choice(reader.required(t, "dist"), t.key_path("dist"), kDists);
  reader.check_variant_keys(t, kLatencyKeys[dist], kAllLatencyKeys, "dist \"" + std::string(kDists[dist]) + "\"");
  const std::string why = " for dist \"" + std::string(kDists[dist]) + "\"";
  auto required_us = [&](std::string_view key, Range range_ms) {
    return reader.duration(reader.required(t, key, why), t.key_path(key), range_ms);
  };

  runtime::LatencyModel model;
  model.dist = static_cast<Dist>(dist);
  switch (model.dist) {
    case Dist::constant:
      return runtime::LatencyModel::constant(required_us("us", detail::kNonNegativeMs));
    case Dist::uniform: {
      // Read in a fixed order (not as two arguments), so the same key is reported first every time.
      const Duration min = required_us("min_us", detail::kNonNegativeMs);
      model = runtime::LatencyModel::uniform(min, required_us("max_us", detail::kNonNegativeMs));
      break;
    }
    case Dist::exponential:
      model.mean = required_us("mean_us", detail::kPositiveMs);
      model.max = required_us("max_us", detail::kNonNegativeMs);
      model.min = reader.opt_duration(t, "min_us", detail::kNonNegativeMs).value_or(Duration{0});
      break;
    case Dist::normal:
      model.mean = required_us("mean_us", detail::kNonNegativeMs);
      model.stddev = required_us("stddev_us", detail::kNonNegativeMs);
      model.max = required_us("max_us", detail::kNonNegativeMs);
      model.min = reader.opt_duration(t, "min_us", detail::kNonNegativeMs).value_or(Duration{0});
      if (model.mean < model.min || model.mean > model.max) {
        reader.fail(*t.get("mean_us"), t.key_path("mean_us"),
                    us(model.mean) + " is outside [min_us, max_us] = [" + us(model.min) + ", " + us(model.max) + "]");
      }
      break;
  }
  if (model.min > model.max) {
    // Only reachable with min_us given: max_us is never negative.
    reader.fail(*t.get("min_us"), t.key_path("min_us"), us(model.min) + " is more than max_us (" + us(model.max) + ")");
  }
  return model;
}

double bandwidth_bytes_per_s(const TomlReader& reader, const Table& t) {
  const double mbps = reader.opt_number(t, "bandwidth_mbps", Range{0, 1e9}).value_or(0);
  return mbps * 1e6 / 8;
}

void read_links(const TomlReader& reader, const toml::node& node, runtime::NetworkModel& network) {
  std::vector<std::string> declared_by;  // per entry of network.links, the [[links]] path that set it
  const std::vector<const toml::table*> tables = reader.tables(node, "network.links");
  for (size_t i = 0; i < tables.size(); ++i) {
    const Table t{*tables[i], "network.links[" + std::to_string(i) + "]"};
    reader.check_keys(t, kLinkKeys, "keys in [[network.links]]");
    runtime::LinkModel link;
    const uint32_t from = reader.node_ref(reader.required(t, "from"), t.key_path("from"));
    const uint32_t to = reader.node_ref(reader.required(t, "to"), t.key_path("to"));
    if (from == to) reader.fail(*t.get("to"), t.key_path("to"), "same node as from; a link joins two nodes");
    link.from = static_cast<WorkerId>(from);
    link.to = static_cast<WorkerId>(to);
    link.latency = read_latency(reader, reader.required(t, "latency"), t.key_path("latency"));
    if (t.get("bandwidth_mbps") != nullptr) link.bandwidth_bytes_per_s = bandwidth_bytes_per_s(reader, t);
    const bool bidirectional = reader.opt_boolean(t, "bidirectional").value_or(true);

    std::vector<runtime::LinkModel> directions = {link};
    if (bidirectional) {
      directions.push_back(link);
      std::swap(directions.back().from, directions.back().to);
    }
    for (const runtime::LinkModel& direction : directions) {
      for (size_t j = 0; j < network.links.size(); ++j) {
        if (network.links[j].from != direction.from || network.links[j].to != direction.to) continue;
        reader.fail(t.line(), t.path,
                    reader.cluster().node_name(direction.from) + " -> " + reader.cluster().node_name(direction.to) +
                        " is already set by " + declared_by[j]);
      }
      network.links.push_back(direction);
      declared_by.push_back(t.path);
    }
  }
}

runtime::NetworkModel read_network(const TomlReader& reader, const toml::node& node) {
  const Table t{reader.table(node, "network"), "network"};
  reader.check_keys(t, kNetworkKeys, "keys in [network]");
  runtime::NetworkModel network;
  if (const toml::node* latency = t.get("latency")) network.latency = read_latency(reader, *latency, "network.latency");
  network.bandwidth_bytes_per_s = bandwidth_bytes_per_s(reader, t);
  network.connection_failure_rate =
      reader.opt_number(t, "connection_failure_rate", Range{0, 1, false, /*hi_open=*/true}).value_or(0);
  network.connection_timeout =
      reader.opt_duration(t, "connection_timeout_ms", detail::kPositiveMs).value_or(network.connection_timeout);
  if (const toml::node* links = t.get("links")) read_links(reader, *links, network);
  return network;
}

// The first of a workload's keys in the file (in file order), or null when it has none.
const toml::key* first_workload_key(const Table& top, const WorkloadType& workload) {
  const toml::key* first = nullptr;
  auto position = [](const toml::key& k) { return std::tuple(k.source().begin.line, k.source().begin.column); };
  for (auto&& [key, value] : top.table) {
    if (std::find(workload.keys.begin(), workload.keys.end(), key.str()) == workload.keys.end()) continue;
    if (first == nullptr || position(key) < position(*first)) first = &key;
  }
  return first;
}

// The workload whose key comes first in the file, or null when none has one (read_workload then
// says so, and refuses a second).
const WorkloadType* first_workload(const Table& top) {
  const WorkloadType* first = nullptr;
  int first_line = 0;
  for (const WorkloadType* workload : workload_types()) {
    const toml::key* key = first_workload_key(top, *workload);
    if (key == nullptr) continue;
    const int line = static_cast<int>(key->source().begin.line);
    if (first == nullptr || line < first_line) {
      first = workload;
      first_line = line;
    }
  }
  return first;
}

// Every workload's name, for messages: "a [heartbeat] table, program + backward, or [model] + [train]".
std::string workloads_listed() {
  std::string out;
  const auto types = workload_types();
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string_view name = types[i]->to_add.empty() ? types[i]->shown : types[i]->to_add;
    out += (i == 0 ? "" : i + 1 == types.size() ? ", or " : ", ") + std::string(name);
  }
  return out;
}

// Exactly one workload, with all of its keys, read by its registry entry; returns it.
const WorkloadType& read_workload(const TomlReader& reader, const Table& top, Scenario& scenario) {
  // The workloads present, in the order they start in the file.
  std::vector<std::pair<const WorkloadType*, const toml::key*>> present;
  for (const WorkloadType* workload : workload_types()) {
    if (const toml::key* key = first_workload_key(top, *workload)) present.emplace_back(workload, key);
  }
  std::sort(present.begin(), present.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  if (present.empty()) {
    reader.fail(1, "", "no workload: add " + workloads_listed());
  }
  if (present.size() > 1) {
    const toml::key& second = *present[1].second;
    reader.fail(static_cast<int>(second.source().begin.line), second.str(),
                "a scenario has exactly one workload, and this one already has " +
                    std::string(present[0].first->shown));
  }

  const WorkloadType& workload = *present[0].first;
  std::vector<std::string_view> missing;
  for (std::string_view key : workload.required) {
    if (top.get(key) == nullptr) missing.push_back(key);
  }
  if (!missing.empty()) {
    // "a, b and c"
    auto listed = [](const auto& names) {
      std::string out;
      for (size_t i = 0; i < names.size(); ++i) {
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
      }
      return out;
    };
    const toml::key& first = *present[0].second;
    reader.fail(static_cast<int>(first.source().begin.line), first.str(),
                "a " + std::string(workload.name) + " workload needs " + listed(workload.required) + "; missing " +
                    listed(missing));
  }

  workload.read(reader, top, scenario);
  DAGSIM_ASSERT_MSG(scenario.workload.name() == workload.name, "a workload's reader sets its own spec");
  return workload;
}

// The workloads (other than `workload`) that have a check kind named `kind`: "program or model".
std::string workloads_checking(std::string_view kind) {
  std::string out;
  for (const WorkloadType* type : workload_types()) {
    if (type->find_check(kind) != nullptr) out += (out.empty() ? "" : " or ") + std::string(type->name);
  }
  return out;
}

// A check's own value as JSON (CheckSpec::params): integers stay integers, tables become objects.
// The file's nesting is already bounded (check_nesting_depth), so the recursion is too.
nlohmann::json toml_to_json(const TomlReader& reader, const toml::node& n, const std::string& path) {
  if (const auto* v = n.as_string()) return v->get();
  if (const auto* v = n.as_integer()) return v->get();
  if (const auto* v = n.as_floating_point()) return v->get();
  if (const auto* v = n.as_boolean()) return v->get();
  if (const auto* a = n.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < a->size(); ++i) out.push_back(toml_to_json(reader, *a->get(i), path + "[" + std::to_string(i) + "]"));
    return out;
  }
  if (const auto* t = n.as_table()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto&& [key, value] : *t) out[std::string(key.str())] = toml_to_json(reader, value, path + "." + std::string(key.str()));
    return out;
  }
  reader.fail(n, path, "a date or time is no value a check takes");
}

CheckSpec read_check(const TomlReader& reader, const Table& t, const WorkloadType& workload, const Scenario& scenario) {
  // Every workload's kinds (each once, in registry order), so a kind of another workload reads
  // as "checks the X workload" rather than as unknown.
  std::vector<std::string_view> names;
  for (const WorkloadType* type : workload_types()) {
    for (const CheckKind& kind : type->checks) {
      if (std::find(names.begin(), names.end(), kind.name) == names.end()) names.push_back(kind.name);
    }
  }

  // The common keys and every kind's own (CheckKind::extra_keys), so a misspelt `ms` gets a
  // suggestion; one of another kind is refused below, once the kind is known.
  std::vector<std::string_view> keys(kCheckKeys, kCheckKeys + std::size(kCheckKeys));
  for (const WorkloadType* type : workload_types()) {
    for (const CheckKind& kind : type->checks) {
      for (std::string_view key : kind.extra_keys) {
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
    }
  }
  reader.check_keys(t, keys, "keys in [[checks]]");
  CheckSpec check;
  check.line = t.line();
  const toml::node& kind_node = reader.required(t, "kind");
  check.kind = std::string(names[reader.choice(kind_node, t.key_path("kind"), names)]);
  const std::string variant = "kind \"" + check.kind + "\"";
  const CheckKind* found = workload.find_check(check.kind);
  if (found == nullptr) {
    reader.fail(kind_node, t.key_path("kind"),
                variant + " checks the " + workloads_checking(check.kind) + " workload, which this scenario does not run");
  }
  const CheckKind& kind = *found;
  if (kind.inapplicable != nullptr) {
    if (const std::string why = kind.inapplicable(scenario); !why.empty()) {
      reader.fail(kind_node, t.key_path("kind"), variant + " " + why);
    }
  }
  if (kind.takes_nodes) {
    check.nodes = reader.node_list(reader.required(t, "nodes", " for " + variant), t.key_path("nodes"), false);
  } else if (const toml::node* nodes = t.get("nodes")) {
    reader.fail(*nodes, t.key_path("nodes"), "does not apply to " + variant);
  }
  // Tolerances are parsed for every kind so a bad value reads the same everywhere. Absent ones
  // stay nullopt: the check applies its own defaults.
  const Range tolerance{0, std::numeric_limits<double>::infinity(), false, /*hi_open=*/true};
  check.rtol = reader.opt_number(t, "rtol", tolerance);
  check.atol = reader.opt_number(t, "atol", tolerance);
  check.equal_nan = reader.opt_boolean(t, "equal_nan").value_or(true);
  for (std::string_view key : {"rtol", "atol", "equal_nan"}) {
    if (!kind.takes_tolerances && t.get(key) != nullptr) {
      reader.fail(*t.get(key), t.key_path(key), "does not apply to " + variant);
    }
  }
  if (kind.takes_message && (!kind.message_optional || t.get("message") != nullptr)) {
    const toml::node& message = reader.required(t, "message", " for " + variant);
    check.message = reader.string(message, t.key_path("message"));
    if (check.message.empty()) reader.fail(message, t.key_path("message"), "must not be empty");
  } else if (const toml::node* message = t.get("message")) {
    reader.fail(*message, t.key_path("message"), "does not apply to " + variant);
  }
  // The kind's own keys, kept as the file gave them; their types and ranges are the workload's to
  // check (WorkloadType::finish), which knows what they mean.
  for (std::string_view key : keys) {
    const toml::node* value = t.get(key);
    if (value == nullptr || std::find(std::begin(kCheckKeys), std::end(kCheckKeys), key) != std::end(kCheckKeys)) continue;
    if (std::find(kind.extra_keys.begin(), kind.extra_keys.end(), key) == kind.extra_keys.end()) {
      reader.fail(*value, t.key_path(key), "does not apply to " + variant);
    }
    check.params[std::string(key)] = toml_to_json(reader, *value, t.key_path(key));
  }
  return check;
}

// `when = { backward = "worker2", pass = 3 }`, as the file wrote it (defaults included).
std::string trigger_text(const Scenario& scenario, const FaultTrigger& trigger) {
  const auto node = [&] { return quote(scenario.cluster.node_name(trigger.node.value_or(0))); };
  const std::string n = std::to_string(trigger.at_least);
  std::string text;
  switch (trigger.event) {
    case WorkloadEvent::member: text = "member = " + node() + ", round = " + n; break;
    case WorkloadEvent::step_committed: text = "step = " + n; break;
    case WorkloadEvent::backward: text = "backward = " + node() + ", pass = " + n; break;
    case WorkloadEvent::store_round: text = "store_round = " + n; break;
  }
  return "when = { " + text + " }";
}

// A trigger on an event the workload never reports, or one the scenario shows can never come
// (WorkloadType::impossible_trigger), would wait forever: the fault is refused, naming why.
void check_triggers(const TomlReader& reader, const WorkloadType& workload, const Scenario& scenario) {
  for (size_t i = 0; i < scenario.faults.size(); ++i) {
    const FaultSpec& f = scenario.faults[i];
    if (!f.when) continue;
    const std::string path = "faults[" + std::to_string(i) + "].when";
    const std::string fault = "the " + std::string(detail::fault_kind_text(f.kind)) + " fault's ";
    const auto& events = workload.events;
    if (std::find(events.begin(), events.end(), f.when->event) == events.end()) {
      std::string reported;
      for (WorkloadEvent e : events) reported += (reported.empty() ? "" : ", ") + std::string(workload_event_name(e));
      reader.fail(f.line, path,
                  "the " + std::string(workload.name) + " workload never reports " +
                      std::string(workload_event_name(f.when->event)) + " events, so this fault could never fire" +
                      (reported.empty() ? " (it reports none: use at_ms)" : " (it reports: " + reported + ")"));
    }
    if (workload.impossible_trigger == nullptr) continue;
    if (const std::string why = workload.impossible_trigger(scenario, *f.when); !why.empty()) {
      reader.fail(f.line, path, fault + trigger_text(scenario, *f.when) + " can never fire: " + why);
    }
  }
}

Scenario read_scenario(const toml::table& root, std::string_view source_name) {
  TomlReader reader(source_name);
  const Table top{root, ""};
  std::vector<std::string_view> top_keys(kTopKeys.begin(), kTopKeys.end());
  for (const WorkloadType* workload : workload_types()) {
    top_keys.insert(top_keys.end(), workload->keys.begin(), workload->keys.end());
  }
  reader.check_keys(top, top_keys, "top-level keys");

  Scenario scenario;
  scenario.file = std::string(source_name);
  scenario.name = reader.string(reader.required(top, "name"), "name");
  if (scenario.name.empty()) reader.fail(*top.get("name"), "name", "must not be empty");
  scenario.description = reader.opt_string(top, "description").value_or("");
  static constexpr std::array<std::string_view, 2> kSchedules = {"fifo", "random"};
  scenario.schedule = static_cast<Schedule>(reader.opt_choice(top, "schedule", kSchedules).value_or(0));
  scenario.max_virtual_time =
      reader.opt_duration(top, "max_virtual_time_ms", detail::kPositiveMs).value_or(scenario.max_virtual_time);
  read_host_limits(reader, top, scenario);

  // A workload that runs with no simulated cluster (a [job]) refuses those sections by name, before
  // anything reads them.
  const WorkloadType* first = first_workload(top);
  if (first != nullptr) {
    for (const RefusedKey& refused : first->refused) {
      for (auto&& [key, value] : top.table) {
        if (key.str() != refused.key) continue;
        reader.fail(static_cast<int>(key.source().begin.line), key.str(),
                    "does not apply to a " + std::string(first->shown) + " scenario: " + std::string(refused.why));
      }
    }
  }
  const bool reads_faults = first != nullptr && first->reads_faults;

  if (const toml::node* cluster = top.get("cluster")) scenario.cluster = read_cluster(reader, *cluster);
  reader.set_cluster(scenario.cluster);
  if (const toml::node* network = top.get("network")) scenario.network = read_network(reader, *network);
  if (const toml::node* devices = top.get("devices")) scenario.devices = detail::read_devices(reader, *devices);
  reader.set_gpus(scenario.devices.gpus);
  if (const toml::node* buggify = top.get("buggify")) scenario.buggify = detail::read_buggify(reader, *buggify);
  const toml::node* random = top.get("random_faults");
  if (!reads_faults) {
    if (const toml::node* faults = top.get("faults")) {
      scenario.faults = detail::read_faults(reader, *faults, scenario.max_virtual_time);
    }
    if (random != nullptr) scenario.random_faults = detail::read_random_faults(reader, *random, scenario.max_virtual_time);
  }
  const WorkloadType& workload = read_workload(reader, top, scenario);
  if (reads_faults) {
    // The workload set its cluster and its end (max_virtual_time): [random_faults] names its nodes.
    reader.set_cluster(scenario.cluster);
    if (random != nullptr) scenario.random_faults = detail::read_random_faults(reader, *random, scenario.max_virtual_time);
  }
  check_triggers(reader, workload, scenario);
  if (const toml::node* checks = top.get("checks")) {
    const std::vector<const toml::table*> tables = reader.tables(*checks, "checks");
    for (size_t i = 0; i < tables.size(); ++i) {
      scenario.checks.push_back(read_check(reader, Table{*tables[i], "checks[" + std::to_string(i) + "]"}, workload, scenario));
    }
  }
  if (workload.finish != nullptr) workload.finish(reader, top, scenario);
  scenario.warnings = reader.warnings();
  return scenario;
}

}  // namespace

Scenario parse_scenario(std::string_view toml_text, std::string_view source_name) {
  if (toml_text.size() > detail::kMaxScenarioBytes) {
    throw errors::invalid_scenario(printable(source_name, kPathMax) + ": is larger than " +
                                   std::to_string(detail::kMaxScenarioBytes >> 20) + " MiB, the limit of a scenario file");
  }
  // Before toml++ sees it: deep nesting would overflow the stack inside the parser.
  detail::check_nesting_depth(toml_text, source_name);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    throw errors::invalid_scenario(printable(source_name, kPathMax) + ":" + std::to_string(at.line) + ":" +
                                   std::to_string(at.column) + ": invalid TOML: " + printable(e.description(), 300));
  }
  return read_scenario(root, source_name);
}

Scenario load_scenario_file(const std::string& path) { return parse_scenario(read_scenario_text(path), path); }

std::string read_scenario_text(const std::string& path) { return detail::read_bounded_text(path); }

}  // namespace dagsim::scenarios
