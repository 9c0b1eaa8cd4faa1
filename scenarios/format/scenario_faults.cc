// The [[faults]] and [random_faults] sections of the scenario loader (scenario_faults.h).
//
// Each fault kind takes its own keys; a key of another kind is an error naming the kind, so a
// `restart_at_ms` on a pause (which resumes with `resume_at_ms`) is caught rather than ignored.
#include "scenarios/format/scenario_faults.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <string>

#include "core/base/buggify.h"
#include "core/base/printable.h"
#include "scenarios/format/key_suggestion.h"
#include "scenarios/format/scenario_keys.h"

namespace dagsim::scenarios {

std::string_view workload_event_name(WorkloadEvent event) {
  switch (event) {
    case WorkloadEvent::member: return "member";
    case WorkloadEvent::step_committed: return "step_committed";
    case WorkloadEvent::backward: return "backward";
    case WorkloadEvent::store_round: return "store_round";
  }
  DAGSIM_UNREACHABLE();
}

std::optional<WorkloadEvent> parse_workload_event(std::string_view name) {
  for (WorkloadEvent e : {WorkloadEvent::member, WorkloadEvent::step_committed, WorkloadEvent::backward, WorkloadEvent::store_round}) {
    if (workload_event_name(e) == name) return e;
  }
  return std::nullopt;
}

}  // namespace dagsim::scenarios

namespace dagsim::scenarios::detail {
namespace {

using Kind = FaultSpec::Kind;

constexpr int64_t kNsPerMs = 1'000'000;

// In FaultSpec::Kind's order.
constexpr std::array<std::string_view, 7> kKindNames = {"kill",   "crash",     "restart", "pause",
                                                        "resume", "partition", "heal"};

constexpr std::string_view kKillKeys[] = {"at_ms", "when", "kind", "node", "restart_at_ms", "restart_after_ms"};
constexpr std::string_view kNodeKeys[] = {"at_ms", "when", "kind", "node"};
constexpr std::string_view kPauseKeys[] = {"at_ms", "when", "kind", "node", "resume_at_ms", "resume_after_ms"};
constexpr std::string_view kPartitionKeys[] = {"at_ms", "when", "kind", "groups", "from", "to", "heal_at_ms", "heal_after_ms"};
constexpr std::string_view kHealKeys[] = {"at_ms", "when", "kind"};
constexpr std::string_view kAllFaultKeys[] = {"at_ms",         "when",  "kind",          "node",         "restart_at_ms",
                                              "resume_at_ms",  "groups", "from",         "to",           "heal_at_ms",
                                              "restart_after_ms", "resume_after_ms", "heal_after_ms"};
// A trigger's keys: one event key, its number's key, and the delay.
constexpr std::string_view kWhenKeys[] = {"member", "round", "step", "backward", "pass", "store_round", "after_ms"};
const KeySetRegistration kKillKeysListed{{"[[faults]]", "", "kind \"kill\" or \"crash\"", kKillKeys}};
const KeySetRegistration kNodeKeysListed{{"[[faults]]", "", "kind \"restart\" or \"resume\"", kNodeKeys}};
const KeySetRegistration kPauseKeysListed{{"[[faults]]", "", "kind \"pause\"", kPauseKeys}};
const KeySetRegistration kPartitionKeysListed{{"[[faults]]", "", "kind \"partition\"", kPartitionKeys}};
const KeySetRegistration kHealKeysListed{{"[[faults]]", "", "kind \"heal\"", kHealKeys}};
const KeySetRegistration kWhenKeysListed{{"[[faults]]", "when", "", kWhenKeys}};
constexpr std::string_view kRandomFaultKeys[] = {
    "kill_per_min",     "crash_per_min",   "pause_per_min", "partition_per_min", "start_ms", "end_ms",
    "restart_after_ms", "resume_after_ms", "heal_after_ms", "max_concurrent",    "exclude", "swarm"};
const KeySetRegistration kRandomFaultKeysListed{{"[random_faults]", "", "", kRandomFaultKeys}};
constexpr std::string_view kBuggifyKeys[] = {"enabled", "points", "enable_probability", "fire_probability"};
const KeySetRegistration kBuggifyKeysListed{{"[buggify]", "", "", kBuggifyKeys}};
// In WorkloadEvent's order: the event key of `when`.
constexpr std::array<std::string_view, 4> kEventKeys = {"member", "step", "backward", "store_round"};

Names keys_for(Kind kind) {
  switch (kind) {
    case Kind::kill:
    case Kind::crash:
      return kKillKeys;
    case Kind::restart:
    case Kind::resume:
      return kNodeKeys;
    case Kind::pause:
      return kPauseKeys;
    case Kind::partition:
      return kPartitionKeys;
    case Kind::heal:
      return kHealKeys;
  }
  return kHealKeys;
}

// The key that sets FaultSpec::until for this kind ("" when the kind has none).
std::string_view until_key(Kind kind) {
  switch (kind) {
    case Kind::kill:
    case Kind::crash:
      return "restart_at_ms";
    case Kind::pause:
      return "resume_at_ms";
    case Kind::partition:
      return "heal_at_ms";
    case Kind::restart:
    case Kind::resume:
    case Kind::heal:
      return "";
  }
  return "";
}

// The key that sets FaultSpec::until_after for this kind ("" when the kind has none).
std::string until_after_key(Kind kind) {
  const std::string_view at = until_key(kind);
  return at.empty() ? "" : std::string(at.substr(0, at.size() - 5)) + "after_ms";  // "restart_at_ms" -> "restart_after_ms"
}

bool takes_node(Kind kind) { return kind != Kind::partition && kind != Kind::heal; }

bool has(const std::vector<uint32_t>& nodes, uint32_t node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

std::string ms(Duration d) { return format_duration(d, kNsPerMs); }

// Symmetric `groups`, or one-way `from` + `to`: exactly one of the two forms.
void read_partition(const TomlReader& reader, const Table& t, FaultSpec& fault) {
  const toml::node* groups = t.get("groups");
  const toml::node* from = t.get("from");
  const toml::node* to = t.get("to");
  if (groups != nullptr) {
    if (from != nullptr || to != nullptr) {
      const std::string_view key = from != nullptr ? "from" : "to";
      reader.fail(*t.get(key), t.key_path(key),
                  "give either groups (a symmetric partition) or from + to (a one-way partition), not both");
    }
    const std::string path = t.key_path("groups");
    const toml::array& list = reader.array(*groups, path);
    if (list.size() < 2) reader.fail(*groups, path, "needs at least 2 groups, got " + std::to_string(list.size()));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string group_path = path + "[" + std::to_string(i) + "]";
      std::vector<uint32_t> group = reader.node_list(list[i], group_path, /*allow_empty=*/false);
      for (uint32_t node : group) {
        for (size_t j = 0; j < fault.groups.size(); ++j) {
          if (!has(fault.groups[j], node)) continue;
          reader.fail(list[i], group_path,
                      "groups must be disjoint: " + reader.cluster().node_name(node) + " is in groups[" +
                          std::to_string(j) + "] and groups[" + std::to_string(i) + "]");
        }
      }
      fault.groups.push_back(std::move(group));
    }
    return;
  }
  if (from == nullptr && to == nullptr) {
    reader.fail(t.line(), t.key_path("groups"),
                "required for kind \"partition\" (or from + to for a one-way partition)");
  }
  fault.from =
      reader.node_list(reader.required(t, "from", " with to (a one-way partition)"), t.key_path("from"), false);
  fault.to = reader.node_list(reader.required(t, "to", " with from (a one-way partition)"), t.key_path("to"), false);
  for (uint32_t node : fault.to) {
    if (has(fault.from, node)) {
      reader.fail(*to, t.key_path("to"),
                  reader.cluster().node_name(node) + " is also in from; from and to must be disjoint");
    }
  }
}

// `when = { member = "worker2", round = 1, after_ms = 200 }` and its kin (docs/scenarios.md).
FaultTrigger read_trigger(const TomlReader& reader, const Table& t) {
  reader.check_keys(t, kWhenKeys, "keys in when");
  FaultTrigger trigger;
  std::optional<size_t> event;
  for (size_t i = 0; i < kEventKeys.size(); ++i) {
    if (t.get(kEventKeys[i]) == nullptr) continue;
    if (event) {
      reader.fail(*t.get(kEventKeys[i]), t.key_path(kEventKeys[i]),
                  "a trigger waits for one event; " + std::string(kEventKeys[*event]) + " is already given");
    }
    event = i;
  }
  if (!event) reader.fail(t.line(), t.path, "names no event; one of: " + join_names(kEventKeys));
  trigger.event = static_cast<WorkloadEvent>(*event);
  constexpr int64_t kMaxNumber = int64_t{1} << 48;
  auto number_key = [&](std::string_view key, WorkloadEvent only) {
    if (t.get(key) == nullptr) return;
    if (trigger.event != only) {
      reader.fail(*t.get(key), t.key_path(key), "goes with " + std::string(kEventKeys[static_cast<size_t>(only)]));
    }
    trigger.at_least = static_cast<uint64_t>(reader.integer(*t.get(key), t.key_path(key), 0, kMaxNumber));
  };
  number_key("round", WorkloadEvent::member);
  number_key("pass", WorkloadEvent::backward);
  switch (trigger.event) {
    case WorkloadEvent::member:
      trigger.node = reader.node_ref(*t.get("member"), t.key_path("member"));
      break;
    case WorkloadEvent::backward:
      trigger.node = reader.node_ref(*t.get("backward"), t.key_path("backward"));
      if (trigger.at_least == 0) trigger.at_least = 1;  // the first pass
      break;
    case WorkloadEvent::step_committed:
      trigger.at_least = static_cast<uint64_t>(reader.integer(*t.get("step"), t.key_path("step"), 1, kMaxNumber));
      break;
    case WorkloadEvent::store_round:
      trigger.at_least = static_cast<uint64_t>(reader.integer(*t.get("store_round"), t.key_path("store_round"), 0, kMaxNumber));
      break;
  }
  if (std::optional<Duration> after = reader.opt_duration(t, "after_ms", kNonNegativeMs)) trigger.after = *after;
  return trigger;
}

FaultSpec read_fault(const TomlReader& reader, const Table& t, Duration max_virtual_time) {
  FaultSpec fault;
  fault.line = t.line();
  fault.kind = static_cast<Kind>(reader.choice(reader.required(t, "kind"), t.key_path("kind"), kKindNames));
  const std::string variant = "kind \"" + std::string(kKindNames[static_cast<size_t>(fault.kind)]) + "\"";
  reader.check_variant_keys(t, keys_for(fault.kind), kAllFaultKeys, variant);

  if (t.get("when") != nullptr) {
    if (t.get("at_ms") != nullptr) reader.fail(*t.get("at_ms"), t.key_path("at_ms"), "a fault takes at_ms or when, not both");
    const Table when{reader.table(*t.get("when"), t.key_path("when")), t.key_path("when")};
    fault.when = read_trigger(reader, when);
    // Its event comes at 0 at the earliest, so the fault strikes at after_ms at the earliest.
    if (fault.when->after > max_virtual_time) {
      reader.fail(*when.get("after_ms"), when.key_path("after_ms"),
                  ms(fault.when->after) + " is after max_virtual_time_ms (" + ms(max_virtual_time) +
                      "): the fault would strike after the run ends, so it can never fire");
    }
  } else if (t.get("at_ms") == nullptr) {
    reader.fail(t.line(), t.key_path("at_ms"), "required (or when = { ... }, a workload event; docs/scenarios.md)");
  } else {
    fault.at = reader.duration(*t.get("at_ms"), t.key_path("at_ms"), kNonNegativeMs);
  }
  if (fault.at > max_virtual_time) {
    reader.fail(*t.get("at_ms"), t.key_path("at_ms"),
                ms(fault.at) + " is after max_virtual_time_ms (" + ms(max_virtual_time) + ")");
  }
  if (takes_node(fault.kind)) {
    fault.node = reader.node_ref(reader.required(t, "node", " for " + variant), t.key_path("node"));
  }
  if (fault.kind == Kind::partition) read_partition(reader, t, fault);

  const std::string_view until = until_key(fault.kind);
  if (!until.empty()) {
    const std::string after = until_after_key(fault.kind);
    fault.until = reader.opt_duration(t, until, kNonNegativeMs);
    fault.until_after = reader.opt_duration(t, after, kPositiveMs);
    if (fault.until && fault.until_after) {
      reader.fail(*t.get(after), t.key_path(after), "takes " + std::string(until) + " or " + after + ", not both");
    }
    if (fault.until && fault.when) {
      // When the trigger fires is known only as the run goes: its end is relative to it.
      reader.fail(*t.get(until), t.key_path(until), "a fault with when = { ... } ends " + after + " after it fires");
    }
    if (fault.until && *fault.until <= fault.at) {
      reader.fail(*t.get(until), t.key_path(until), ms(*fault.until) + " is not after at_ms (" + ms(fault.at) + ")");
    }
    // At a time, the end is a time too: the rest of the run sees one form.
    if (fault.until_after && !fault.when) {
      fault.until = fault.at + *fault.until_after;
      fault.until_after.reset();
    }
  }
  return fault;
}

}  // namespace

std::string_view fault_kind_text(FaultSpec::Kind kind) { return kKindNames[static_cast<size_t>(kind)]; }

std::vector<FaultSpec> read_faults(const TomlReader& reader, const toml::node& faults, Duration max_virtual_time) {
  std::vector<FaultSpec> out;
  const std::vector<const toml::table*> tables = reader.tables(faults, "faults");
  for (size_t i = 0; i < tables.size(); ++i) {
    out.push_back(read_fault(reader, Table{*tables[i], "faults[" + std::to_string(i) + "]"}, max_virtual_time));
  }
  return out;
}

RandomFaultSpec read_random_faults(const TomlReader& reader, const toml::node& random_faults,
                                   Duration max_virtual_time) {
  static constexpr Range kRate{0, 1e6};
  const Table t{reader.table(random_faults, "random_faults"), "random_faults"};
  reader.check_keys(t, kRandomFaultKeys, "keys in [random_faults]");

  RandomFaultSpec spec;
  spec.kill_per_min = reader.opt_number(t, "kill_per_min", kRate).value_or(spec.kill_per_min);
  spec.crash_per_min = reader.opt_number(t, "crash_per_min", kRate).value_or(spec.crash_per_min);
  spec.pause_per_min = reader.opt_number(t, "pause_per_min", kRate).value_or(spec.pause_per_min);
  spec.partition_per_min = reader.opt_number(t, "partition_per_min", kRate).value_or(spec.partition_per_min);
  spec.start = reader.opt_duration(t, "start_ms", kNonNegativeMs).value_or(spec.start);
  spec.end = reader.opt_duration(t, "end_ms", kPositiveMs);
  if (spec.end && *spec.end <= spec.start) {
    reader.fail(*t.get("end_ms"), t.key_path("end_ms"),
                ms(*spec.end) + " is not after start_ms (" + ms(spec.start) + ")");
  }
  spec.restart_after = reader.opt_duration(t, "restart_after_ms", kPositiveMs).value_or(spec.restart_after);
  spec.resume_after = reader.opt_duration(t, "resume_after_ms", kPositiveMs).value_or(spec.resume_after);
  spec.heal_after = reader.opt_duration(t, "heal_after_ms", kPositiveMs).value_or(spec.heal_after);
  spec.max_concurrent = static_cast<uint32_t>(
      reader.opt_integer(t, "max_concurrent", 1, reader.cluster().nodes).value_or(spec.max_concurrent));
  spec.exclude = reader.opt_node_list(t, "exclude", /*allow_empty=*/true).value_or(spec.exclude);
  spec.swarm = reader.opt_boolean(t, "swarm").value_or(spec.swarm);

  // The window the rates apply to, as long as it can be at load time: the workload's end is known
  // only to the run, and lies before max_virtual_time.
  const Duration stop = spec.end.value_or(max_virtual_time);
  const double window_ms = stop > spec.start ? static_cast<double>((stop - spec.start).count()) / kNsPerMs : 0;
  const std::pair<std::string_view, double> rates[] = {{"kill_per_min", spec.kill_per_min},
                                                       {"crash_per_min", spec.crash_per_min},
                                                       {"pause_per_min", spec.pause_per_min},
                                                       {"partition_per_min", spec.partition_per_min}};
  for (const auto& [key, per_min] : rates) {
    const double expected = per_min * window_ms / 60'000;
    if (expected <= RandomFaultSpec::kMaxExpected) continue;
    reader.fail(*t.get(key), t.key_path(key),
                format_number(per_min) + " per minute over " + format_number(window_ms) + " ms (" +
                    (spec.end ? "start_ms to end_ms" : "start_ms to max_virtual_time_ms") + ") is about " +
                    format_number(std::round(expected)) + " faults; at most " +
                    format_number(RandomFaultSpec::kMaxExpected) + " of each kind are expected in a run");
  }
  return spec;
}

BuggifySpec read_buggify(const TomlReader& reader, const toml::node& buggify) {
  static constexpr Range kProbability{0, 1};
  const Table t{reader.table(buggify, "buggify"), "buggify"};
  reader.check_keys(t, kBuggifyKeys, "keys in [buggify]");
  BuggifySpec spec;
  spec.enabled = reader.opt_boolean(t, "enabled").value_or(spec.enabled);
  spec.enable_probability = reader.opt_number(t, "enable_probability", kProbability).value_or(spec.enable_probability);
  spec.fire_probability = reader.opt_number(t, "fire_probability", kProbability).value_or(spec.fire_probability);
  if (const toml::node* points = t.get("points")) {
    const std::vector<std::string> known = buggify::all_point_names();
    const std::vector<std::string_view> known_views(known.begin(), known.end());
    const toml::array& list = reader.array(*points, t.key_path("points"));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = t.key_path("points") + "[" + std::to_string(i) + "]";
      std::string name = reader.string(list[i], path);
      if (!std::binary_search(known.begin(), known.end(), name)) {
        reader.fail(list[i], path,
                    "no code-level fault point \"" + printable(name, 80) + "\" in this build" + key_suggestion(name, known_views) +
                        "; the build's points: " + join_names(known_views));
      }
      if (std::find(spec.points.begin(), spec.points.end(), name) != spec.points.end()) {
        reader.fail(list[i], path, "\"" + name + "\" is listed twice");
      }
      spec.points.push_back(std::move(name));
    }
    if (spec.points.empty()) reader.fail(*points, t.key_path("points"), "an empty list enables no point; leave the key out for all");
  }
  return spec;
}

}  // namespace dagsim::scenarios::detail
