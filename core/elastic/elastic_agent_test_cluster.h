// AgentCluster: the elastic agent tests' fixture. A store node and n agents on one LocalRuntime
// (rendezvous_test_cluster.h), each agent's run() on a fiber of its node in a scope of its own, so
// a test can stop one agent (SIGTERM: its scope cancelled) while its node lives on.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_test_cluster.h"

namespace dagsim::elastic::testing {

using runtime::TimePoint;

class AgentCluster : public rendezvous::testing::Cluster {
 protected:
  ~AgentCluster() {
    // Nodes die first (their fibers unwind out of the agents), then the agents go.
    for (WorkerId i = 0; i < rt_.num_nodes(); ++i) {
      if (rt_.is_alive(i)) rt_.kill(i);
    }
    rt_.run();
    scopes_.clear();
    agents_by_node_.clear();
  }

  // Agent i (1-based) over `workers`; run() starts at `when`, its result lands in run_result(i),
  // and its events in events_[i].
  void agent_at(int i, TimePoint when, ElasticAgentOptions options, WorkerGroupFactory workers) {
    runtime::Env& env = rt_.env(static_cast<WorkerId>(i));
    const auto at = static_cast<size_t>(i);
    agents_by_node_.resize(at + 1);
    run_results_.resize(at + 1);
    events_.resize(at + 1);
    auto agent = std::make_unique<ElasticAgent>(env, handler(i), *clients_[at - 1], "job", std::move(options), std::move(workers));
    agent->set_listener([this, at](const AgentEvent& e) { events_[at].push_back(e); });
    agents_by_node_[at] = std::move(agent);
    scopes_[i] = std::make_unique<runtime::CancelScope>("agent", env.spawner);
    env.spawner.spawn(*scopes_[i], "agent", [this, i, at, when, &env] {
      env.clock.sleep_until(when);
      run_results_[at] = agents_by_node_[at]->run();
      done_at_[i] = rt_.now();
    });
  }
  void agent_at(int i, TimePoint when, ElasticAgentOptions options, WorkerFn worker) {
    runtime::Env& env = rt_.env(static_cast<WorkerId>(i));
    agent_at(i, when, std::move(options), fiber_worker_group(env, std::move(worker)));
  }
  // Stops agent i as SIGTERM does: its run() unwinds, its worker group with it.
  void stop_agent(int i) { scopes_.at(i)->cancel(); }

  ElasticAgent& agent(int i) { return *agents_by_node_[static_cast<size_t>(i)]; }
  const std::optional<AgentResult>& run_result(int i) { return run_results_[static_cast<size_t>(i)]; }
  int count(int i, AgentEvent::Kind kind) {
    int n = 0;
    for (const AgentEvent& e : events_[static_cast<size_t>(i)]) n += e.kind == kind ? 1 : 0;
    return n;
  }
  // Agent i's events, "kind detail; ..." for failure messages.
  std::string seen(int i) {
    std::string text;
    for (const AgentEvent& e : events_[static_cast<size_t>(i)]) text += std::string(event_name(e.kind)) + " " + e.detail + "; ";
    return text;
  }

  std::map<int, std::unique_ptr<runtime::CancelScope>> scopes_;
  std::vector<std::unique_ptr<ElasticAgent>> agents_by_node_;
  std::vector<std::optional<AgentResult>> run_results_;
  std::vector<std::vector<AgentEvent>> events_;
  std::map<int, TimePoint> done_at_;
};

}  // namespace dagsim::elastic::testing
