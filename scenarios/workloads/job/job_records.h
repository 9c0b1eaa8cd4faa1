// A job run's records (job_spec.h's layout) read once, every key checked: the judge's checks
// (job_judge.cc) and its results and spans (job_report.cc) read this, never the JSON.
//
// Reading trusts nothing: a missing or mistyped key is Error(invalid_records) naming where it is
// ("job.rounds[2].at_ms", "nodes/agent1.0.json: data.workers[0].pid", "fault_timeline[3].kind").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/format/scenario.h"
#include "scenarios/run/records.h"
#include "scenarios/workloads/workload.h"

namespace dagsim::scenarios::job_records {

// How a process ended: {"code": C}, {"signal": "SIGKILL"}, or null (it had not, when recorded).
struct Exit {
  std::optional<int64_t> code;
  std::string signal;
  bool ended() const { return code.has_value() || !signal.empty(); }
  bool ok() const { return code && *code == 0; }
  std::string text() const;  // "exit 0", "SIGKILL", "no exit"
};

struct Worker {
  uint32_t local_rank = 0;
  std::optional<uint32_t> rank;
  int64_t pid = 0;
  double started_ms = 0;
  std::optional<double> ended_ms;
  Exit exit;
};

struct Incarnation {
  uint32_t node = 0;
  uint32_t incarnation = 0;
  std::string name;  // "agent1"
  int64_t pid = 0;
  double started_ms = 0;
  std::optional<double> ended_ms;
  Exit exit;
  bool stopped_by_run = false;
  std::vector<std::string> argv;
  std::string log;  // relative to the job's dir
  std::vector<Worker> workers;
  uint64_t restarts = 0;
  std::string label() const;  // "agent1" or "agent1 (incarnation 2)"
};

struct Fault {
  size_t index = 0;  // in fault_timeline
  std::string kind;
  std::string target;  // "agent2", "agent2:1", "store", "agent0,agent1|agent2"
  int line = 0;
  std::optional<double> at_ms;
  std::optional<double> until_ms;
  bool fired = false;
  std::string trigger;
  std::string detail;
  bool struck() const { return at_ms.has_value(); }
  std::string label() const;  // "kill of agent2 (line 14)"
};

struct Round {
  uint64_t round = 0;
  double at_ms = 0;
  std::vector<std::string> participants;
};

struct Command {
  uint32_t check = 0;
  std::vector<std::string> argv;
  std::optional<int64_t> exit;  // null: it could not be run (its output says why)
  std::string output;
};

struct Orphan {
  int64_t pid = 0;
  std::string cmdline;
  // Left alive below this agent incarnation when it exited (its guard killed it); absent: alive
  // after the whole run.
  std::optional<uint32_t> agent;
  std::optional<uint32_t> incarnation;
};

struct Violation {
  std::string invariant;  // "S2", "L6"
  std::string text;       // whole, as recorded
};

struct JobRecords {
  std::string dir;
  std::string launcher;
  std::string rdzv_backend;
  uint64_t seed = 0;
  std::vector<Round> rounds;
  std::string store_record;
  std::string store_format;
  nlohmann::json store_report;
  std::vector<Violation> violations;
  std::string store_error;
  std::vector<Orphan> orphans;
  std::vector<Command> commands;
  nlohmann::json reference;  // null or an object
  std::vector<Incarnation> incarnations;  // by (node, incarnation)
  std::vector<Fault> faults;
  double end_ms = 0;  // the run's end
};

// Reads `records` (records.job, its nodes' data and its fault timeline). Throws
// Error(invalid_records) naming the key.
JobRecords read_job_records(const Scenario& scenario, const RunRecords& records);

// The agent index a target names ("agent2", "agent2:1"), when it names one of `names`.
std::optional<uint32_t> target_agent(const std::string& target, const std::vector<std::string>& names);
// A partition's target ("agent0,agent1|agent2") as its groups of names.
std::vector<std::vector<std::string>> partition_groups(const std::string& target);

// The judge's results for the report (job_report.cc): the launcher, the agents with their
// incarnations, workers and exits, the rounds, the faults that struck, the store's verdict, the
// story line by line, and the seed note.
nlohmann::json job_results(const Scenario& scenario, const JobRecords& job);
// The spans of the report's timeline: agent incarnations ("agent"), workers ("worker"), rounds
// ("round"), worker-group restarts ("restart") and faults ("fault"), on their agent's row; a
// store fault on the row after the agents' (node == cluster.nodes).
std::vector<WorkloadSpan> job_spans(const Scenario& scenario, const JobRecords& job);

// The note every report of a job run carries.
inline constexpr const char* kSeedNote =
    "the fault schedule is seeded; the job's own processes are real and not replayed by the seed";

}  // namespace dagsim::scenarios::job_records
