// The simulated launcher: n agents, each living core/elastic/agent_life.h (the code `dagsim launch`
// lives) over simulated worker processes (simulated_worker_processes.h) on one LocalRuntime, with a
// store node, under a schedule of faults: workers that crash, exit non-zero, hang, start slowly,
// report UNHEALTHY or ignore SIGTERM; agents that join late, get SIGTERM or are killed; a store host
// that dies. A case is data (LifeCase), so RapidCheck generates it and a failure prints it; a run
// (LifeRun) is what each agent did and when, and what the store committed; judge_life() holds it to
// the agent's rules, the close rule judged from the agents' events rather than from closes_job(),
// so a planted change to that rule is caught (agent_life_planted_test.cc); and every committed state
// and compare-and-set is held to the same rendezvous invariant checker (S1-S7, S10) that judges
// real runs from a store's record (`dagsim judge`), which reads the same facts.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/elastic/agent_life.h"
#include "core/elastic/simulated_worker_processes.h"

namespace dagsim::conformance {

using runtime::Duration;
using runtime::TimePoint;

struct AgentPlan {
  uint32_t local_world_size = 1;
  uint32_t max_restarts = 0;
  Duration join_at{};
  // What local rank 0 of this agent's k-th group does (the others succeed when it would); past
  // the list, every worker succeeds after 1 s.
  std::vector<elastic::SimulatedWorker> groups;
  std::optional<Duration> sigterm_at;  // the agent's scope cancelled: it leaves
  std::optional<Duration> kill_at;     // its node dies: the process is gone
  bool serves_store = false;           // lingers for its last round's departures (AgentLifeOptions)
};

struct LifeCase {
  uint32_t min_nodes = 1;
  uint32_t max_nodes = 1;
  Duration join_timeout = std::chrono::seconds(20);
  Duration last_call = std::chrono::seconds(1);
  Duration keep_alive_interval = std::chrono::seconds(1);
  Duration exit_barrier_timeout = std::chrono::seconds(10);
  Duration grace = std::chrono::seconds(2);
  std::vector<AgentPlan> agents;       // agent i + 1 is node i + 1; node 0 hosts the store
  std::optional<Duration> store_kill_at;
};
std::ostream& operator<<(std::ostream& out, const LifeCase& c);  // RapidCheck's counterexample

struct TimedEvent {
  TimePoint t;
  elastic::AgentEvent event;
};

struct AgentRun {
  std::vector<TimedEvent> events;
  std::optional<elastic::AgentLifeEnd> end;  // the life returned
  std::optional<TimePoint> end_t;
  std::optional<TimePoint> killed_at;
  std::optional<TimePoint> sigterm_at;  // when its scope was cancelled (if the life still ran)
  bool hung = false;                    // its last group has a worker that never ends by itself
  std::vector<elastic::SimulatedGroupRecord> groups;
  std::vector<elastic::SimulatedWorker> scripts;  // [group]: what its local rank 0 did
};

struct LifeRun {
  std::vector<AgentRun> agents;  // [agent index]
  std::optional<TimePoint> close_t;  // the first committed state with closed set
  std::optional<TimePoint> store_killed_at;
  TimePoint horizon;
  std::string fiber_failures;  // exceptions that ended a fiber other than by a node's death
  // What was blocked when nothing could wake any more (the runtime's stuck report): idle RPC
  // fibers once every life has ended, which is fine; a life among them is a hang.
  std::string stuck;
  // The rendezvous as the invariant checker reads it (scenarios/workloads/rendezvous/
  // rendezvous_history.h): the store's commits of the state key ({"history": ...}) and each
  // agent's compare-and-sets ({"node", "events": [], "writes"}), in the rendezvous workload's
  // record format.
  nlohmann::json store_record;
  std::vector<nlohmann::json> agent_records;  // [agent index]
};

// Runs the case to `horizon` of virtual time. Deterministic: the same case gives the same run.
LifeRun run_life_case(const LifeCase& c, Duration horizon = std::chrono::seconds(1200));

// What broke the agent's rules in `run`, one line each; empty when all hold.
std::vector<std::string> judge_life(const LifeCase& c, const LifeRun& run);

}  // namespace dagsim::conformance
