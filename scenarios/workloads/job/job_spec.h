// JobSpec: a scenario whose workload is a real training job (issue 51): the user's own script,
// started as real processes under `dagsim launch` or PyTorch's torchrun, with faults from the
// scenario vocabulary struck on those processes, the store and the network, and a verdict from the
// rendezvous invariant checker (judged from the store's record) and the job's own checks.
//
// The three halves meet only in data, as every workload's do (DESIGN.md, "Results are data"):
//  - the loader (job_reader.cc) reads [job], its [[faults]] and its [[checks]] into this struct and
//    refuses anything it cannot run (it names the file, line and key);
//  - the runner (scenarios/job/job_run.h) starts the store, the agents and their workers, strikes
//    the faults, gathers every process's output and exit and the store's record, runs the
//    `command` checks and the reference run, and writes RunRecords (layout below);
//  - the judge (job_judge.h) judges those records alone, so `dagsim judge DIR` gives the same
//    verdict on another host without running anything again.
//
// Scenario time is wall time since the run's start (as over TCP): a job is real, so a seed fixes
// the fault schedule ([random_faults] and the seed handed to the workers as DAGSIM_SEED), never
// what the job's own processes do with their time. Reports say so.
//
// Records of a job run (RunRecords; the TCP runtime's layout, plus `job`):
//   node_names      "agent0" .. "agentN-1": every agent the job ever starts (late joiners too);
//                   scenario.cluster.nodes is N and cluster.name_prefix "agent".
//   nodes           one NodeRecord per agent incarnation (a crash's restart is incarnation 1):
//                   data = {"pid", "started_ms", "ended_ms" (null: ran to the run's end),
//                           "exit": {"code": C} | {"signal": "SIGKILL"} | null,
//                           "stopped_by_run": bool (the run ended it at its timeout),
//                           "argv": [...], "log": "agents/agent0.0.log" (relative to job.dir),
//                           "workers": [{"local_rank", "rank" (null when unknown), "pid",
//                                        "started_ms", "ended_ms", "exit"}],
//                           "restarts": R (worker-group restarts, as torchrun counts them)}
//   fault_timeline  one object per JobFault, in file order: {"kind", "target" ("agent2",
//                   "agent2:1", "store", "agent0,agent1|agent2" for a partition), "line",
//                   "at_ms" and "until_ms" once struck (absent: never struck), "fired": bool,
//                   "trigger": the `when` as text, "detail": what was done ("SIGKILL to pid 123")}
//   outcome         "finished" (every agent exited by itself before `timeout`) or "time_limit"
//   job             {"dir": the run's folder (absolute), "launcher", "rdzv_backend", "seed",
//                    "rounds": [{"round", "at_ms", "participants": [...]}] (from the store's record),
//                    "store": {"record": "store.jsonl", "format", "report": judge_store_records'
//                              report, "violations": [...], "error": "" (why it could not be judged)},
//                    "orphans": [{"pid", "cmdline", "agent"?, "incarnation"?}]: with "agent"
//                               (its index) and "incarnation", left alive below that agent
//                               incarnation when it exited (its guard killed it); without, alive
//                               after the run (before it killed them),
//                    "commands": [{"check": I (index in scenario.checks), "argv": [...],
//                                  "exit": C, "output": "first 64 KiB"}],
//                    "reference": null | {"dir", "outcome", "exit_codes": {...}}}
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/clock.h"

namespace dagsim::scenarios {

using runtime::Duration;

// Who a fault or a trigger names: an agent ("agent2": the agent process and every worker below it),
// one worker ("agent2:1": local rank 1 of agent2's current worker group), or the store.
struct JobTarget {
  enum class Kind : uint8_t { agent, worker, store };
  Kind kind = Kind::agent;
  uint32_t agent = 0;
  uint32_t local_rank = 0;
};

// When a fault strikes (`at_ms` or `when = { ... }`), then `after_ms` more.
struct JobTrigger {
  enum class Kind : uint8_t {
    at,         // at_ms after the run's start
    round,      // when = { round = K }: the store's record shows round K formed (complete)
    store_key,  // when = { store_key = "PATTERN" }: a key matching the glob is first written
    output,     // when = { output = "REGEX", from = "agent1:0" }: a line of that worker (or agent)
  };
  Kind kind = Kind::at;
  Duration at{0};
  uint64_t round = 0;
  std::string pattern;  // store_key's glob (* and ?), or output's ECMAScript regex
  std::optional<JobTarget> from;  // output: whose lines (an agent's own or one worker's); unset: any
  Duration after{0};
};

struct JobFault {
  enum class Kind : uint8_t {
    kill,           // SIGKILL to the target's process group (an agent: its workers die with it)
    crash,          // kill, then the agent starts again restart_after later (a new incarnation)
    pause,          // SIGSTOP, then SIGCONT after `duration`
    leave,          // SIGTERM (an agent leaves as on a scale-down; a worker is told to stop)
    store_pause,    // SIGSTOP of the store for `duration`
    store_restart,  // the store killed and started again restart_after later, on the same port,
                    // keeping its data (keep_data) or empty
    partition,      // agents in different `groups` cannot reach each other for `duration`
                    // (each agent in its own network namespace: JobSpec::namespaces)
    // The store's fault layer (net/tcpstore/store_faults.h), for `duration`, on the queries named
    // in store_ops (all when empty), each hit with `probability`, drawn from the run's seed:
    store_delay,    // a hit query is applied, and answered, `delay` late
    store_drop,     // a hit query is read and neither applied nor answered (the client times out)
    store_reset,    // the store closes the connection at a hit query (not applied)
  };
  Kind kind = Kind::kill;
  JobTarget target;
  JobTrigger when;
  std::optional<Duration> restart_after;  // crash, store_restart
  std::optional<Duration> duration;       // pause, store_pause, partition, store_delay/drop/reset
                                          // (resume/heal after)
  bool keep_data = true;                  // store_restart
  std::vector<std::string> store_ops;     // store_delay/drop/reset: TCPStore query names ("compare_set")
  double probability = 1.0;               // store_delay/drop/reset
  std::optional<Duration> delay;          // store_delay
  std::vector<std::vector<uint32_t>> groups;  // partition: agent indices
  int line = 0;                           // where it was declared, for messages
};

// Each JobFault::Kind as a scenario writes it, in the enum's order (the loader reads them, the
// runner and the report name them).
inline constexpr std::array<std::string_view, 10> kJobFaultKindNames = {
    "kill", "crash", "pause", "leave", "store_pause", "store_restart", "partition", "store_delay", "store_drop", "store_reset"};
inline std::string_view job_fault_kind_name(JobFault::Kind kind) { return kJobFaultKindNames[static_cast<size_t>(kind)]; }

enum class JobLauncher : uint8_t { dagsim, torchrun };
// c10d: PyTorch's c10d backend on a `dagsim store --record` the run starts (every store operation
// recorded, so the invariants are judged); etcd: an etcd-server the run starts; dagsim: dagsim
// launch's own backend on that recorded store (launcher dagsim only).
enum class JobRdzvBackend : uint8_t { c10d, etcd, dagsim };

struct JobSpec {
  // What each worker runs, as torchrun takes it: the script and its arguments (`command`), run by
  // `python` unless no_python; or `-m module` (module = true: command[0] is the module).
  std::vector<std::string> command;
  bool module = false;
  bool no_python = false;
  std::string python;  // the workers' interpreter ("": dagsim launch's rule; torchrun: /usr/bin/python3)
  uint32_t agents = 2;  // started at the run's start (late joiners are counted apart)
  uint32_t min_nodes = 1;  // nnodes = "MIN:MAX" (or "N")
  uint32_t max_nodes = 2;
  uint32_t nproc_per_node = 1;
  JobLauncher launcher = JobLauncher::dagsim;
  JobRdzvBackend rdzv_backend = JobRdzvBackend::c10d;
  std::map<std::string, std::string> rdzv_conf;  // passed as --rdzv_conf k=v,...
  uint32_t max_restarts = 3;
  Duration monitor_interval{std::chrono::seconds(1)};
  std::map<std::string, std::string> env;  // added to every agent's (and so every worker's) environment
  Duration timeout{std::chrono::minutes(5)};  // the run stops everything here; outcome time_limit
  // Late joiners: agent index (>= agents) -> when it starts.
  struct LateJoin {
    uint32_t agent = 0;
    JobTrigger when;
  };
  std::vector<LateJoin> late_joins;
  // Each agent in a network namespace of its own (needed for a partition; root only).
  bool namespaces = false;
  std::string directory;  // the workers' working directory ("": the scenario file's folder)
  // The L6 rule the store's record is judged by: true is dagsim's (survivors re-form when a member
  // of a complete round expires), false PyTorch 1.13's (judge.json's rerendezvous_on_expiry).
  bool rerendezvous_on_expiry = true;
  std::vector<JobFault> faults;

  uint32_t total_agents() const { return agents + static_cast<uint32_t>(late_joins.size()); }
};

}  // namespace dagsim::scenarios
