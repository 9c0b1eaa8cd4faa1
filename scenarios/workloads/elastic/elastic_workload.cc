// The elastic workload's node side (elastic_workload.h).
#include "scenarios/workloads/elastic/elastic_workload.h"

#include "core/base/assert.h"
#include "core/elastic/agent_life.h"
#include "core/rendezvous/rendezvous_backend.h"
#include "core/runtime/cancel_scope.h"
#include "scenarios/workloads/program/program.h"
#include "scenarios/workloads/program/program_workload.h"
#include "scenarios/workloads/rendezvous/rendezvous_workload.h"

namespace dagsim::scenarios {

using runtime::TimePoint;

ElasticWorkload::ElasticWorkload(const Scenario& scenario, uint64_t seed)
    : scenario_(scenario), spec_(scenario.workload.as<ElasticSpec>()), model_(spec_, seed),
      registry_(rpc::FunctionRegistry::with_builtins()), lives_(scenario.cluster.nodes) {
  add_program_functions(registry_);
}

ElasticWorkload::~ElasticWorkload() { release_nodes(); }

void ElasticWorkload::release_nodes() {
  // The agents and handlers first (their scopes), then what they use.
  for (std::deque<Life>& lives : lives_) {
    for (Life& life : lives) {
      life.elastic.reset();
      life.handler.reset();
      life.agent_scope.reset();
    }
  }
  for (std::deque<Life>& lives : lives_) lives.clear();
}

// RRef deletions and context releases of the last group, as the program workload's.
runtime::Duration ElasticWorkload::drain_time() const { return autograd_drain_time(scenario_); }

bool ElasticWorkload::settled(uint32_t node) const {
  return node >= lives_.size() || lives_[node].empty() || autograd_settled(lives_[node].back().autograd.get());
}

void ElasticWorkload::node_main(NodeContext& node) {
  std::deque<Life>& lives = lives_[node.index()];
  lives.emplace_back();
  Life& life = lives.back();
  life.agent = std::make_unique<rpc::RpcAgent>(node.env(), registry_);
  if (node.index() == spec_.rendezvous.store_node) {
    run_store(node, life);
  } else {
    run_agent(node, life);
  }
}

void ElasticWorkload::run_store(NodeContext& node, Life& life) {
  life.service = std::make_unique<store::StoreService>(*life.agent);
  nlohmann::json& checkpoints = node.record()["checkpoints"] = nlohmann::json::array();
  const std::string key = checkpoint_key(spec_);
  const std::string state = rendezvous::state_key(spec_.rendezvous.settings.run_id);
  life.service->set_write_observer([this, &node, &checkpoints, &life, key, state](const std::string& written,
                                                                                 const store::Versioned& now) {
    if (written == state) report_store_round(node, now);
    if (written != key) return;
    nlohmann::json entry = {{"t", node.scenario_now().ns()}, {"v", now.version}};
    if (now.version == 0) {
      entry["deleted"] = true;
    } else {
      try {
        const Checkpoint c = decode_checkpoint(now.value, spec_);
        entry["step"] = c.step;
        entry["round"] = c.round;
      } catch (const Error& e) {
        entry["error"] = e.what();  // the judge names a foreign write
      }
    }
    checkpoints.push_back(std::move(entry));
    life.last_checkpoint = now.value;
  });
  nlohmann::json* record = &node.record();
  const Life* mine = &life;
  node.at_end([this, record, mine] {
    if (mine->last_checkpoint.empty()) return;
    try {
      const Checkpoint c = decode_checkpoint(mine->last_checkpoint, spec_);
      nlohmann::json params = nlohmann::json::array();
      for (const Tensor& p : c.params) params.push_back(tensor_record(p));
      (*record)["final"] = {{"step", c.step}, {"round", c.round}, {"params", std::move(params)}};
    } catch (const Error&) {
      // Already recorded with the write that stored it.
    }
  });
  life.agent->start();
}

std::vector<WorkerId> ElasticWorkload::resolve(const std::vector<rendezvous::NodeDesc>& members) const {
  std::vector<WorkerId> out;
  for (size_t rank = 0; rank < members.size(); ++rank) {
    const std::string& addr = members[rank].addr;
    std::optional<uint32_t> index;
    for (uint32_t i = 0; i < scenario_.cluster.nodes && !index; ++i) {
      if (scenario_.cluster.node_name(i) == addr) index = i;
    }
    if (!index || !spec_.is_agent(*index)) {
      throw errors::invalid_argument("rank " + std::to_string(rank) + " of the round is " +
                                     (addr.empty() ? std::string("gone from its state") : "\"" + addr + "\", no agent of this run"));
    }
    out.push_back(static_cast<WorkerId>(*index));
  }
  return out;
}

void ElasticWorkload::run_agent(NodeContext& node, Life& life) {
  runtime::Env& env = node.env();
  nlohmann::json& record = node.record();
  record["node"] = scenario_.cluster.node_name(node.index());
  nlohmann::json& events = record["events"] = nlohmann::json::array();
  nlohmann::json& groups = record["groups"] = nlohmann::json::array();
  nlohmann::json& commits = record["commits"] = nlohmann::json::array();

  life.autograd = std::make_unique<dist_autograd::DistAutograd>(*life.agent, dist_autograd::DistEngineOptions{
      .backward_timeout = std::min(runtime::Duration{std::chrono::seconds(10)}, scenario_.max_virtual_time / 4)});
  life.optimizer_host = std::make_unique<optim::OptimizerHost>(*life.agent, *life.autograd);
  life.agent->start();
  life.client = std::make_unique<store::StoreClient>(*life.agent, spec_.rendezvous.store_node);
  life.client->set_timeout(spec_.rendezvous.store_timeout);
  rendezvous::NodeDesc desc;
  desc.addr = scenario_.cluster.node_name(node.index());
  desc.pid = node.incarnation();
  rendezvous::RendezvousHandlerOptions options;
  options.poll_interval = spec_.rendezvous.poll_interval;
  life.handler = std::make_unique<rendezvous::RendezvousHandler>(env, *life.client, spec_.rendezvous.settings, desc, options);
  const auto now = [&node] { return node.scenario_now().ns(); };

  rendezvous::RendezvousHandler* handler = life.handler.get();
  TrainingListener listener;
  listener.started = [&groups](uint64_t step) { groups.back()["start_step"] = step; };
  // The last commit this node's rank 0 made, kept so the trained parameters outlive a store that
  // dies: recorded when the job's last step commits (a node killed afterwards keeps it), and at
  // the run's end while this incarnation lives.
  const auto record_final = [&record](const Checkpoint& c) {
    nlohmann::json params = nlohmann::json::array();
    for (const Tensor& p : c.params) params.push_back(tensor_record(p));
    record["final"] = {{"step", c.step}, {"round", c.round}, {"params", std::move(params)}};
  };
  listener.committed = [this, &node, &commits, &life, now, record_final](const Checkpoint& c, uint64_t version, double loss) {
    commits.push_back({{"t", now()}, {"step", c.step}, {"round", c.round}, {"v", version}, {"loss", number_record(loss)}});
    life.last_commit = c;
    if (c.step == spec_.steps) record_final(c);
    node.report(WorkloadEvent::step_committed, c.step);
  };
  listener.backward = [&node] { node.report_backward(); };
  node.at_end([&life, record_final] {
    if (life.last_commit) record_final(*life.last_commit);
  });
  elastic::WorkerFn worker = [this, &node, &life, &groups, handler, listener, now](const elastic::WorkerGroupSpec& group) {
    nlohmann::json members = nlohmann::json::array();
    for (const rendezvous::NodeDesc& m : group.members) members.push_back(m.addr);
    // The built-in store's versions carry its incarnation (store_service.h): a version of a later
    // life means it restarted, empty, since the job began (and its rounds count from 0 again).
    const uint64_t store_life = handler->last_token() >> 48;
    groups.push_back({{"t", now()}, {"store_life", store_life}, {"round", group.info.round}, {"rank", group.info.rank},
                      {"world", group.info.world_size}, {"members", std::move(members)}});
    const bool store_restarted = store_life != 0;
    node.report(WorkloadEvent::member, group.info.round);
    run_elastic_worker(model_, group.info, resolve(group.members), store_restarted, {*life.agent, *life.autograd, *life.client},
                       listener);
  };
  life.elastic = std::make_unique<elastic::ElasticAgent>(env, *life.handler, *life.client, spec_.rendezvous.settings.run_id,
                                                         spec_.agent, std::move(worker));
  life.elastic->set_listener([&events, now](const elastic::AgentEvent& e) {
    nlohmann::json j = {{"t", now()}, {"event", elastic::event_name(e.kind)}, {"round", e.info.round},
                        {"rank", e.info.rank}, {"world", e.info.world_size}};
    if (e.kind == elastic::AgentEvent::Kind::nodes_waiting) j["waiting"] = e.waiting;
    if (e.kind == elastic::AgentEvent::Kind::group_failed) j["remaining"] = e.remaining;
    if (!e.detail.empty()) j["detail"] = e.detail;
    events.push_back(std::move(j));
  });

  const uint32_t me = node.index();
  using Kind = RendezvousAction::Kind;
  std::optional<runtime::Duration> join_at;
  if (node.incarnation() == 0) join_at = spec_.rendezvous.action_time(me, Kind::join);
  const std::optional<runtime::Duration> leave_at = spec_.rendezvous.action_time(me, Kind::leave);
  life.agent_scope = std::make_unique<runtime::CancelScope>("elastic agent", env.spawner);
  if (leave_at) {
    // SIGTERM at the leave time: the agent's scope is cancelled wherever it waits.
    runtime::CancelScope* scope = life.agent_scope.get();
    env.spawner.spawn("leave signal", [&node, &env, scope, at = *leave_at] {
      while (node.scenario_now() < TimePoint{at}) env.clock.sleep(TimePoint{at} - node.scenario_now());
      scope->cancel();
    });
  }
  node.spawn_foreground("elastic agent", [this, &node, &env, &life, &record, join_at, now] {
    if (join_at) {
      runtime::CancelScope::Enter in(*life.agent_scope);  // a leave before the join is a SIGTERM too
      try {
        while (node.scenario_now() < TimePoint{*join_at}) env.clock.sleep(TimePoint{*join_at} - node.scenario_now());
      } catch (const Error& e) {
        if (e.code() != ErrorCode::cancelled || !life.agent_scope->cancelled()) throw;  // the node died
      }
    }
    record["started"] = now();
    // The whole life, as `dagsim launch` lives it (core/elastic/agent_life.h): the close rule, the
    // exit op and the departure are the launcher's own code. The store is a node of its own here,
    // so this agent does not linger for the others.
    elastic::AgentLife agent_life(env, *life.elastic, *life.handler, *life.client);
    int64_t ended_at = 0;  // when run() ended: the record's time, as before the close and the exit op
    const elastic::AgentLifeEnd end = agent_life.live(*life.agent_scope, [&] {
      ended_at = now();
      // The agent's process exits, and its workers with it: calls to this node fail from now on,
      // so a group that still counts on it fails and re-forms, as PyTorch's do when a node is gone.
      life.agent->refuse_calls(scenario_.cluster.node_name(node.index()) + "'s agent has ended: its workers are gone");
    });
    nlohmann::json result;
    if (end.result) {
      const elastic::AgentResult& r = *end.result;
      result = {{"outcome", elastic::outcome_name(r.outcome)}, {"restarts", r.restarts}, {"rounds", r.rounds}};
      if (r.error) {
        result["error"] = r.error->what();
        result["code"] = std::string(error_name(r.error->code()));
      }
      if (r.barrier_timed_out) result["barrier_timed_out"] = true;
      if (elastic::closes_job(r)) result["closed_job"] = end.closed_job;
    } else {
      result = {{"outcome", "left"}};
    }
    result["t"] = ended_at;
    record["result"] = std::move(result);
  });
}

}  // namespace dagsim::scenarios
