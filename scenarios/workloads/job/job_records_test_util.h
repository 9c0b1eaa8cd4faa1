// Header-only test helper: a job run's records built as data, no process started (job_judge_test
// judges them, job_report_test writes them as a records directory for `dagsim report`).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "scenarios/run/records.h"

namespace dagsim::scenarios::job_test {

// A worker process as an agent's record lists it.
inline nlohmann::json worker(uint32_t local_rank, uint32_t rank, int64_t pid, double start, double end,
                             nlohmann::json exit = {{"code", 0}}) {
  return {{"local_rank", local_rank}, {"rank", rank}, {"pid", pid}, {"started_ms", start}, {"ended_ms", end}, {"exit", exit}};
}

// An agent incarnation's record (NodeRecord::data), launched by `argv`.
inline nlohmann::json agent(int64_t pid, double start, double end, nlohmann::json exit, nlohmann::json workers, uint64_t restarts,
                            nlohmann::json argv) {
  return {{"pid", pid},
          {"started_ms", start},
          {"ended_ms", end},
          {"exit", exit},
          {"stopped_by_run", false},
          {"argv", argv},
          {"log", "agents/agent.log"},
          {"workers", workers},
          {"restarts", restarts}};
}

// A good run of two agents x two workers (`dagsim launch` agents started by `argv`): agent1 is
// killed at 3 s (its workers with it) and its crash restarts it at 4 s (incarnation 1); agent0's
// workers fail at the crash and its group restarts; rounds form at 1 s, 5 s and 6.8 s (after the
// store's pause at 6 s). records.job names `job_dir`, `seed` and the store record's `format`.
inline RunRecords two_agent_job_run(const nlohmann::json& argv, const std::string& job_dir, int seed, const std::string& format) {
  using nlohmann::json;
  RunRecords r;
  r.transport = "job";
  r.outcome = "finished";
  r.end = runtime::TimePoint(std::chrono::milliseconds(10000));
  r.node_names = {"agent0", "agent1"};
  r.final_states = {runtime::NodeState::up, runtime::NodeState::up};
  r.nodes.push_back({0, 0, agent(100, 0, 9000, {{"code", 0}},
                                 {worker(0, 0, 101, 1000, 3100, {{"code", 1}}), worker(1, 1, 102, 1000, 3100, {{"code", 1}}),
                                  worker(0, 0, 103, 5100, 9000), worker(1, 1, 104, 5100, 9000)},
                                 1, argv)});
  r.nodes.push_back({1, 0, agent(200, 0, 3000, {{"signal", "SIGKILL"}},
                                 {worker(0, 2, 201, 1000, 3000, {{"signal", "SIGKILL"}}),
                                  worker(1, 3, 202, 1000, 3000, {{"signal", "SIGKILL"}})},
                                 0, argv)});
  r.nodes.push_back(
      {1, 1, agent(300, 4000, 9000, {{"code", 0}}, {worker(0, 2, 301, 5100, 9000), worker(1, 3, 302, 5100, 9000)}, 0, argv)});
  r.fault_timeline = json::array(
      {{{"kind", "crash"}, {"target", "agent1"}, {"line", 14}, {"at_ms", 3000.0}, {"until_ms", 4000.0}, {"fired", true},
        {"trigger", "at_ms = 3000"}, {"detail", "SIGKILL to pid 200"}},
       {{"kind", "store_pause"}, {"target", "store"}, {"line", 20}, {"at_ms", 6000.0}, {"until_ms", 6500.0}, {"fired", true},
        {"trigger", "at_ms = 6000"}, {"detail", "SIGSTOP to the store"}}});
  r.job = {{"dir", job_dir},
           {"launcher", "dagsim"},
           {"rdzv_backend", "c10d"},
           {"seed", seed},
           {"rounds",
            {{{"round", 0}, {"at_ms", 1000.0}, {"participants", {"agent0", "agent1"}}},
             {{"round", 1}, {"at_ms", 5000.0}, {"participants", {"host_100_0", "host_300_0"}}},
             {{"round", 2}, {"at_ms", 6800.0}, {"participants", {"agent0", "agent1"}}}}},
           {"store",
            {{"record", "store.jsonl"}, {"format", format}, {"report", json::object()}, {"violations", json::array()}, {"error", ""}}},
           {"orphans", json::array()},
           {"commands", json::array()},
           {"reference", nullptr}};
  return r;
}

}  // namespace dagsim::scenarios::job_test
