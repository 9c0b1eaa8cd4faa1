// See rendezvous_formation.h.
#include "bench/rendezvous_formation.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "core/base/error.h"
#include "core/base/prng.h"
#include "core/rendezvous/rendezvous_backend.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/rendezvous/rendezvous_state.h"
#include "core/rpc/rpc_agent.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"
#include "sim/sim_world.h"

namespace dagsim::bench {

namespace {

using namespace std::chrono_literals;
using runtime::Duration;
using runtime::TimePoint;
using Wall = std::chrono::steady_clock;

double seconds_since(Wall::time_point start) { return std::chrono::duration<double>(Wall::now() - start).count(); }

// The simulated cluster. Its destructor shuts the world down first, so every fiber blocked in a
// handler, client or agent unwinds while they still exist; they then go in reverse order.
struct FormationWorld {
  explicit FormationWorld(const FormationSpec& spec) : world(options(spec)) {
    registry = rpc::FunctionRegistry::with_builtins();
    rendezvous::RendezvousSettings settings;
    settings.run_id = "bench";
    settings.min_nodes = spec.nodes;
    settings.max_nodes = spec.nodes;
    settings.keep_alive_interval = spec.keep_alive_interval;
    rendezvous::RendezvousHandlerOptions handler_options;
    handler_options.poll_interval = spec.poll_interval;
    for (uint32_t i = 0; i <= spec.nodes; ++i) {
      const auto id = static_cast<WorkerId>(i);
      world.add_node(i == 0 ? "store" : "worker" + std::to_string(i));
      world.start(id);
      runtime::Env& env = world.env(id);
      agents.push_back(std::make_unique<rpc::RpcAgent>(env, registry));
      if (i == 0) service = std::make_unique<store::StoreService>(*agents.back());
      agents.back()->start();
      if (i == 0) continue;
      clients.push_back(std::make_unique<store::StoreClient>(*agents.back(), 0));
      clients.back()->set_timeout(60s);
      counted.push_back(std::make_unique<CountingStore>(*clients.back(), counts));
      rendezvous::NodeDesc node;
      node.addr = env.name;
      node.pid = env.incarnation;
      nodes.push_back(node);
      handlers.push_back(
          std::make_unique<rendezvous::RendezvousHandler>(env, *counted.back(), settings, node, handler_options));
    }
  }
  ~FormationWorld() { world.shutdown(); }
  FormationWorld(const FormationWorld&) = delete;
  FormationWorld& operator=(const FormationWorld&) = delete;

  static sim::SimOptions options(const FormationSpec& spec) {
    sim::SimOptions o;
    o.seed = spec.seed;
    o.network.latency = runtime::LatencyModel::uniform(spec.latency_min, spec.latency_max);
    return o;
  }

  sim::SimWorld world;  // first: destroyed last
  rpc::FunctionRegistry registry;
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents;
  std::unique_ptr<store::StoreService> service;
  std::vector<std::unique_ptr<store::StoreClient>> clients;
  StoreCounts counts;
  std::vector<std::unique_ptr<CountingStore>> counted;
  std::vector<std::unique_ptr<rendezvous::RendezvousHandler>> handlers;  // handlers[i - 1] is node i
  std::vector<rendezvous::NodeDesc> nodes;                              // nodes[i - 1] is node i's
};

// What one node's call gave.
struct Joined {
  TimePoint done = TimePoint::max();
  std::optional<rendezvous::RendezvousInfo> info;
  std::string error;
};

// The join instants: all at 0, or uniform in [0, 1 s) from the seed (its own stream, so the
// network's draws do not move them).
std::vector<TimePoint> join_times(const FormationSpec& spec) {
  std::vector<TimePoint> at(spec.nodes, TimePoint{});
  if (!spec.spread_joins) return at;
  Prng rng = Prng(spec.seed).fork(0x6a6f696e);  // "join"
  const auto second = static_cast<uint64_t>(Duration{1s}.count());
  for (TimePoint& t : at) t = TimePoint{Duration{static_cast<int64_t>(rng.uniform_u64(second))}};
  return at;
}

// Every node returned, with ranks 0..N-1 once each, world size N and round 0.
std::string check(const std::vector<Joined>& joined, uint32_t n) {
  std::vector<bool> seen(n, false);
  for (size_t i = 0; i < joined.size(); ++i) {
    const Joined& j = joined[i];
    const std::string who = "worker" + std::to_string(i + 1);
    if (!j.info) return who + " did not form the round: " + (j.error.empty() ? "it never returned" : j.error);
    if (j.info->world_size != n || j.info->round != 0 || j.info->rank >= n) {
      return who + " got rank " + std::to_string(j.info->rank) + " of " + std::to_string(j.info->world_size) +
             " in round " + std::to_string(j.info->round);
    }
    if (seen[j.info->rank]) return "rank " + std::to_string(j.info->rank) + " was given twice";
    seen[j.info->rank] = true;
  }
  return {};
}

// S1 over every write the nodes made: sorted by the version written, each names the version of
// the write before it (the first names 0, no state yet), and the last is the version read at the end.
std::string check_commits(std::vector<std::pair<uint64_t, uint64_t>> commits, uint64_t final_version) {
  std::ranges::sort(commits, {}, &std::pair<uint64_t, uint64_t>::second);
  uint64_t previous = 0;
  for (const auto& [named, wrote] : commits) {
    if (named != previous || wrote <= named) {
      return "S1: a write named version " + std::to_string(named) + " and wrote " + std::to_string(wrote) +
             " where the write before it left " + std::to_string(previous);
    }
    previous = wrote;
  }
  if (previous != final_version) {
    return "S1: the store holds version " + std::to_string(final_version) + ", the last write the nodes made " +
           std::to_string(previous);
  }
  return {};
}

// The committed state at the end against what every node returned: one round (0) formed and
// complete, nothing else pending (no deadline, not closed, no re-rendezvous request), the lists
// structurally sound (S5), exactly the N nodes participate with no node also waiting or spare,
// ranks 0..N-1 in node order (S2), and each node's returned rank and world are the state's.
std::string check_state(const rendezvous::RendezvousState& state, const std::vector<rendezvous::NodeDesc>& nodes,
                        const std::vector<Joined>& joined) {
  const auto n = static_cast<uint32_t>(nodes.size());
  if (std::optional<std::string> why = rendezvous::structural_violation(state)) return "S5: " + *why;
  if (state.round != 0 || !state.complete || state.closed || state.deadline || state.rerendezvous_requested ||
      state.world_size != n) {
    return "the final state is not round 0 complete with world " + std::to_string(n) + ": round " +
           std::to_string(state.round) + (state.complete ? " complete" : " incomplete") +
           (state.closed ? " closed" : "") + " world " + std::to_string(state.world_size);
  }
  if (state.participants.size() != n || !state.wait_list.empty() || !state.redundancy_list.empty() ||
      state.last_heartbeats.size() != n) {
    return "the final state holds " + std::to_string(state.participants.size()) + " participants, " +
           std::to_string(state.wait_list.size()) + " waiting, " + std::to_string(state.redundancy_list.size()) +
           " spare and " + std::to_string(state.last_heartbeats.size()) + " heartbeats for " + std::to_string(n) +
           " nodes";
  }
  uint32_t expected_rank = 0;
  for (const auto& [node, rank] : state.participants) {
    if (rank != expected_rank++) {
      return "S2: node " + rendezvous::to_string(node) + " has rank " + std::to_string(rank) + ", not " +
             std::to_string(expected_rank - 1) + " (node order)";
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    const auto it = state.participants.find(nodes[i]);
    if (it == state.participants.end()) return "node " + rendezvous::to_string(nodes[i]) + " is not a participant";
    if (it->second != joined[i].info->rank) {
      return "node " + rendezvous::to_string(nodes[i]) + " returned rank " + std::to_string(joined[i].info->rank) +
             ", the state gives it " + std::to_string(it->second);
    }
  }
  return {};
}

}  // namespace

FormationResult run_formation(const FormationSpec& spec) {
  FormationResult result;
  const std::vector<TimePoint> joins = join_times(spec);
  std::vector<Joined> joined(spec.nodes);
  // The last node to return reads the committed state once, past the round time, for the checks.
  uint32_t returned = 0;
  std::optional<store::Versioned> final_state;

  const auto build_start = Wall::now();
  auto w = std::make_unique<FormationWorld>(spec);
  sim::SimWorld& world = w->world;
  for (uint32_t i = 1; i <= spec.nodes; ++i) {
    rendezvous::RendezvousHandler& handler = *w->handlers[i - 1];
    runtime::Env& env = world.env(static_cast<WorkerId>(i));
    world.spawn_foreground(static_cast<WorkerId>(i), "next_rendezvous", [&, i, when = joins[i - 1]] {
      Joined& me = joined[i - 1];
      env.clock.sleep_until(when);
      try {
        me.info = handler.next_rendezvous();
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        me.error = e.what();
      }
      me.done = world.now();
      if (++returned == spec.nodes) {
        try {
          final_state = w->clients[i - 1]->get_versioned(rendezvous::state_key("bench"));
        } catch (const Error& e) {
          runtime::rethrow_if_unwinding(e);
          me.error = std::string("reading the final state: ") + e.what();
        }
      }
    });
  }
  result.build_wall_s = seconds_since(build_start);

  const auto run_start = Wall::now();
  sim::RunLimits limits;
  limits.max_virtual_time = TimePoint{std::chrono::seconds(600)};
  const sim::SimWorld::Outcome outcome = world.run(limits);
  result.run_wall_s = seconds_since(run_start);

  result.last_join = std::max_element(joins.begin(), joins.end())->since_epoch;
  TimePoint last_done{};
  for (const Joined& j : joined) last_done = std::max(last_done, j.done);
  result.last_done = last_done.since_epoch;
  result.trace_hash = world.trace().hash();
  result.store = w->counts;
  for (const auto& c : w->clients) {
    result.wire_reply_bytes += c->value_bytes_received();
    result.cas_value_bytes += c->cas_value_bytes();
    result.request_value_bytes += c->value_bytes_sent();
  }
  result.deltas_sent = w->service->deltas_sent();
  for (const auto& h : w->handlers) {
    result.decodes += h->backend().decodes();
    result.actions_applied += h->executor().actions_applied();
    result.sync_waits += h->executor().sync_waits();
  }
  if (outcome != sim::SimWorld::Outcome::finished) {
    result.error = "the world did not finish: " + world.stuck_report();
  } else if (!world.failures().empty()) {
    result.error = "a fiber failed: " + world.failures().front().what;
  } else {
    result.error = check(joined, spec.nodes);
  }
  if (result.error.empty() && !final_state) result.error = "nobody read the final state";
  if (result.error.empty()) {
    try {
      const rendezvous::RendezvousState state = rendezvous::decode(final_state->value);
      result.error = check_state(state, w->nodes, joined);
      if (result.error.empty()) result.error = check_commits(w->counts.commits, final_state->version);
    } catch (const Error& e) {
      result.error = std::string("the final state does not decode: ") + e.what();
    }
  }
  result.invariants_checked = result.error.empty();

  const auto teardown_start = Wall::now();
  w.reset();
  result.teardown_wall_s = seconds_since(teardown_start);
  return result;
}

}  // namespace dagsim::bench
