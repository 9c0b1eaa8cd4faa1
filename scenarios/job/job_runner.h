// JobRunner: one run of a [job] scenario (job_run.h), the state every part of it shares. Its
// parts are in files of their own:
//   job_run.cc      the run itself: the loop that polls, triggers, ends and gathers the records
//   job_agents.cc   the store and the agents: their argv, environment, start, workers, exit
//   job_faults.cc   striking a fault on processes, the store or the network, and undoing it
//   job_records.cc  job.json for the judge, the NodeRecords, the orphans, the command checks
//   job_netns.cc    the network namespaces (JobSpec::namespaces)
//   job_etcd.cc     rdzv_backend = "etcd": the etcd the run starts, its record from etcd's revisions
// Time is ms since the run's start on the steady clock (a job is real processes).
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "net/process/process.h"
#include "scenarios/format/scenario.h"
#include "scenarios/job/job_netns.h"
#include "scenarios/job/job_run.h"
#include "scenarios/job/job_triggers.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios::job {

struct WorkerSeen {
  uint32_t local_rank = 0;
  std::optional<uint32_t> rank;
  pid_t pid = 0;
  double started_ms = 0;
  std::optional<double> ended_ms;
  nlohmann::json exit = nullptr;  // known only when the run ended it
};

struct Incarnation {
  uint32_t agent = 0;
  uint32_t incarnation = 0;
  net::Process process;
  pid_t pid = 0;
  double started_ms = 0;
  std::optional<double> ended_ms;
  nlohmann::json exit = nullptr;
  bool stopped_by_run = false;
  bool killed_by_fault = false;  // its end was a fault's (kill, crash)
  std::vector<std::string> argv;
  std::string log;          // relative to the run's folder
  std::string events_path;  // dagsim launch's --events (absolute)
  std::vector<WorkerSeen> workers;
  std::unique_ptr<LineTail> tail;
  bool running() const { return !ended_ms.has_value(); }
};

// A trigger's progress: matched once (matched_ms), due after_ms later.
struct TriggerState {
  JobTrigger when;
  std::optional<std::regex> regex;  // output
  std::optional<double> matched_ms;
  std::optional<double> due_ms() const {
    if (!matched_ms) return std::nullopt;
    return *matched_ms + std::chrono::duration<double, std::milli>(when.after).count();
  }
};

struct FaultState {
  const JobFault* spec = nullptr;
  TriggerState trigger;
  bool struck = false;
  bool done = false;  // nothing more to do (restored, or a one-shot fault)
  std::optional<double> at_ms;
  std::optional<double> until_ms;
  std::optional<double> undo_due_ms;  // resume, heal, restart
  std::string detail;
  std::vector<pid_t> paused;  // the pids a pause stopped (to continue them)
  std::vector<uint64_t> paused_start;  // their start times (/proc/PID/stat's 22nd): a reused pid is not continued
  pid_t pid = 0;              // the agent's pid the fault was struck on (for job.json)
};

struct LateJoinState {
  uint32_t agent = 0;
  TriggerState trigger;
  bool started = false;
};

// store_delay, store_drop, store_reset: the store's fault layer (job_faults.cc).
bool is_layer_fault(JobFault::Kind k);

// [random_faults]'s draw for `seed`, as faults on agents (job_drawn_faults.cc).
std::vector<JobFault> drawn_faults(const Scenario& scenario, uint64_t seed);

// The `command` checks of the scenario, run after the job (job.commands).
nlohmann::json run_command_checks(const Scenario& scenario, const std::string& dir, const nlohmann::json& reference);

// Why /usr/bin/etcd cannot run here (rdzv_backend = "etcd"), or nullopt (job_etcd.cc).
std::optional<std::string> etcd_unavailable();

// The scenario's text for the records (its file's, or "" when built as data).
std::string scenario_text(const Scenario& scenario);

class JobRunner {
 public:
  JobRunner(const Scenario& scenario, const JobRunOptions& options, std::string dir, bool reference);
  ~JobRunner();
  RunRecords run();

 private:
  // job_run.cc
  double now_ms() const;
  void say(const std::string& line) const;
  void tick();
  void poll_triggers();
  void on_agent_line(uint32_t agent, const std::string& line);
  bool job_over() const;
  void stop_everything();
  // job_agents.cc
  std::vector<std::string> base_env() const;
  void start_store();
  void stop_store();
  void start_agent(uint32_t agent);
  std::vector<std::string> agent_argv(uint32_t agent, uint32_t incarnation) const;
  void reap_agents();
  void scan_workers();
  Incarnation* current(uint32_t agent);
  std::optional<pid_t> worker_pid(uint32_t agent, uint32_t local_rank);
  uint32_t restarts_of(const Incarnation& inc) const;
  // job_etcd.cc: the store is an etcd (rdzv_backend = "etcd")
  bool on_etcd() const { return spec_.rdzv_backend == JobRdzvBackend::etcd; }
  bool store_paused() const;
  void start_etcd();
  void poll_etcd(bool now);  // reads etcd's new revisions into store.jsonl (every 50 ms, or now)
  void poll_etcd_v2();       // torchrun's: its state key's v2 events
  void kill_etcd(bool keep_data);
  void stop_etcd();
  void etcd_line(nlohmann::json line);
  // job_faults.cc
  void strike(FaultState& f);
  void undo(FaultState& f);
  std::string target_name(const JobTarget& t) const;
  void note_fault(const std::string& kind, std::optional<pid_t> pid);
  // The store's fault layer: the struck, unhealed store_delay/drop/reset faults written to
  // store/faults.json (tmp + rename) and SIGUSR1 to the store; what was done, for the detail.
  std::string write_store_faults();
  std::string store_faults_path() const { return dir_ + "/store/faults.json"; }
  // job_records.cc
  void write_job_json() const;
  nlohmann::json node_data(const Incarnation& inc) const;
  RunRecords gather();
  nlohmann::json find_orphans();

  const Scenario& scenario_;
  const JobSpec& spec_;
  JobRunOptions options_;
  std::string dir_;
  bool reference_;  // this is the fault-free reference run
  std::string token_;
  std::string directory_;  // the workers' cwd
  std::chrono::steady_clock::time_point start_;
  int64_t start_unix_ns_ = 0;

  std::unique_ptr<Netns> netns_;
  net::Process store_;
  uint16_t store_port_ = 0;
  uint32_t port_attempts_ = 0;  // the first start's ports found taken at the store's bind
  uint32_t store_incarnation_ = 0;
  std::vector<std::string> store_records_;  // store.jsonl, then store.1.jsonl ...
  bool restore_next_ = false;   // the next store replays store_records_[restore_from_ ..] (keep_data)
  size_t restore_from_ = 0;     // the first record since a restart that lost the data
  std::unique_ptr<StoreTail> store_tail_;
  std::set<std::string> keys_written_;
  std::vector<nlohmann::json> store_faults_;  // job.json's faults
  uint16_t etcd_peer_port_ = 0;
  std::unique_ptr<std::ofstream> etcd_record_;      // store.jsonl, written from etcd's revisions
  uint64_t etcd_revision_ = 0;                      // the last revision read
  std::map<std::string, std::string> etcd_keys_;    // the prefix's keys at that revision
  double last_etcd_poll_ms_ = -1e9;

  std::vector<std::unique_ptr<Incarnation>> incarnations_;
  std::vector<uint32_t> next_incarnation_;  // by agent
  std::vector<bool> agent_done_;            // by agent: it will not start again
  std::vector<std::optional<double>> restart_due_;  // by agent: a crash's restart
  std::vector<JobFault> drawn_;  // [random_faults]'s, for this seed (faults_ points into it)
  std::vector<FaultState> faults_;
  std::vector<LateJoinState> late_;
  double last_scan_ms_ = -1e9;
  std::string outcome_;
  double end_ms_ = 0;
};

}  // namespace dagsim::scenarios::job
