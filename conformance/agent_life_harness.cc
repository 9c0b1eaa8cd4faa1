// The simulated launcher (agent_life_harness.h): a LifeCase run on one LocalRuntime, and judged.
#include "conformance/agent_life_harness.h"

#include <algorithm>
#include <map>
#include <memory>

#include "core/fibers/local_runtime.h"
#include "core/rendezvous/rendezvous_backend.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/rendezvous/rendezvous_state.h"
#include "core/rpc/rpc_agent.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"
#include "scenarios/workloads/rendezvous/recording_store.h"
#include "scenarios/workloads/rendezvous/rendezvous_history.h"
#include "scenarios/workloads/rendezvous/rendezvous_invariants.h"

namespace dagsim::conformance {

namespace {

using elastic::AgentEvent;
using elastic::SimulatedWorker;

std::string ms(Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms"; }
std::string ms(TimePoint t) { return ms(t - TimePoint{}); }

const char* end_name(SimulatedWorker::End end) {
  switch (end) {
    case SimulatedWorker::End::exit: return "exit";
    case SimulatedWorker::End::signal: return "signal";
    case SimulatedWorker::End::hang: return "hang";
    case SimulatedWorker::End::unhealthy: return "unhealthy";
  }
  return "?";
}

// A job's end, as the agent's events say it: its group succeeded, or failed with no restart left.
bool ends_job(const AgentEvent& e) {
  return e.kind == AgentEvent::Kind::group_succeeded || (e.kind == AgentEvent::Kind::group_failed && e.remaining == 0);
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const LifeCase& c) {
  out << "min_nodes " << c.min_nodes << ", max_nodes " << c.max_nodes << ", join_timeout " << ms(c.join_timeout)
      << ", last_call " << ms(c.last_call) << ", keep_alive " << ms(c.keep_alive_interval) << ", exit_barrier "
      << ms(c.exit_barrier_timeout) << ", grace " << ms(c.grace);
  if (c.store_kill_at) out << ", store killed at " << ms(*c.store_kill_at);
  out << "\n";
  for (size_t i = 0; i < c.agents.size(); ++i) {
    const AgentPlan& a = c.agents[i];
    out << "  agent " << i + 1 << ": " << a.local_world_size << " worker(s), max_restarts " << a.max_restarts << ", joins at "
        << ms(a.join_at);
    if (a.sigterm_at) out << ", SIGTERM at " << ms(*a.sigterm_at);
    if (a.kill_at) out << ", killed at " << ms(*a.kill_at);
    if (a.serves_store) out << ", serves the store";
    out << ", groups [";
    for (const SimulatedWorker& w : a.groups) {
      out << " {" << end_name(w.end) << " after " << ms(w.start_delay + w.run_time);
      if (w.end == SimulatedWorker::End::exit) out << ", code " << w.exit_code;
      if (w.ignores_sigterm) out << ", ignores SIGTERM";
      out << "}";
    }
    out << " ]\n";
  }
  return out;
}

LifeRun run_life_case(const LifeCase& c, Duration horizon) {
  LifeRun run;
  run.agents.resize(c.agents.size());
  run.horizon = TimePoint{} + horizon;
  rendezvous::RendezvousSettings settings;
  settings.run_id = "job";
  settings.min_nodes = c.min_nodes;
  settings.max_nodes = c.max_nodes;
  settings.timeout.join = c.join_timeout;
  settings.timeout.last_call = c.last_call;
  settings.keep_alive_interval = c.keep_alive_interval;

  fibers::LocalRuntime rt;
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  std::vector<std::unique_ptr<rpc::RpcAgent>> rpc_agents;
  std::unique_ptr<store::StoreService> service;
  std::vector<std::unique_ptr<store::StoreClient>> clients;
  std::vector<std::unique_ptr<scenarios::RecordingStore>> recorders;  // the handlers' stores
  run.store_record = {{"history", nlohmann::json::array()}};
  run.agent_records.assign(c.agents.size(), nlohmann::json::object());
  std::vector<std::unique_ptr<rendezvous::RendezvousHandler>> handlers;
  std::vector<std::unique_ptr<elastic::ElasticAgent>> agents;
  std::vector<std::unique_ptr<runtime::CancelScope>> scopes;
  std::vector<bool> run_returned(c.agents.size(), false);

  for (size_t i = 0; i <= c.agents.size(); ++i) {
    runtime::Env& env = rt.add_node(i == 0 ? "store" : "agent" + std::to_string(i));
    rpc_agents.push_back(std::make_unique<rpc::RpcAgent>(env, registry));
    if (i == 0) {
      service = std::make_unique<store::StoreService>(*rpc_agents.back());
      const std::string state = rendezvous::state_key(settings.run_id);
      service->set_write_observer([&run, &rt, state](const std::string& key, const store::Versioned& now) {
        if (key != state) return;
        run.store_record["history"].push_back({{"t", (rt.now() - TimePoint{}).count()},
                                               {"v", now.version},
                                               {"s", now.version == 0 ? nlohmann::json(nullptr) : nlohmann::json(scenarios::to_hex(now.value))}});
        if (now.version == 0 || run.close_t) return;
        if (rendezvous::decode(now.value).closed) run.close_t = rt.now();
      });
    }
    rpc_agents.back()->start();
  }
  for (size_t i = 0; i < c.agents.size(); ++i) {
    const AgentPlan& plan = c.agents[i];
    const auto node = static_cast<WorkerId>(i + 1);
    runtime::Env& env = rt.env(node);
    clients.push_back(std::make_unique<store::StoreClient>(*rpc_agents[i + 1], 0));
    clients.back()->set_timeout(std::chrono::seconds(10));
    rendezvous::NodeDesc desc;
    desc.addr = env.name;
    desc.pid = env.incarnation;
    nlohmann::json& record_of = run.agent_records[i];
    record_of["events"] = nlohmann::json::array();
    record_of["writes"] = nlohmann::json::array();
    recorders.push_back(std::make_unique<scenarios::RecordingStore>(*clients.back(), rendezvous::state_key(settings.run_id), env.clock,
                                                                    record_of["writes"], [&rt] { return rt.now(); }));
    handlers.push_back(std::make_unique<rendezvous::RendezvousHandler>(env, *recorders.back(), settings, desc));
    const rendezvous::NodeDesc& named = handlers.back()->node();
    record_of["node"] = {named.addr, named.pid, named.local_id};
    elastic::ElasticAgentOptions options;
    options.max_restarts = plan.max_restarts;
    options.exit_barrier_timeout = c.exit_barrier_timeout;
    options.local_world_size = plan.local_world_size;
    options.master_endpoint = [name = env.name] { return std::make_pair(name, uint16_t{29500}); };
    // Local rank 0 follows the plan's k-th behaviour; the others succeed when it would end.
    std::vector<SimulatedWorker>* scripts = &run.agents[i].scripts;
    elastic::SimulatedWorkerScript script = [&plan, scripts](const elastic::WorkerGroupSpec&, uint32_t local_rank) {
      const size_t k = local_rank == 0 ? scripts->size() : scripts->size() - 1;
      const SimulatedWorker plain{.run_time = std::chrono::seconds(1)};
      const SimulatedWorker& b = k < plan.groups.size() ? plan.groups[k] : plain;
      if (local_rank == 0) scripts->push_back(b);
      if (local_rank == 0) return b;
      return SimulatedWorker{.start_delay = b.start_delay, .run_time = b.run_time};
    };
    agents.push_back(std::make_unique<elastic::ElasticAgent>(
        env, *handlers.back(), *clients.back(), settings.run_id, options,
        elastic::simulated_worker_group(env.clock, std::move(script), c.grace, {}, &run.agents[i].groups)));
    AgentRun& record = run.agents[i];
    agents.back()->set_listener([&rt, &record](const AgentEvent& e) { record.events.push_back({rt.now(), e}); });
    scopes.push_back(std::make_unique<runtime::CancelScope>("agent", env.spawner));
    runtime::CancelScope& scope = *scopes.back();
    elastic::ElasticAgent& agent = *agents.back();
    rendezvous::RendezvousHandler& handler = *handlers.back();
    store::Store& client = *clients.back();
    env.spawner.spawn("agent life", [&, i, node] {
      runtime::Env& e = rt.env(node);
      try {
        runtime::CancelScope::Enter in(scope);
        e.clock.sleep_until(TimePoint{} + c.agents[i].join_at);
      } catch (const Error& err) {
        if (err.code() != ErrorCode::cancelled || !scope.cancelled()) throw;
        record.end.emplace();
        record.end->left = true;
        record.end_t = rt.now();
        return;
      }
      elastic::AgentLifeOptions life_options;
      life_options.serves_store = c.agents[i].serves_store;
      elastic::AgentLife life(e, agent, handler, client, life_options);
      record.end = life.live(scope, [&] { run_returned[i] = true; });
      record.end_t = rt.now();
    });
    if (plan.sigterm_at) {
      env.spawner.spawn("SIGTERM", [&, i, node, at = *plan.sigterm_at] {
        rt.env(node).clock.sleep_until(TimePoint{} + at);
        if (run_returned[i] || record.end) return;  // too late to matter: the life is past its run
        record.sigterm_at = rt.now();
        scope.cancel();
      });
    }
  }

  // Node deaths, in time order, between stretches of the run.
  std::multimap<Duration, WorkerId> kills;
  if (c.store_kill_at) kills.emplace(*c.store_kill_at, 0);
  for (size_t i = 0; i < c.agents.size(); ++i) {
    if (c.agents[i].kill_at) kills.emplace(*c.agents[i].kill_at, static_cast<WorkerId>(i + 1));
  }
  std::string deadlock;
  const auto run_to = [&](TimePoint t) {
    if (rt.run(t) == fibers::LocalRuntime::Outcome::deadlock && deadlock.empty()) {
      deadlock = "deadlock at " + ms(rt.now()) + ":\n" + rt.stuck_report();
    }
  };
  for (const auto& [at, node] : kills) {
    run_to(TimePoint{} + at);
    if (!rt.is_alive(node)) continue;
    rt.kill(node);
    if (node == 0) {
      run.store_killed_at = rt.now();
    } else {
      run.agents[node - 1].killed_at = rt.now();
    }
  }
  run_to(run.horizon);
  for (AgentRun& a : run.agents) a.hung = !a.scripts.empty() && a.scripts.back().end == SimulatedWorker::End::hang;
  for (const fibers::FiberFailure& f : rt.failures()) run.fiber_failures += f.node + "/" + f.fiber + ": " + f.what + "\n";
  run.stuck = deadlock;
  // Every node dies and its fibers unwind before the objects they use go.
  for (WorkerId i = 0; i < rt.num_nodes(); ++i) {
    if (rt.is_alive(i)) rt.kill(i);
  }
  rt.run();
  scopes.clear();
  agents.clear();
  handlers.clear();
  recorders.clear();
  return run;
}

std::vector<std::string> judge_life(const LifeCase& c, const LifeRun& run) {
  std::vector<std::string> violations;
  {
    // The rendezvous itself, by the checker that judges real runs: every commit and every
    // compare-and-set (the agents' calls, S8 and S9, are the events' business here).
    scenarios::RendezvousHistory history;
    history.store.push_back(scenarios::read_store_life(scenarios::NodeRecord{0, 0, run.store_record}, "store"));
    for (size_t i = 0; i < run.agent_records.size(); ++i) {
      history.agents.push_back(scenarios::read_agent_life(
          scenarios::NodeRecord{static_cast<uint32_t>(i + 1), 0, run.agent_records[i]}, "agent " + std::to_string(i + 1)));
    }
    scenarios::RendezvousSpec spec;
    spec.settings.run_id = "job";
    spec.settings.min_nodes = c.min_nodes;
    spec.settings.max_nodes = c.max_nodes;
    spec.settings.timeout.join = c.join_timeout;
    spec.settings.timeout.last_call = c.last_call;
    spec.settings.keep_alive_interval = c.keep_alive_interval;
    for (const scenarios::Violation& v : scenarios::check_safety(spec, history, run.store_killed_at.has_value())) {
      violations.push_back("rendezvous invariant " + scenarios::to_string(v));
    }
  }
  const auto bad = [&](size_t i, const std::string& text) { violations.push_back("agent " + std::to_string(i + 1) + ": " + text); };
  if (!run.fiber_failures.empty()) violations.push_back("fibers failed: " + run.fiber_failures);
  const auto store_alive_at = [&](TimePoint t) { return !run.store_killed_at || *run.store_killed_at > t; };

  // The close rule, from the events alone: a close follows some agent's job end.
  std::optional<TimePoint> first_job_end;
  for (const AgentRun& a : run.agents) {
    for (const TimedEvent& e : a.events) {
      if (ends_job(e.event) && (!first_job_end || e.t < *first_job_end)) first_job_end = e.t;
    }
  }
  if (run.close_t && (!first_job_end || *first_job_end > *run.close_t)) {
    violations.push_back("the rendezvous was closed at " + ms(*run.close_t) +
                         " though no agent's job had ended (no group succeeded or failed with its restarts spent)");
  }

  for (size_t i = 0; i < run.agents.size(); ++i) {
    const AgentRun& a = run.agents[i];
    const bool killed_first = a.killed_at && (!a.end_t || *a.killed_at <= *a.end_t);
    // No hang: every life ends, unless its node died or its own workers hang (the job's hang, as
    // under torchrun; SIGTERM still ends it).
    if (!a.end && !killed_first && (a.sigterm_at || !a.hung)) {
      bad(i, "its life never ended (" + ms(run.horizon) + ")" + (run.stuck.empty() ? "" : "; " + run.stuck));
    }
    // An UNHEALTHY group is acted on at the next monitor tick (restarted, or the job fails), as a
    // FAILED one is: stopped within a monitor interval, plus the grace a worker that ignores
    // SIGTERM holds the stop for.
    const Duration act_within = elastic::ElasticAgentOptions{}.monitor_interval + c.grace + std::chrono::milliseconds(50);
    for (size_t g = 0; g < a.groups.size() && g < a.scripts.size(); ++g) {
      const SimulatedWorker& w = a.scripts[g];
      if (w.end != SimulatedWorker::End::unhealthy) continue;
      const TimePoint due = a.groups[g].started + w.start_delay + w.run_time + act_within;
      const TimePoint stopped = a.groups[g].stopped.value_or(run.horizon);
      // A SIGTERM or a death first: the group went with its agent (killed, not stopped).
      const bool died_first = (a.killed_at && *a.killed_at < due) || (a.sigterm_at && *a.sigterm_at < due);
      if (stopped > due && !died_first && due < run.horizon) {
        bad(i, "its group " + std::to_string(g) + " turned UNHEALTHY at " + ms(due - act_within) + " and ran on to " + ms(stopped));
      }
    }
    if (!a.end || killed_first) continue;
    if (a.sigterm_at) {
      if (!a.end->left) bad(i, "SIGTERM at " + ms(*a.sigterm_at) + " but it did not leave");
      if (a.end->closed_job) bad(i, "SIGTERM'd, yet it closed the job");
      continue;
    }
    if (!a.end->result) {
      bad(i, "its life ended without a result and without a SIGTERM");
      continue;
    }
    const elastic::AgentResult& r = *a.end->result;
    // The close rule, the other way: an agent whose job ended closes it before its life ends.
    const bool job_ended = std::any_of(a.events.begin(), a.events.end(), [](const TimedEvent& e) { return ends_job(e.event); });
    if (job_ended && store_alive_at(*a.end_t) && (!run.close_t || *run.close_t > *a.end_t)) {
      bad(i, "its job ended (" + std::string(elastic::outcome_name(r.outcome)) + ") but the rendezvous was not closed by the end of its life at " +
                 ms(*a.end_t));
    }
    // Restarts, as PyTorch counts them: one per failed group with restarts left.
    uint32_t counted = 0;
    bool spent = false;
    for (const TimedEvent& e : a.events) {
      if (e.event.kind != AgentEvent::Kind::group_failed) continue;
      if (e.event.remaining > 0) ++counted;
      spent = spent || e.event.remaining == 0;
    }
    if (r.restarts != counted) bad(i, "counted " + std::to_string(r.restarts) + " restarts; its events show " + std::to_string(counted));
    if (counted > c.agents[i].max_restarts) bad(i, "restarted " + std::to_string(counted) + " times past max_restarts");
    const bool failed_for_good = r.outcome == elastic::AgentOutcome::failed && r.error && r.error->code() == ErrorCode::worker_group_failed;
    if (spent != failed_for_good) {
      bad(i, std::string("outcome ") + elastic::outcome_name(r.outcome) + (r.error ? std::string(" (") + r.error->what() + ")" : "") +
                 (spent ? " after a group failed with no restart left" : " though no group failed with its restarts spent"));
    }
    // Nothing of its groups runs past its life: each was stopped.
    for (size_t g = 0; g < a.groups.size(); ++g) {
      if (!a.groups[g].stopped) bad(i, "its group " + std::to_string(g) + " was never stopped");
    }
    // It departed from its last round while the store lived.
    if (!a.groups.empty() && store_alive_at(*a.end_t) && a.end->departed < 1) bad(i, "did not depart from its last round");
  }
  return violations;
}

}  // namespace dagsim::conformance
