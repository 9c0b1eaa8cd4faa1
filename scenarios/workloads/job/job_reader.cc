// The [job] reader (job_reader.h). It promises that a JobSpec it returns can be run as written:
// every agent and worker a fault or trigger names exists, every time falls before the timeout,
// every regex compiles, every list is bounded, and a key that does not apply to a fault's kind or a
// launcher is an error naming it, never silently ignored. Messages are the loader's one format,
// "FILE:LINE: KEY: problem" (toml_reader.h).
#include "scenarios/workloads/job/job_reader.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <deque>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/base/printable.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/workloads/job/job_judge.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

using detail::Names;
using detail::Range;
using detail::Table;
using detail::TomlReader;
using FaultKind = JobFault::Kind;

// Bounds: a job is real processes on one host, so these are far above any sensible job and far
// below what would exhaust the host (processes, argv, a regex engine's recursion).
constexpr int64_t kMaxAgents = 64;  // agents and late joiners together
constexpr int64_t kMaxProcPerNode = 64;
constexpr size_t kMaxFaults = 256;
constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 4096;
constexpr size_t kMaxPatternBytes = 1024;  // an output regex or a store_key glob
constexpr size_t kMaxGlobStars = 16;       // a glob's '*' (backtracking grows with them)
constexpr size_t kMaxMapEntries = 256;     // env, rdzv_conf
constexpr int64_t kMaxRestarts = 1000;
constexpr int64_t kMaxRound = 1'000'000;
constexpr double kMaxMonitorIntervalS = 3600;

constexpr std::string_view kKeys[] = {"job"};
constexpr std::string_view kJobKeys[] = {
    "command",    "module",       "no_python", "python",       "agents",           "nnodes",
    "nproc_per_node", "launcher", "rdzv_backend", "rdzv_conf", "max_restarts",     "monitor_interval",
    "env",        "timeout_ms",   "namespaces", "directory",   "rerendezvous_on_expiry", "late_joins"};
constexpr std::string_view kLateJoinKeys[] = {"agent", "at_ms", "when"};
constexpr std::string_view kWhenKeys[] = {"round", "store_key", "output", "from", "after_ms"};
const KeySetRegistration kJobKeysListed{{"[job]", "", "", kJobKeys}};
const KeySetRegistration kLateJoinKeysListed{{"[[job.late_joins]]", "", "", kLateJoinKeys}};
const KeySetRegistration kWhenKeysListed{{"Job triggers", "", "", kWhenKeys}};

constexpr const auto& kFaultKinds = kJobFaultKindNames;
// The store's fault layer's query names: TCPStore's queries as the store's record names them
// (net/tcpstore/store_faults.cc's list, which `dagsim store` checks again).
constexpr std::string_view kStoreOps[] = {"set",  "compare_set",  "get",       "add",       "check",
                                          "wait", "get_num_keys", "watch_key", "delete_key"};
constexpr int64_t kMaxStoreDelayMs = 3'600'000;  // net/tcpstore/store_faults.h's kMaxFaultDelayMs
constexpr std::string_view kKillKeys[] = {"kind", "node", "worker", "at_ms", "when"};
constexpr std::string_view kCrashKeys[] = {"kind", "node", "at_ms", "when", "restart_after_ms"};
constexpr std::string_view kPauseKeys[] = {"kind", "node", "worker", "at_ms", "when", "resume_after_ms"};
constexpr std::string_view kStorePauseKeys[] = {"kind", "at_ms", "when", "resume_after_ms"};
constexpr std::string_view kStoreRestartKeys[] = {"kind", "at_ms", "when", "restart_after_ms", "keep_data"};
constexpr std::string_view kPartitionKeys[] = {"kind", "groups", "at_ms", "when", "heal_after_ms"};
constexpr std::string_view kStoreDelayKeys[] = {"kind", "at_ms", "when", "heal_after_ms", "ops", "probability", "delay_ms"};
constexpr std::string_view kStoreDropKeys[] = {"kind", "at_ms", "when", "heal_after_ms", "ops", "probability"};
constexpr std::string_view kAllFaultKeys[] = {"kind",          "node",      "worker", "at_ms",       "when",
                                              "groups",        "restart_after_ms", "resume_after_ms", "heal_after_ms",
                                              "keep_data",     "ops",       "probability", "delay_ms"};
const KeySetRegistration kKillKeysListed{{"Job faults", "", "kind \"kill\" or \"leave\"", kKillKeys}};
const KeySetRegistration kCrashKeysListed{{"Job faults", "", "kind \"crash\"", kCrashKeys}};
const KeySetRegistration kPauseKeysListed{{"Job faults", "", "kind \"pause\"", kPauseKeys}};
const KeySetRegistration kStorePauseKeysListed{{"Job faults", "", "kind \"store_pause\"", kStorePauseKeys}};
const KeySetRegistration kStoreRestartKeysListed{{"Job faults", "", "kind \"store_restart\"", kStoreRestartKeys}};
const KeySetRegistration kPartitionKeysListed{{"Job faults", "", "kind \"partition\"", kPartitionKeys}};
const KeySetRegistration kStoreDelayKeysListed{{"Job faults", "", "kind \"store_delay\"", kStoreDelayKeys}};
const KeySetRegistration kStoreDropKeysListed{{"Job faults", "", "kind \"store_drop\" or \"store_reset\"", kStoreDropKeys}};

// Each job check kind's own keys, from the judge's table itself (job_judge.cc), so the docs are
// compared with what the loader takes and not with a copy.
[[maybe_unused]] const bool kCheckKeysListed = [] {
  static std::deque<std::string> variants;  // the KeySets' views point into it, for good
  for (const CheckKind& kind : job_check_kinds()) {
    if (kind.extra_keys.empty()) continue;
    variants.push_back("kind \"" + std::string(kind.name) + "\"");
    KeySetRegistration{{"Job checks", "", variants.back(), kind.extra_keys}};
  }
  return true;
}();

constexpr std::string_view kLaunchers[] = {"dagsim", "torchrun"};
constexpr std::string_view kBackends[] = {"c10d", "etcd", "dagsim"};
constexpr std::string_view kL6Rules[] = {"dagsim", "pytorch"};

Names fault_keys(FaultKind kind) {
  switch (kind) {
    case FaultKind::kill:
    case FaultKind::leave: return kKillKeys;
    case FaultKind::crash: return kCrashKeys;
    case FaultKind::pause: return kPauseKeys;
    case FaultKind::store_pause: return kStorePauseKeys;
    case FaultKind::store_restart: return kStoreRestartKeys;
    case FaultKind::partition: return kPartitionKeys;
    case FaultKind::store_delay: return kStoreDelayKeys;
    case FaultKind::store_drop:
    case FaultKind::store_reset: return kStoreDropKeys;
  }
  return kKillKeys;
}

std::string agents_listed(const JobSpec& spec) {
  const uint32_t total = spec.total_agents();
  return total == 1 ? "the only agent is agent0" : "agents are agent0 .. agent" + std::to_string(total - 1);
}

// "agent12" -> 12, refused unless it names one of the job's agents (late joiners included).
uint32_t agent_index(const TomlReader& reader, const toml::node& at, const std::string& path, std::string_view name,
                     const JobSpec& spec) {
  constexpr std::string_view kPrefix = "agent";
  const std::string_view digits = name.substr(std::min(name.size(), kPrefix.size()));
  const bool well_formed = name.substr(0, std::min(name.size(), kPrefix.size())) == kPrefix && !digits.empty() &&
                           digits.size() <= 3 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                           (digits.size() == 1 || digits[0] != '0');
  const uint32_t index = well_formed ? static_cast<uint32_t>(std::stoul(std::string(digits))) : 0;
  if (!well_formed || index >= spec.total_agents()) {
    reader.fail(at, path, "unknown agent " + quote(name) + "; the " + agents_listed(spec) +
                              (spec.late_joins.empty() ? "" : " (late joiners included)"));
  }
  return index;
}

uint32_t agent_ref(const TomlReader& reader, const toml::node& n, const std::string& path, const JobSpec& spec) {
  return agent_index(reader, n, path, reader.string(n, path), spec);
}

// "agent2" (an agent) or, where workers are allowed, "agent2:1" (local rank 1 of agent2).
JobTarget target_ref(const TomlReader& reader, const toml::node& n, const std::string& path, const JobSpec& spec,
                     bool worker_only) {
  const std::string text = reader.string(n, path);
  const size_t colon = text.find(':');
  JobTarget target;
  if (colon == std::string::npos) {
    if (worker_only) reader.fail(n, path, quote(text) + " names no worker; write \"agentK:LOCAL_RANK\" (\"agent1:0\")");
    target.agent = agent_index(reader, n, path, text, spec);
    return target;
  }
  target.kind = JobTarget::Kind::worker;
  target.agent = agent_index(reader, n, path, std::string_view(text).substr(0, colon), spec);
  const std::string rank = text.substr(colon + 1);
  const bool digits = !rank.empty() && rank.size() <= 3 && std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoul(rank) >= spec.nproc_per_node) {
    reader.fail(n, path, quote(text) + ": the local rank must be 0 .. " + std::to_string(spec.nproc_per_node - 1) +
                             " ([job] nproc_per_node = " + std::to_string(spec.nproc_per_node) + ")");
  }
  target.local_rank = static_cast<uint32_t>(std::stoul(rank));
  return target;
}

// A non-empty string of at most `max` bytes with no NUL (it becomes an argv entry, a path or a
// variable, none of which can hold one).
std::string bounded_string(const TomlReader& reader, const toml::node& n, const std::string& path, size_t max) {
  std::string s = reader.string(n, path);
  if (s.empty()) reader.fail(n, path, "must not be empty");
  if (s.size() > max) reader.fail(n, path, std::to_string(s.size()) + " bytes; at most " + std::to_string(max));
  if (s.find('\0') != std::string::npos) reader.fail(n, path, "must not contain a NUL character");
  return s;
}

// An argv: a non-empty array of non-empty strings, bounded.
std::vector<std::string> argv(const TomlReader& reader, const toml::node& n, const std::string& path) {
  const toml::array& a = reader.array(n, path);
  if (a.empty()) reader.fail(n, path, "must not be empty: it names the program to run first");
  if (a.size() > kMaxArgs) reader.fail(n, path, std::to_string(a.size()) + " arguments; at most " + std::to_string(kMaxArgs));
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) {
    out.push_back(bounded_string(reader, *a.get(i), path + "[" + std::to_string(i) + "]", kMaxArgBytes));
  }
  return out;
}

// { KEY = "value" | number | bool }, every value as the text a command line would carry.
std::map<std::string, std::string> string_map(const TomlReader& reader, const toml::node& n, const std::string& path,
                                              bool env_names) {
  const toml::table& t = reader.table(n, path);
  if (t.size() > kMaxMapEntries) reader.fail(n, path, std::to_string(t.size()) + " entries; at most " + std::to_string(kMaxMapEntries));
  std::map<std::string, std::string> out;
  for (auto&& [key, value] : t) {
    const std::string k(key.str());
    const std::string at = path + "." + key_name(k);
    const bool name_ok = !k.empty() && k.size() <= 256 &&
                         std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }) &&
                         !(env_names && std::isdigit(static_cast<unsigned char>(k[0])));
    if (!name_ok) {
      reader.fail(value, at, env_names ? "a variable's name is letters, digits and _, not starting with a digit"
                                       : "a key is letters, digits and _ (it is passed as KEY=VALUE,...)");
    }
    std::string text;
    if (value.is_string()) {
      text = value.as_string()->get();
    } else if (value.is_integer() || value.is_floating_point() || value.is_boolean()) {
      text = detail::number_text(value);
    } else {
      reader.fail(value, at, "expected a string, a number or a boolean");
    }
    if (text.size() > kMaxArgBytes) reader.fail(value, at, std::to_string(text.size()) + " bytes; at most " + std::to_string(kMaxArgBytes));
    if (text.find('\0') != std::string::npos) reader.fail(value, at, "must not contain a NUL character");
    // torchrun splits --rdzv_conf at ',' and '=' with no escape, so neither can be in a value.
    if (!env_names && text.find_first_of(",=") != std::string::npos) {
      reader.fail(value, at, quote(text) + " contains ',' or '=', which --rdzv_conf k=v,... cannot carry");
    }
    out[k] = text;
  }
  return out;
}

// `at_ms = T` or `when = { ... }`: exactly one. `what` names the table for messages ("fault").
JobTrigger read_trigger(const TomlReader& reader, const Table& t, const JobSpec& spec, std::string_view what) {
  const toml::node* at = t.get("at_ms");
  const toml::node* when = t.get("when");
  if (at == nullptr && when == nullptr) {
    reader.fail(t.line(), t.key_path("at_ms"), "required: a " + std::string(what) + " needs at_ms or when = { ... }");
  }
  if (at != nullptr && when != nullptr) {
    reader.fail(*when, t.key_path("when"), "a " + std::string(what) + " takes at_ms or when, not both");
  }
  JobTrigger trigger;
  if (at != nullptr) {
    trigger.at = reader.duration(*at, t.key_path("at_ms"), detail::kNonNegativeMs);
    if (trigger.at >= spec.timeout) {
      reader.fail(*at, t.key_path("at_ms"), "is not before [job] timeout_ms (" + detail::format_duration(spec.timeout, 1'000'000) +
                                                "), when the run stops everything");
    }
    return trigger;
  }
  const Table w{reader.table(*when, t.key_path("when")), t.key_path("when")};
  reader.check_keys(w, kWhenKeys, "keys in a job's when");
  const toml::node* round = w.get("round");
  const toml::node* key = w.get("store_key");
  const toml::node* output = w.get("output");
  const int events = (round != nullptr) + (key != nullptr) + (output != nullptr);
  if (events != 1) {
    reader.fail(w.line(), w.path, events == 0 ? "names no event: give round = K, store_key = \"GLOB\" or output = \"REGEX\""
                                              : "names more than one event: give one of round, store_key and output");
  }
  if (round != nullptr) {
    trigger.kind = JobTrigger::Kind::round;
    trigger.round = static_cast<uint64_t>(reader.integer(*round, w.key_path("round"), 0, kMaxRound));
  } else if (key != nullptr) {
    trigger.kind = JobTrigger::Kind::store_key;
    trigger.pattern = bounded_string(reader, *key, w.key_path("store_key"), kMaxPatternBytes);
    if (std::count(trigger.pattern.begin(), trigger.pattern.end(), '*') > static_cast<long>(kMaxGlobStars)) {
      reader.fail(*key, w.key_path("store_key"), "has more than " + std::to_string(kMaxGlobStars) + " '*'");
    }
  } else {
    trigger.kind = JobTrigger::Kind::output;
    trigger.pattern = bounded_string(reader, *output, w.key_path("output"), kMaxPatternBytes);
    try {
      std::regex compiled(trigger.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      reader.fail(*output, w.key_path("output"), quote(trigger.pattern) + " is no ECMAScript regex: " + e.what());
    }
  }
  if (const toml::node* from = w.get("from")) {
    if (output == nullptr) reader.fail(*from, w.key_path("from"), "applies only to when = { output = ... }");
    trigger.from = target_ref(reader, *from, w.key_path("from"), spec, false);
  }
  trigger.after = reader.opt_duration(w, "after_ms", detail::kNonNegativeMs).value_or(Duration{0});
  return trigger;
}

void read_late_joins(const TomlReader& reader, const toml::node& n, JobSpec& spec) {
  const std::vector<const toml::table*> tables = reader.tables(n, "job.late_joins");
  if (static_cast<int64_t>(spec.agents + tables.size()) > kMaxAgents) {
    reader.fail(n, "job.late_joins", std::to_string(spec.agents) + " agents and " + std::to_string(tables.size()) +
                                         " late joiners; at most " + std::to_string(kMaxAgents) + " in all");
  }
  // Every late joiner exists for the names in the triggers that follow (a trigger may wait on a
  // later joiner's output), so the count is fixed before any is read.
  spec.late_joins.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const Table t{*tables[i], "job.late_joins[" + std::to_string(i) + "]"};
    reader.check_keys(t, kLateJoinKeys, "keys in [[job.late_joins]]");
    const toml::node& agent = reader.required(t, "agent");
    const uint32_t expected = spec.agents + static_cast<uint32_t>(i);
    const std::string name = reader.string(agent, t.key_path("agent"));
    if (name != "agent" + std::to_string(expected)) {
      reader.fail(agent, t.key_path("agent"), "late joiner " + std::to_string(i) + " must be agent" + std::to_string(expected) +
                                                  " (late joiners follow the " + std::to_string(spec.agents) +
                                                  " agents [job] starts, in order, each once)");
    }
    spec.late_joins[i].agent = expected;
    spec.late_joins[i].when = read_trigger(reader, t, spec, "late join");
  }
}

// nnodes = "MIN:MAX", "N" or N.
void read_nnodes(const TomlReader& reader, const Table& t, JobSpec& spec) {
  const toml::node* n = t.get("nnodes");
  if (n == nullptr) {
    // torchrun's own default is 1:1; a job with late joiners means them to join.
    spec.min_nodes = spec.agents;
    spec.max_nodes = spec.total_agents();
    return;
  }
  const std::string path = t.key_path("nnodes");
  if (n->is_integer()) {
    spec.min_nodes = spec.max_nodes = static_cast<uint32_t>(reader.integer(*n, path, 1, kMaxAgents));
  } else {
    const std::string text = reader.string(*n, path);
    const size_t colon = text.find(':');
    auto number = [&](const std::string& part) -> uint32_t {
      const bool digits = !part.empty() && part.size() <= 3 && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) reader.fail(*n, path, quote(text) + " is not \"MIN:MAX\" or \"N\" (whole numbers)");
      return static_cast<uint32_t>(std::stoul(part));
    };
    spec.min_nodes = number(text.substr(0, colon));
    spec.max_nodes = colon == std::string::npos ? spec.min_nodes : number(text.substr(colon + 1));
  }
  if (spec.min_nodes < 1) reader.fail(*n, path, "MIN must be at least 1");
  if (spec.max_nodes < spec.min_nodes) {
    reader.fail(*n, path, "MAX (" + std::to_string(spec.max_nodes) + ") is less than MIN (" + std::to_string(spec.min_nodes) + ")");
  }
  if (spec.max_nodes > kMaxAgents) reader.fail(*n, path, "MAX must be at most " + std::to_string(kMaxAgents));
  if (spec.total_agents() < spec.min_nodes) {
    reader.warn(n->source().begin.line, path,
                "MIN is " + std::to_string(spec.min_nodes) + " but the job has only " + std::to_string(spec.total_agents()) +
                    " agents (late joiners included): no round can ever form");
  } else if (spec.agents < spec.min_nodes) {
    reader.warn(n->source().begin.line, path,
                "MIN is " + std::to_string(spec.min_nodes) + " but [job] starts " + std::to_string(spec.agents) +
                    " agents: no round forms until late joiners come");
  }
}

// The store's fault layer's keys: ops (distinct query names; absent: every query), probability,
// and delay_ms for store_delay (whole ms: the store's fault file takes whole ms).
void read_store_fault(const TomlReader& reader, const Table& t, const JobSpec& spec, JobFault& f, const std::string& why) {
  if (spec.rdzv_backend == JobRdzvBackend::etcd) {
    reader.fail(*t.get("kind"), t.key_path("kind"),
                "the store's fault layer is dagsim store's: with rdzv_backend = \"etcd\" use store_pause or store_restart");
  }
  if (const toml::node* ops = t.get("ops")) {
    const std::string path = t.key_path("ops");
    const toml::array& a = reader.array(*ops, path);
    if (a.empty()) reader.fail(*ops, path, "must not be empty: leave ops out for every query");
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      const size_t op = reader.choice(*a.get(i), at, kStoreOps);
      const std::string name(kStoreOps[op]);
      if (std::find(f.store_ops.begin(), f.store_ops.end(), name) != f.store_ops.end()) {
        reader.fail(*a.get(i), at, quote(name) + " is named more than once");
      }
      f.store_ops.push_back(name);
    }
  }
  if (const toml::node* p = t.get("probability")) f.probability = reader.number(*p, t.key_path("probability"), Range{0, 1});
  if (f.kind == FaultKind::store_delay) {
    const int64_t ms = reader.integer(reader.required(t, "delay_ms", why), t.key_path("delay_ms"), 1, kMaxStoreDelayMs);
    f.delay = std::chrono::milliseconds(ms);
  }
}

JobFault read_fault(const TomlReader& reader, const Table& t, const JobSpec& spec) {
  JobFault f;
  f.line = t.line();
  f.kind = static_cast<FaultKind>(reader.choice(reader.required(t, "kind"), t.key_path("kind"), kFaultKinds));
  const std::string kind(kFaultKinds[static_cast<size_t>(f.kind)]);
  const std::string variant = "kind \"" + kind + "\"";
  reader.check_variant_keys(t, fault_keys(f.kind), kAllFaultKeys, variant + " in a [job] scenario");
  const std::string why = " for " + variant;

  switch (f.kind) {
    case FaultKind::kill:
    case FaultKind::crash:
    case FaultKind::pause:
    case FaultKind::leave: {
      const toml::node* node = t.get("node");
      const toml::node* worker = t.get("worker");
      if (node == nullptr && worker == nullptr) {
        reader.fail(t.line(), t.key_path("node"),
                    "required" + why + (f.kind == FaultKind::crash ? " (an agent: node = \"agent1\")"
                                                                   : ": node = \"agent1\" or worker = \"agent1:0\""));
      }
      if (node != nullptr && worker != nullptr) reader.fail(*worker, t.key_path("worker"), "a fault takes node or worker, not both");
      f.target = node != nullptr ? JobTarget{JobTarget::Kind::agent, agent_ref(reader, *node, t.key_path("node"), spec), 0}
                                 : target_ref(reader, *worker, t.key_path("worker"), spec, true);
      break;
    }
    case FaultKind::store_pause:
    case FaultKind::store_restart:
    case FaultKind::store_delay:
    case FaultKind::store_drop:
    case FaultKind::store_reset:
      f.target.kind = JobTarget::Kind::store;
      break;
    case FaultKind::partition: {
      const toml::node& groups = reader.required(t, "groups", why);
      const std::string path = t.key_path("groups");
      if (!spec.namespaces) {
        reader.fail(groups, path,
                    "a partition needs [job] namespaces = true (each agent in a network namespace of its own, which the "
                    "run builds as root); without them the agents share one network and cannot be cut apart");
      }
      const toml::array& a = reader.array(groups, path);
      if (a.size() < 2) reader.fail(groups, path, "needs at least two groups to cut apart");
      std::vector<bool> seen(spec.total_agents(), false);
      for (size_t g = 0; g < a.size(); ++g) {
        const std::string gpath = path + "[" + std::to_string(g) + "]";
        const toml::array& members = reader.array(*a.get(g), gpath);
        if (members.empty()) reader.fail(*a.get(g), gpath, "must not be empty");
        std::vector<uint32_t> group;
        for (size_t m = 0; m < members.size(); ++m) {
          const std::string mpath = gpath + "[" + std::to_string(m) + "]";
          const uint32_t agent = agent_ref(reader, *members.get(m), mpath, spec);
          if (seen[agent]) reader.fail(*members.get(m), mpath, "agent" + std::to_string(agent) + " is in more than one place in groups");
          seen[agent] = true;
          group.push_back(agent);
        }
        f.groups.push_back(std::move(group));
      }
      break;
    }
  }

  f.when = read_trigger(reader, t, spec, "fault");
  switch (f.kind) {
    case FaultKind::crash:
    case FaultKind::store_restart:
      f.restart_after = reader.duration(reader.required(t, "restart_after_ms", why), t.key_path("restart_after_ms"),
                                        detail::kNonNegativeMs);
      break;
    case FaultKind::pause:
    case FaultKind::store_pause:
      f.duration = reader.duration(reader.required(t, "resume_after_ms", why), t.key_path("resume_after_ms"), detail::kPositiveMs);
      break;
    case FaultKind::partition:
      f.duration = reader.duration(reader.required(t, "heal_after_ms", why), t.key_path("heal_after_ms"), detail::kPositiveMs);
      break;
    case FaultKind::store_delay:
    case FaultKind::store_drop:
    case FaultKind::store_reset:
      f.duration = reader.duration(reader.required(t, "heal_after_ms", why), t.key_path("heal_after_ms"), detail::kPositiveMs);
      read_store_fault(reader, t, spec, f, why);
      break;
    case FaultKind::kill:
    case FaultKind::leave:
      break;
  }
  f.keep_data = reader.opt_boolean(t, "keep_data").value_or(true);
  return f;
}

}  // namespace

void read_job(const TomlReader& reader, const Table& top, Scenario& scenario) {
  const Table t{reader.table(*top.get("job"), "job"), "job"};
  reader.check_keys(t, kJobKeys, "keys in [job]");
  JobSpec spec;
  spec.command = argv(reader, reader.required(t, "command"), t.key_path("command"));
  spec.module = reader.opt_boolean(t, "module").value_or(false);
  spec.no_python = reader.opt_boolean(t, "no_python").value_or(false);
  if (spec.module && spec.no_python) {
    reader.fail(*t.get("no_python"), t.key_path("no_python"), "module and no_python exclude each other (as in torchrun)");
  }
  if (const toml::node* python = t.get("python")) {
    if (spec.no_python) reader.fail(*python, t.key_path("python"), "does not apply with no_python = true");
    spec.python = bounded_string(reader, *python, t.key_path("python"), kMaxArgBytes);
  }
  spec.agents = static_cast<uint32_t>(reader.opt_integer(t, "agents", 1, kMaxAgents).value_or(spec.agents));
  spec.nproc_per_node = static_cast<uint32_t>(reader.opt_integer(t, "nproc_per_node", 1, kMaxProcPerNode).value_or(spec.nproc_per_node));
  spec.launcher = static_cast<JobLauncher>(reader.opt_choice(t, "launcher", kLaunchers).value_or(0));
  spec.rdzv_backend = static_cast<JobRdzvBackend>(reader.opt_choice(t, "rdzv_backend", kBackends).value_or(0));
  if (spec.rdzv_backend == JobRdzvBackend::dagsim && spec.launcher != JobLauncher::dagsim) {
    reader.fail(*t.get("rdzv_backend"), t.key_path("rdzv_backend"),
                "\"dagsim\" is dagsim launch's own backend: with launcher = \"torchrun\" use \"c10d\"");
  }
  if (const toml::node* conf = t.get("rdzv_conf")) spec.rdzv_conf = string_map(reader, *conf, t.key_path("rdzv_conf"), false);
  spec.max_restarts = static_cast<uint32_t>(reader.opt_integer(t, "max_restarts", 0, kMaxRestarts).value_or(spec.max_restarts));
  if (const auto seconds = reader.opt_number(t, "monitor_interval", Range{0, kMaxMonitorIntervalS, /*lo_open=*/true})) {
    spec.monitor_interval = Duration(std::llround(*seconds * 1e9));
    if (spec.monitor_interval <= Duration{0}) reader.fail(*t.get("monitor_interval"), t.key_path("monitor_interval"), "rounds to 0 ns; must be positive");
  }
  if (const toml::node* env = t.get("env")) spec.env = string_map(reader, *env, t.key_path("env"), true);
  spec.timeout = reader.opt_duration(t, "timeout_ms", detail::kPositiveMs).value_or(spec.timeout);
  spec.namespaces = reader.opt_boolean(t, "namespaces").value_or(false);
  if (const toml::node* dir = t.get("directory")) spec.directory = bounded_string(reader, *dir, t.key_path("directory"), kMaxArgBytes);
  spec.rerendezvous_on_expiry = reader.opt_boolean(t, "rerendezvous_on_expiry").value_or(true);
  if (const toml::node* late = t.get("late_joins")) read_late_joins(reader, *late, spec);
  read_nnodes(reader, t, spec);

  if (const toml::node* faults = top.get("faults")) {
    const std::vector<const toml::table*> tables = reader.tables(*faults, "faults");
    if (tables.size() > kMaxFaults) {
      reader.fail(*faults, "faults", std::to_string(tables.size()) + " faults; at most " + std::to_string(kMaxFaults));
    }
    for (size_t i = 0; i < tables.size(); ++i) {
      spec.faults.push_back(read_fault(reader, Table{*tables[i], "faults[" + std::to_string(i) + "]"}, spec));
    }
  }

  scenario.cluster = ClusterSpec{};
  scenario.cluster.nodes = spec.total_agents();
  scenario.cluster.name_prefix = "agent";
  scenario.max_virtual_time = spec.timeout;
  scenario.workload = WorkloadSpec("job", std::move(spec));
}

void finish_job(const TomlReader& reader, const Table& top, Scenario& scenario) {
  const JobSpec& spec = scenario.workload.as<JobSpec>();
  if (scenario.random_faults.partition_per_min > 0 && !spec.namespaces) {
    const Table r{*top.get("random_faults")->as_table(), "random_faults"};
    reader.fail(*r.get("partition_per_min"), r.key_path("partition_per_min"),
                "a partition needs [job] namespaces = true (each agent in a network namespace of its own)");
  }
  if (scenario.checks.empty()) return;
  // The loader read the checks in file order, so checks[i] is the i-th table.
  const std::vector<const toml::table*> tables = reader.tables(*top.get("checks"), "checks");
  for (size_t i = 0; i < scenario.checks.size(); ++i) {
    CheckSpec& check = scenario.checks[i];
    const Table t{*tables[i], "checks[" + std::to_string(i) + "]"};
    const std::string why = " for kind \"" + check.kind + "\"";
    if (check.kind == "rendezvous_invariants") {
      reader.opt_choice(t, "l6", kL6Rules);
    } else if (check.kind == "job_succeeded") {
      const bool expect_failure = reader.opt_boolean(t, "expect_failure").value_or(false);
      if (expect_failure && check.message.empty()) {
        reader.fail(t.line(), t.key_path("message"), "required with expect_failure = true: a fragment of the failing agent's log");
      }
      if (!expect_failure && !check.message.empty()) {
        reader.fail(*t.get("message"), t.key_path("message"), "applies only with expect_failure = true");
      }
    } else if (check.kind == "reformed_within") {
      reader.integer(reader.required(t, "ms", why), t.key_path("ms"), 1, static_cast<int64_t>(detail::kMaxDurationMs));
    } else if (check.kind == "restarts") {
      const auto min = reader.opt_integer(t, "min", 0, kMaxRestarts);
      const auto max = reader.opt_integer(t, "max", 0, kMaxRestarts);
      if (!min && !max) reader.fail(t.line(), t.key_path("max"), "required" + why + ": max = N, min = N or both");
      if (min && max && *min > *max) reader.fail(*t.get("min"), t.key_path("min"), "is more than max");
    } else if (check.kind == "command") {
      argv(reader, reader.required(t, "run", why), t.key_path("run"));
      reader.opt_boolean(t, "reference_run");
    }
  }
}

}  // namespace dagsim::scenarios
