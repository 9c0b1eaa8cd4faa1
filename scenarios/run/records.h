// RunRecords: everything a run leaves for its judge (DESIGN.md, "Results are data").
//
// A run's verdict is a function of its records alone: one record per node incarnation (what its
// workload observed), the cluster's fault history, and the run's own facts (how it ended, the
// fibers that failed, its figures). The simulator gathers them in memory; the TCP launcher
// gathers them from its nodes' processes; `dagsim run --records DIR` writes them and
// `dagsim judge DIR` reads them back, on any host, and judges them with the same code.
//
// A records directory holds:
//   scenario.toml          the scenario's text, as run
//   run.json               the run's facts (seed, transport, outcome, end time, final node states,
//                          failures, figures, the applied fault timeline)
//   faults.json            the fault history, in order
//   nodes/NAME.INC.json    one per node incarnation: {"node", "incarnation", "data"}
//                          (worker1.0.json: worker1's first life)
// Reading trusts nothing: a missing file, malformed JSON or a missing or mistyped key is
// Error(invalid_records) naming the file and the key. Each file is read through
// read_bounded_file (a regular file only: a FIFO, device or socket is refused at once, never
// waited on) and holds at most kMaxRecordFileBytes, nested at most kMaxRecordFileDepth deep.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/runtime/cluster.h"

namespace dagsim::scenarios {

// Bounds on one records file: larger is refused unread, so a sparse or endless file costs nothing;
// the records a run writes nest a handful deep.
inline constexpr size_t kMaxRecordFileBytes = size_t{1} << 30;
inline constexpr size_t kMaxRecordFileDepth = 64;
// Bounds on run.json's "probes": far more than a build has, so only a forged file meets them.
inline constexpr size_t kMaxRecordProbes = 100'000;
inline constexpr size_t kMaxProbeNameBytes = 200;
// Over TCP each node process sends the probes it hit inside its record's data under this key; the
// launcher takes them out before writing the record and sums them into RunRecords::probes.
inline constexpr const char* kNodeProbesKey = "dagsim_probes";

// What one incarnation of one node observed: the workload's data, as JSON.
struct NodeRecord {
  uint32_t node = 0;
  uint32_t incarnation = 0;
  nlohmann::json data = nlohmann::json::object();
};

// A node fiber that ended with an exception other than its node's death.
struct FiberFailureRecord {
  runtime::TimePoint time;  // the scenario's time
  std::string node;
  std::string fiber;
  std::string what;
};

// The runtime's figures for the report.
struct RunStats {
  uint64_t trace_hash = 0;  // sim only
  uint64_t trace_events = 0;
  uint64_t messages = 0;  // sent
  uint64_t messages_delivered = 0;
  uint64_t messages_dropped = 0;
  uint64_t connection_failures = 0;
  double wall_ms = 0;  // how long the run took on the host that ran it
};

}  // namespace dagsim::scenarios
namespace dagsim::sim {
class Trace;
}  // namespace dagsim::sim
namespace dagsim::scenarios {

struct RunRecords {
  std::string scenario_file;  // as given to `dagsim run` ("" when built as data)
  uint64_t seed = 1;
  std::string transport = "sim";
  std::string outcome;       // finished | time_limit | deadlock | livelock
  std::string stuck_report;  // when the run did not finish: each blocked fiber
  runtime::TimePoint end;    // the scenario's time when the run ended (after its drain)
  // When the workload itself ended, before the drain (unset: it never ended on its own).
  std::optional<runtime::TimePoint> workload_end;
  std::vector<std::string> node_names;           // by node index
  std::vector<runtime::NodeState> final_states;  // by node index
  std::vector<runtime::FaultEvent> fault_history;
  nlohmann::json fault_timeline = nlohmann::json::array();  // the faults applied, as scheduled
  std::vector<FiberFailureRecord> failures;
  RunStats stats;
  std::vector<NodeRecord> nodes;  // sorted by (node, incarnation)
  // A [job] run's own facts (scenarios/workloads/job/job_spec.h); null for every other workload.
  // Written to and read from run.json's "job".
  nlohmann::json job = nullptr;
  // The code probes (core/base/probe.h) the run hit, by name, with their counts; run.json's
  // "probes". At most kMaxRecordProbes, each name at most kMaxProbeNameBytes.
  std::map<std::string, uint64_t> probes;
  // The code-level faults of a simulated run with [buggify] on (core/base/buggify.h):
  // {"enabled": [names], "fired": {name: count}}; null when off. run.json's "buggify".
  nlohmann::json buggify = nullptr;
  // [random_faults] swarm = true: the fault mix this seed drew (run/swarm.h); null when off.
  // run.json's "swarm".
  nlohmann::json swarm = nullptr;
  // The simulator's trace with its events, when the run kept them (RunOptions::keep_trace), for
  // write_chrome_trace once the run is judged. Not written to a records directory.
  std::shared_ptr<const sim::Trace> trace;

  // The records of `node`, by incarnation.
  std::vector<const NodeRecord*> records_of(uint32_t node) const;
};

// Writes `records` and the scenario's text under `dir` (created if missing; files in it are
// replaced). Throws Error(invalid_argument) naming the path when it cannot.
void write_records_dir(const std::string& dir, const RunRecords& records, const std::string& scenario_text);

struct RecordsDir {
  RunRecords records;
  std::string scenario_text;
};
// Reads what write_records_dir wrote. Throws Error(invalid_records) naming the file and key.
RecordsDir read_records_dir(const std::string& dir);

// One incarnation's file, nodes/NAME.INC.json under `dir`, written whole or not at all (a
// temporary file renamed over it): a node process writes its own as it goes, so one killed
// mid-write leaves its previous version. Throws Error(invalid_argument) naming the path.
void write_node_record(const std::string& dir, const std::string& node_name, const NodeRecord& record);
// Every nodes/*.json under `dir`, sorted by (node, incarnation); `node_names` are the run's.
// Throws Error(invalid_records) naming the file and key.
std::vector<NodeRecord> read_node_records(const std::string& dir, const std::vector<std::string>& node_names);

// The integer `j` holds, as T: a JSON integer of T's range (not a float, not a negative number
// for an unsigned T). Throws Error(invalid_records) naming `what`.
template <typename T>
T integer_from_record(const nlohmann::json& j, const std::string& what) {
  static_assert(std::is_integral_v<T>);
  bool fits = false;
  if (j.is_number_unsigned()) {
    fits = j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    fits = std::is_signed_v<T> ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                     v <= static_cast<int64_t>(std::numeric_limits<T>::max())
                               : v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!fits) throw errors::invalid_records(what + ": expected an integer in range, got " + j.dump());
  return j.get<T>();
}

// Numbers in records round-trip exactly, non-finite ones included (JSON has no inf or NaN: they
// are written as the strings "inf", "-inf" and "nan").
nlohmann::json number_record(double value);
// The number `j` holds (as number_record writes it). Throws Error(invalid_records) naming `what`.
double number_from_record(const nlohmann::json& j, const std::string& what);

}  // namespace dagsim::scenarios
