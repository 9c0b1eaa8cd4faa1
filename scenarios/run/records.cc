// Run records as files (records.h): JSON with exact numbers, read back strictly.
#include "scenarios/run/records.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/assert.h"
#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/bounded_json.h"
#include "scenarios/format/scenario_text.h"

namespace dagsim::scenarios {

namespace fs = std::filesystem;
using nlohmann::json;
using runtime::FaultEvent;
using runtime::TimePoint;

std::vector<const NodeRecord*> RunRecords::records_of(uint32_t node) const {
  std::vector<const NodeRecord*> out;
  for (const NodeRecord& r : nodes) {
    if (r.node == node) out.push_back(&r);
  }
  return out;
}

json number_record(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

double number_from_record(const json& j, const std::string& what) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
  }
  throw errors::invalid_records(what + ": expected a number (or \"inf\", \"-inf\", \"nan\"), got " + j.dump());
}

namespace {

// Reading: every access names the file and key it failed on.
struct Reader {
  std::string file;
  // The file as messages name it: a records directory is any path the user gave.
  std::string name() const { return printable(file, kPathMax); }

  const json& at(const json& object, const std::string& key) const {
    if (!object.is_object() || !object.contains(key)) throw errors::invalid_records(name() + ": missing key \"" + key + "\"");
    return object.at(key);
  }
  template <typename T>
  T get(const json& object, const std::string& key) const {
    const json& value = at(object, key);
    // Integers are checked for kind and range: nlohmann would cast -1 or 1.5 to any integer type.
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      try {
        return integer_from_record<T>(value, name() + ": key \"" + key + "\"");
      } catch (const Error&) {
        throw errors::invalid_records(name() + ": key \"" + key + "\" has the wrong type: " + printable(value.dump()));
      }
    } else {
      try {
        return value.get<T>();
      } catch (const json::exception&) {
        throw errors::invalid_records(name() + ": key \"" + key + "\" has the wrong type: " + printable(value.dump()));
      }
    }
  }
  const json& array(const json& object, const std::string& key) const {
    const json& value = at(object, key);
    if (!value.is_array()) throw errors::invalid_records(name() + ": key \"" + key + "\" must be an array");
    return value;
  }
};

// Every record file is read here (and scenario.toml below), as every file argument is: through
// read_bounded_file, so a FIFO, a device or a socket in a records directory is refused at once
// (it once blocked `judge` and `report` for ever) and a file past the bound is refused unread;
// and parsed with a nesting bound.
json parse_file(const fs::path& path) {
  const std::string text = read_bounded_file(path.string(), kMaxRecordFileBytes, ErrorCode::invalid_records, "a record file");
  return parse_bounded_json(text, kMaxRecordFileDepth, ErrorCode::invalid_records, path.string());
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw errors::invalid_argument(path.string() + ": cannot write");
}

json fault_event_json(const FaultEvent& e) {
  json blocked = json::array();
  for (const auto& [from, to] : e.blocked) blocked.push_back({from, to});
  return {{"kind", runtime::fault_event_kind_name(e.kind)}, {"time_ns", e.time.ns()}, {"node", e.node},
          {"peer", e.peer}, {"partition", e.partition}, {"blocked", blocked}};
}

FaultEvent fault_event_from(const Reader& r, const json& j) {
  FaultEvent e;
  const std::string kind = r.get<std::string>(j, "kind");
  if (!runtime::parse_fault_event_kind(kind, e.kind)) throw errors::invalid_records(r.name() + ": unknown fault kind " + printable(kind));
  e.time = TimePoint{runtime::Duration{r.get<int64_t>(j, "time_ns")}};
  e.node = r.get<WorkerId>(j, "node");
  e.peer = r.get<WorkerId>(j, "peer");
  e.partition = r.get<uint64_t>(j, "partition");
  for (const json& pair : r.array(j, "blocked")) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() || !pair[1].is_number_unsigned()) {
      throw errors::invalid_records(r.name() + ": a blocked pair must be [from, to]: " + printable(pair.dump()));
    }
    e.blocked.emplace_back(integer_from_record<WorkerId>(pair[0], r.name() + ": blocked"),
                           integer_from_record<WorkerId>(pair[1], r.name() + ": blocked"));
  }
  return e;
}

std::string hex(uint64_t v) {
  std::ostringstream out;
  out << std::hex << v;
  return out.str();
}

json run_json(const RunRecords& r) {
  json states = json::array();
  for (runtime::NodeState s : r.final_states) states.push_back(runtime::node_state_name(s));
  json failures = json::array();
  for (const FiberFailureRecord& f : r.failures) {
    failures.push_back({{"time_ns", f.time.ns()}, {"node", f.node}, {"fiber", f.fiber}, {"what", f.what}});
  }
  const RunStats& s = r.stats;
  json out = {{"scenario_file", r.scenario_file},
          {"seed", r.seed},
          {"transport", r.transport},
          {"outcome", r.outcome},
          {"stuck_report", r.stuck_report},
          {"end_ns", r.end.ns()},
          {"node_names", r.node_names},
          {"final_states", states},
          {"fault_timeline", r.fault_timeline},
          {"failures", failures},
          {"stats",
           {{"trace_hash", hex(s.trace_hash)},  // JSON numbers cannot carry 64 bits exactly
            {"trace_events", s.trace_events},
            {"messages", s.messages},
            {"messages_delivered", s.messages_delivered},
            {"messages_dropped", s.messages_dropped},
            {"connection_failures", s.connection_failures},
            {"wall_ms", s.wall_ms}}}};
  if (r.workload_end) out["workload_end_ns"] = r.workload_end->ns();
  if (!r.job.is_null()) out["job"] = r.job;
  out["probes"] = r.probes;
  if (!r.buggify.is_null()) out["buggify"] = r.buggify;
  if (!r.swarm.is_null()) out["swarm"] = r.swarm;
  return out;
}

void read_run_json(const Reader& r, const json& j, RunRecords& out) {
  out.scenario_file = r.get<std::string>(j, "scenario_file");
  out.seed = r.get<uint64_t>(j, "seed");
  out.transport = r.get<std::string>(j, "transport");
  out.outcome = r.get<std::string>(j, "outcome");
  out.stuck_report = r.get<std::string>(j, "stuck_report");
  out.end = TimePoint{runtime::Duration{r.get<int64_t>(j, "end_ns")}};
  // Records written before the workload's own end was kept have none: that is no error.
  if (j.contains("workload_end_ns")) out.workload_end = TimePoint{runtime::Duration{r.get<int64_t>(j, "workload_end_ns")}};
  out.node_names = r.get<std::vector<std::string>>(j, "node_names");
  for (const std::string& name : r.get<std::vector<std::string>>(j, "final_states")) {
    runtime::NodeState state;
    if (!runtime::parse_node_state(name, state)) throw errors::invalid_records(r.name() + ": unknown node state " + printable(name));
    out.final_states.push_back(state);
  }
  if (out.final_states.size() != out.node_names.size()) {
    throw errors::invalid_records(r.name() + ": final_states and node_names differ in length");
  }
  out.fault_timeline = r.array(j, "fault_timeline");
  // A [job] run's facts; its judge checks each key it reads (job_judge.cc).
  if (j.contains("job")) {
    out.job = r.at(j, "job");
    if (!out.job.is_object()) throw errors::invalid_records(r.name() + ": job: expected an object");
  }
  // Records written before probes were counted have none: that is no error.
  if (j.contains("probes")) {
    const json& probes = r.at(j, "probes");
    if (!probes.is_object()) throw errors::invalid_records(r.name() + ": probes: expected an object of counts");
    if (probes.size() > kMaxRecordProbes) {
      throw errors::invalid_records(r.name() + ": probes: more than " + std::to_string(kMaxRecordProbes) + " names");
    }
    for (const auto& [name, count] : probes.items()) {
      if (name.empty() || name.size() > kMaxProbeNameBytes) {
        throw errors::invalid_records(r.name() + ": probes: a name of " + std::to_string(name.size()) + " bytes");
      }
      out.probes[name] = integer_from_record<uint64_t>(count, r.name() + ": probes: " + printable(name));
    }
  }
  if (j.contains("buggify")) {
    out.buggify = r.at(j, "buggify");
    if (!out.buggify.is_object() || !out.buggify.contains("enabled") || !out.buggify.at("enabled").is_array() ||
        !out.buggify.contains("fired") || !out.buggify.at("fired").is_object()) {
      throw errors::invalid_records(r.name() + ": buggify: expected {\"enabled\": [...], \"fired\": {...}}");
    }
  }
  if (j.contains("swarm")) {
    out.swarm = r.at(j, "swarm");
    if (!out.swarm.is_object()) throw errors::invalid_records(r.name() + ": swarm: expected an object");
  }
  for (const json& f : r.array(j, "failures")) {
    out.failures.push_back({TimePoint{runtime::Duration{r.get<int64_t>(f, "time_ns")}}, r.get<std::string>(f, "node"),
                            r.get<std::string>(f, "fiber"), r.get<std::string>(f, "what")});
  }
  const json& s = r.at(j, "stats");
  const std::string hash = r.get<std::string>(s, "trace_hash");
  try {
    size_t used = 0;
    out.stats.trace_hash = std::stoull(hash, &used, 16);
    if (used != hash.size()) throw std::invalid_argument(hash);
  } catch (const std::exception&) {
    throw errors::invalid_records(r.name() + ": stats.trace_hash is not hexadecimal: " + printable(hash));
  }
  out.stats.trace_events = r.get<uint64_t>(s, "trace_events");
  out.stats.messages = r.get<uint64_t>(s, "messages");
  out.stats.messages_delivered = r.get<uint64_t>(s, "messages_delivered");
  out.stats.messages_dropped = r.get<uint64_t>(s, "messages_dropped");
  out.stats.connection_failures = r.get<uint64_t>(s, "connection_failures");
  out.stats.wall_ms = r.get<double>(s, "wall_ms");
}

std::string node_file_name(const std::string& node, uint32_t incarnation) {
  return node + "." + std::to_string(incarnation) + ".json";
}

}  // namespace

void write_records_dir(const std::string& dir, const RunRecords& records, const std::string& scenario_text) {
  DAGSIM_ASSERT(records.node_names.size() == records.final_states.size());
  const fs::path root(dir);
  std::error_code error;
  fs::create_directories(root / "nodes", error);
  if (error) throw errors::invalid_argument(dir + ": cannot create the records directory: " + error.message());
  // A directory reused from an earlier run must not mix its incarnations into this one.
  for (const fs::directory_entry& entry : fs::directory_iterator(root / "nodes")) {
    if (entry.path().extension() == ".json") fs::remove(entry.path(), error);
  }
  write_file(root / "scenario.toml", scenario_text);
  write_file(root / "run.json", run_json(records).dump(1) + "\n");
  json faults = json::array();
  for (const FaultEvent& e : records.fault_history) faults.push_back(fault_event_json(e));
  write_file(root / "faults.json", faults.dump(1) + "\n");
  for (const NodeRecord& n : records.nodes) {
    DAGSIM_ASSERT(n.node < records.node_names.size());
    const json record = {{"node", records.node_names[n.node]}, {"incarnation", n.incarnation}, {"data", n.data}};
    write_file(root / "nodes" / node_file_name(records.node_names[n.node], n.incarnation), record.dump() + "\n");
  }
}

namespace {

// Every time in the records lies in the run: [0, end]. Node indices name the run's nodes.
void check_ranges(const std::string& dir, const RunRecords& r) {
  auto in_run = [&](runtime::TimePoint t, const std::string& what) {
    if (t.ns() < 0 || t > r.end) throw errors::invalid_records(printable(dir, kPathMax) + ": " + what + " at " + std::to_string(t.ns()) + " ns, outside the run");
  };
  if (r.end.ns() < 0) throw errors::invalid_records(printable(dir, kPathMax) + ": run.json: end_ns is negative");
  const size_t nodes = r.node_names.size();
  for (const FaultEvent& e : r.fault_history) {
    in_run(e.time, "faults.json: an event");
    bool known = e.node < nodes && (e.kind != FaultEvent::Kind::connection_failed || e.peer < nodes);
    for (const auto& [from, to] : e.blocked) known = known && from < nodes && to < nodes;
    if (!known) throw errors::invalid_records(printable(dir, kPathMax) + ": faults.json: an event names a node the run does not have");
  }
  for (const FiberFailureRecord& f : r.failures) in_run(f.time, "run.json: a failure");
}

RecordsDir read_records_dir_unchecked(const std::string& dir);

}  // namespace

std::vector<NodeRecord> read_node_records(const std::string& dir, const std::vector<std::string>& node_names) {
  const fs::path root(dir);
  std::vector<NodeRecord> nodes;
  std::error_code error;
  if (!fs::exists(root / "nodes", error)) return nodes;  // no incarnation recorded anything
  for (const fs::directory_entry& entry : fs::directory_iterator(root / "nodes", error)) {
    if (entry.path().extension() != ".json") continue;
    const Reader r{entry.path().string()};
    const json j = parse_file(entry.path());
    const std::string name = r.get<std::string>(j, "node");
    const auto it = std::find(node_names.begin(), node_names.end(), name);
    if (it == node_names.end()) throw errors::invalid_records(r.name() + ": node " + printable(name) + " is not in run.json");
    NodeRecord record;
    record.node = static_cast<uint32_t>(it - node_names.begin());
    record.incarnation = r.get<uint32_t>(j, "incarnation");
    record.data = r.at(j, "data");
    if (!record.data.is_object()) throw errors::invalid_records(r.name() + ": data must be an object");
    nodes.push_back(std::move(record));
  }
  if (error) throw errors::invalid_records(printable((root / "nodes").string(), kPathMax) + ": cannot list: " + error.message());
  // Directory order is the file system's: the records' order is (node, incarnation).
  std::sort(nodes.begin(), nodes.end(), [](const NodeRecord& a, const NodeRecord& b) {
    return std::tie(a.node, a.incarnation) < std::tie(b.node, b.incarnation);
  });
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (nodes[i].node == nodes[i - 1].node && nodes[i].incarnation == nodes[i - 1].incarnation) {
      throw errors::invalid_records(printable(dir, kPathMax) + ": two records of " + printable(node_names[nodes[i].node]) + " incarnation " +
                                    std::to_string(nodes[i].incarnation));
    }
  }
  return nodes;
}

void write_node_record(const std::string& dir, const std::string& node_name, const NodeRecord& record) {
  const fs::path nodes = fs::path(dir) / "nodes";
  std::error_code error;
  fs::create_directories(nodes, error);
  if (error) throw errors::invalid_argument(dir + ": cannot create the records directory: " + error.message());
  const json j = {{"node", node_name}, {"incarnation", record.incarnation}, {"data", record.data}};
  const fs::path final_path = nodes / node_file_name(node_name, record.incarnation);
  const fs::path temporary = final_path.string() + ".tmp";
  write_file(temporary, j.dump() + "\n");
  fs::rename(temporary, final_path, error);
  if (error) throw errors::invalid_argument(final_path.string() + ": cannot write: " + error.message());
}

RecordsDir read_records_dir(const std::string& dir) {
  try {
    RecordsDir out = read_records_dir_unchecked(dir);
    check_ranges(dir, out.records);
    return out;
  } catch (const fs::filesystem_error& e) {
    throw errors::invalid_records(printable(dir, kPathMax) + ": " + printable(e.what(), 400));
  }
}

namespace {

RecordsDir read_records_dir_unchecked(const std::string& dir) {
  const fs::path root(dir);
  std::error_code not_there;
  if (!fs::is_directory(root, not_there)) {
    throw errors::invalid_records(printable(dir, kPathMax) + ": not a records directory (dagsim run --records DIR)");
  }
  RecordsDir out;
  out.scenario_text = read_bounded_file((root / "scenario.toml").string(), detail::kMaxScenarioBytes,
                                        ErrorCode::invalid_records, "a scenario file");
  RunRecords& records = out.records;
  const fs::path run_path = root / "run.json";
  read_run_json(Reader{run_path.string()}, parse_file(run_path), records);

  const fs::path faults_path = root / "faults.json";
  const json faults = parse_file(faults_path);
  if (!faults.is_array()) throw errors::invalid_records(printable(faults_path.string(), kPathMax) + ": must be an array of fault events");
  for (const json& e : faults) records.fault_history.push_back(fault_event_from(Reader{faults_path.string()}, e));

  records.nodes = read_node_records(dir, records.node_names);
  return out;
}

}  // namespace

}  // namespace dagsim::scenarios
