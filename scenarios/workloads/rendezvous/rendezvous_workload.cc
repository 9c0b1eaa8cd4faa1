// The rendezvous workload's node side, its [rendezvous] reader and its registry entry.
#include "scenarios/workloads/rendezvous/rendezvous_workload.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "core/base/assert.h"
#include "core/base/printable.h"
#include "core/rendezvous/rendezvous_backend.h"
#include "core/rendezvous/rendezvous_state.h"
#include "core/runtime/cancel_scope.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/workloads/rendezvous/rendezvous_history.h"
#include "scenarios/workloads/rendezvous/rendezvous_judge.h"

namespace dagsim::scenarios {

using runtime::Env;
using runtime::TimePoint;
using Kind = RendezvousAction::Kind;

RendezvousWorkload::RendezvousWorkload(const Scenario& scenario)
    : scenario_(scenario), spec_(scenario.workload.as<RendezvousSpec>()),
      registry_(rpc::FunctionRegistry::with_builtins()), lives_(scenario.cluster.nodes) {
  DAGSIM_ASSERT(spec_.store_node < scenario.cluster.nodes);
}

RendezvousWorkload::~RendezvousWorkload() { release_nodes(); }

void RendezvousWorkload::release_nodes() {
  // Handlers first (their keep-alive scopes), then what they use.
  for (std::deque<Life>& lives : lives_) {
    for (Life& life : lives) life.handler.reset();
  }
  for (std::deque<Life>& lives : lives_) lives.clear();
}

void RendezvousWorkload::node_main(NodeContext& node) {
  std::deque<Life>& lives = lives_[node.index()];
  lives.emplace_back();
  Life& life = lives.back();
  life.agent = std::make_unique<rpc::RpcAgent>(node.env(), registry_);
  if (node.index() == spec_.store_node) {
    run_store(node, life);
  } else {
    run_agent(node, life);
  }
}

namespace {

// The store node's answer to an agent of an etcd run: "host:port\nprefix".
constexpr rpc::MessageType kEtcdEndpointRequest = rpc::service_request(rpc::kStoreServices + 1);

}  // namespace

void RendezvousWorkload::serve_etcd(NodeContext& node, Life& life) {
  // The history is the agents' acknowledged writes (RecordingStore's record_values): etcd keeps
  // its own, which no node of the run sees.
  node.record()["history"] = nlohmann::json::array();
  const std::string endpoint = spec_.etcd_endpoint.empty() ? node.outside_world().start_etcd() : spec_.etcd_endpoint;
  // A prefix of this run's own, so that runs sharing an etcd never see each other's state.
  const std::string prefix = "/dagsim/" + spec_.settings.run_id + "/" + std::to_string(node.env().clock.wall_now().ns()) + "/";
  const std::string answer = endpoint + "\n" + prefix;
  life.agent->add_handler(kEtcdEndpointRequest, [answer](WorkerId, const rpc::Bytes&) {
    return rpc::Bytes(answer.begin(), answer.end());
  });
  life.agent->start();
  // The store restarts, in time order: each outage recorded, from the kill to etcd answering
  // again, so the judge treats it as a fault window (no liveness promise inside it) while every
  // acknowledged write must still be in the history (the data is kept: S1 stays exact).
  std::vector<RendezvousAction> restarts;
  for (const RendezvousAction& a : spec_.actions) {
    if (a.kind == RendezvousAction::Kind::store_restart) restarts.push_back(a);
  }
  if (restarts.empty()) return;
  std::stable_sort(restarts.begin(), restarts.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
  nlohmann::json& outages = node.record()["store_outages"] = nlohmann::json::array();
  node.spawn_foreground("store_restarts", [&node, &outages, restarts] {
    runtime::Clock& clock = node.env().clock;
    for (const RendezvousAction& a : restarts) {
      while (node.scenario_now() < TimePoint{a.at}) clock.sleep(TimePoint{a.at} - node.scenario_now());
      node.outside_world().kill_etcd();
      const TimePoint down = node.scenario_now();
      clock.sleep(a.down);
      node.outside_world().restart_etcd();
      outages.push_back({{"down", down.ns()}, {"up", node.scenario_now().ns()}});
    }
  });
}

std::unique_ptr<store::Store> RendezvousWorkload::connect_etcd(NodeContext& node, Life& life) {
  // Asks the store node until it answers (it may still be starting etcd), within the store timeout.
  const std::string what = "the etcd endpoint from " + scenario_.cluster.node_name(spec_.store_node);
  const runtime::TimePoint deadline = node.env().clock.now() + spec_.store_timeout;
  for (;;) {
    try {
      const rpc::Bytes reply =
          life.agent->request_bytes(spec_.store_node, kEtcdEndpointRequest, {}, spec_.store_timeout, what).get();
      const std::string text(reply.begin(), reply.end());
      const size_t newline = text.find('\n');
      if (newline == std::string::npos) throw errors::protocol_error(what + ": " + quote(text) + " is no endpoint and prefix");
      std::unique_ptr<store::Store> etcd = node.outside_world().connect_etcd(text.substr(0, newline), text.substr(newline + 1));
      etcd->set_timeout(spec_.store_timeout);
      return etcd;
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (e.code() == ErrorCode::invalid_argument || e.code() == ErrorCode::protocol_error ||
          node.env().clock.now() >= deadline) {
        throw;
      }
    }
    node.env().clock.sleep(std::chrono::milliseconds(100));
  }
}

void report_store_round(NodeContext& node, const store::Versioned& state) {
  if (state.version == 0 || !node.wants(WorkloadEvent::store_round)) return;
  try {
    const rendezvous::RendezvousState decoded = rendezvous::decode(state.value);
    node.report(WorkloadEvent::store_round, decoded.round);
  } catch (const Error&) {
    // Not a state this run's nodes wrote: the judge names it (S1); no round to report.
  }
}

void RendezvousWorkload::run_store(NodeContext& node, Life& life) {
  if (spec_.backend == RendezvousSpec::Backend::etcd) return serve_etcd(node, life);
  life.service = std::make_unique<store::StoreService>(*life.agent);
  // The store's own order of commits of the state key: the one history S1 judges.
  nlohmann::json& history = node.record()["history"] = nlohmann::json::array();
  const std::string key = rendezvous::state_key(spec_.settings.run_id);
  life.service->set_write_observer([&node, &history, key](const std::string& written, const store::Versioned& now) {
    if (written != key) return;
    report_store_round(node, now);
    history.push_back({{"t", node.scenario_now().ns()},
                       {"v", now.version},
                       {"s", now.version == 0 ? nlohmann::json(nullptr) : nlohmann::json(to_hex(now.value))}});
  });
  life.agent->start();
}

void RendezvousWorkload::run_agent(NodeContext& node, Life& life) {
  Env& env = node.env();
  nlohmann::json& record = node.record();
  rendezvous::NodeDesc desc;
  desc.addr = scenario_.cluster.node_name(node.index());
  desc.pid = node.incarnation();
  record["node"] = {desc.addr, desc.pid, desc.local_id};
  nlohmann::json& events = record["events"] = nlohmann::json::array();
  nlohmann::json& writes = record["writes"] = nlohmann::json::array();

  life.agent->start();
  const bool etcd = spec_.backend == RendezvousSpec::Backend::etcd;
  if (etcd) {
    try {
      life.client = connect_etcd(node, life);
    } catch (const Error& error) {
      runtime::rethrow_if_unwinding(error);
      events.push_back({{"op", "next_rendezvous"}, {"start", node.scenario_now().ns()}, {"t", node.scenario_now().ns()},
                        {"error", std::string(error_name(error.code()))}, {"message", error.what()}});
      return;  // as an agent whose first call failed
    }
  } else {
    life.client = std::make_unique<store::StoreClient>(*life.agent, spec_.store_node);
    life.client->set_timeout(spec_.store_timeout);
  }
  life.recording = std::make_unique<RecordingStore>(*life.client, rendezvous::state_key(spec_.settings.run_id), env.clock,
                                                    writes, [&node] { return node.scenario_now(); }, etcd);
  rendezvous::RendezvousHandlerOptions options;
  options.poll_interval = spec_.poll_interval;
  life.handler = std::make_unique<rendezvous::RendezvousHandler>(env, *life.recording, spec_.settings, desc, options);
  rendezvous::RendezvousHandler* handler = life.handler.get();

  node.spawn_foreground("agent", [this, &node, &env, &events, &life, handler] {
    const uint32_t me = node.index();
    const auto now = [&node] { return node.scenario_now(); };
    // Sleeps on the node's own clock until the scenario's time reaches `at` (a drifting clock
    // may wake a little early: the loop sleeps again for what is left).
    const auto sleep_until = [&](Duration at) {
      while (now() < TimePoint{at}) env.clock.sleep(TimePoint{at} - now());
    };
    const auto begin = [&](const char* op) -> size_t {
      events.push_back({{"op", op}, {"start", now().ns()}});
      return events.size() - 1;
    };
    // An agent whose call failed stops, as PyTorch's process exits: its handler goes with it, and
    // so does its keep-alive (a zombie heartbeat would hold its place in a full round for ever,
    // and spares wait on a full round without a deadline).
    const auto fail = [&](size_t e, const Error& error) {
      events[e]["t"] = now().ns();
      events[e]["error"] = std::string(error_name(error.code()));
      events[e]["message"] = error.what();
      life.handler.reset();
    };
    if (node.incarnation() == 0) {
      if (std::optional<Duration> at = spec_.action_time(me, Kind::join)) {
        // A late joiner connects to the store before its join, as torchrun's agent does (its
        // TCPStore client connects when made): the join then costs store round trips only, not
        // a connection's setup. Bounded by the join time; a store unreachable now is the join's
        // problem, reported by it.
        if (now() < TimePoint{*at}) {
          store::Store& client = *life.client;
          client.set_timeout(std::min(spec_.store_timeout, TimePoint{*at} - now()));
          try {
            client.num_keys();
          } catch (const Error& error) {
            runtime::rethrow_if_unwinding(error);
          }
          client.set_timeout(spec_.store_timeout);
        }
        sleep_until(*at);
      }
    }
    const std::optional<Duration> leave = spec_.action_time(me, Kind::leave);
    const Duration stop_at = std::min(spec_.duration, leave.value_or(spec_.duration));
    std::optional<Duration> close_at = spec_.action_time(me, Kind::close);
    const auto stop = [&] {
      const size_t e = begin(leave && *leave <= spec_.duration ? "leave" : "shutdown");
      const bool ok = handler->shutdown();
      events[e]["ok"] = ok;
      events[e]["t"] = now().ns();
    };
    for (;;) {
      if (now() >= TimePoint{stop_at}) return stop();
      size_t e = begin("next_rendezvous");
      try {
        const rendezvous::RendezvousInfo info = handler->next_rendezvous();
        events[e]["t"] = now().ns();
        events[e]["round"] = info.round;
        events[e]["rank"] = info.rank;
        events[e]["world"] = info.world_size;
        events[e]["version"] = handler->last_token();
        node.report(WorkloadEvent::member, info.round);
      } catch (const Error& error) {
        runtime::rethrow_if_unwinding(error);
        return fail(e, error);  // an agent whose rendezvous failed stops, as PyTorch's does
      }
      // Train until the end, a scheduled close or leave, or nodes waiting (then re-rendezvous).
      for (;;) {
        if (close_at && now() >= TimePoint{*close_at}) {
          close_at.reset();
          e = begin("set_closed");
          try {
            handler->set_closed();
            events[e]["t"] = now().ns();
          } catch (const Error& error) {
            runtime::rethrow_if_unwinding(error);
            return fail(e, error);
          }
          continue;
        }
        if (now() >= TimePoint{stop_at}) return stop();
        Duration next = TimePoint{stop_at} - now();
        if (close_at) next = std::min(next, TimePoint{*close_at} - now());
        env.clock.sleep(std::min(spec_.monitor_interval, next));
        if (now() >= TimePoint{stop_at} || (close_at && now() >= TimePoint{*close_at})) continue;
        e = begin("num_nodes_waiting");
        uint64_t waiting = 0;
        try {
          waiting = handler->num_nodes_waiting();
        } catch (const Error& error) {
          runtime::rethrow_if_unwinding(error);
          return fail(e, error);
        }
        if (waiting == 0) {
          events.erase(e);  // only the calls that restart the agent are kept (records stay small)
          continue;
        }
        events[e]["t"] = now().ns();
        events[e]["wall"] = env.clock.wall_now().ns();  // the sync's sanitize ran at or before it
        events[e]["waiting"] = waiting;
        events[e]["version"] = handler->last_token();
        break;
      }
    }
  });
}

// The [rendezvous] reader ------------------------------------------------------------------------

namespace {

constexpr std::string_view kKeys[] = {"rendezvous"};

constexpr std::string_view kTableKeys[] = {
    "store",          "run_id",           "min_nodes",           "max_nodes",          "nnodes",   "join_timeout_ms",
    "last_call_ms",   "close_timeout_ms", "heartbeat_timeout_ms", "keep_alive_interval_ms",
    "keep_alive_max_attempt", "rerendezvous_on_expiry", "poll_interval_ms", "store_timeout_ms",
    "monitor_interval_ms", "duration_ms", "backend", "etcd_endpoint", "actions"};
constexpr std::string_view kBackends[] = {"builtin", "etcd"};
// The shortest poll interval (0 aside: no polling): a node polling every nanosecond of virtual
// time makes billions of polls and the run never ends in wall time.
constexpr Duration kMinPollInterval = std::chrono::milliseconds(1);
constexpr std::string_view kActionKeys[] = {"at_ms", "node", "action", "down_ms"};
constexpr std::string_view kActionKinds[] = {"join", "leave", "close", "store_restart"};

// The keys an elastic job's rendezvous table takes: no job end (training ends it), no close action
// (the agents close it when the job ends), and the built-in store only.
constexpr std::string_view kElasticTableKeys[] = {
    "store",          "run_id",           "min_nodes",           "max_nodes",          "nnodes",   "join_timeout_ms",
    "last_call_ms",   "close_timeout_ms", "heartbeat_timeout_ms", "keep_alive_interval_ms",
    "keep_alive_max_attempt", "rerendezvous_on_expiry", "poll_interval_ms", "store_timeout_ms", "actions"};
constexpr std::string_view kElasticActionKinds[] = {"join", "leave"};
const KeySetRegistration kTableKeysListed{{"[rendezvous]", "", "", kTableKeys}};
const KeySetRegistration kActionKeysListed{{"[rendezvous]", "[[rendezvous.actions]]", "", kActionKeys}};
const KeySetRegistration kElasticTableKeysListed{{"[rendezvous]", "elastic.rendezvous", "", kElasticTableKeys}};

}  // namespace

namespace {

// torchrun's --nnodes: "MIN:MAX" or "N" (a string), or N (an integer). Each in [1, the most].
std::pair<uint32_t, uint32_t> read_nnodes(const detail::TomlReader& reader, const toml::node& node, const std::string& path) {
  const auto most = static_cast<int64_t>(rendezvous::kMaxRendezvousNodes);
  if (node.is_integer()) {
    const auto n = static_cast<uint32_t>(reader.integer(node, path, 1, most));
    return {n, n};
  }
  const std::string text = reader.string(node, path);
  auto number = [&](std::string_view part) -> uint32_t {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || value < 1 || value > most) {
      reader.fail(node, path, quote(text) + ": expected \"MIN:MAX\" or \"N\", as torchrun's --nnodes, each in [1, " +
                                  std::to_string(most) + "]");
    }
    return static_cast<uint32_t>(value);
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    const uint32_t n = number(text);
    return {n, n};
  }
  const uint32_t min_nodes = number(std::string_view(text).substr(0, colon));
  const uint32_t max_nodes = number(std::string_view(text).substr(colon + 1));
  if (max_nodes < min_nodes) reader.fail(node, path, quote(text) + ": MAX is below MIN");
  return {min_nodes, max_nodes};
}

}  // namespace

RendezvousSpec read_rendezvous_table(const detail::TomlReader& reader, const toml::node& node, const std::string& path,
                                     const Scenario& scenario, RendezvousTableUse use) {
  const bool elastic = use == RendezvousTableUse::elastic;
  const detail::Table t{reader.table(node, path), path};
  reader.check_keys(t, elastic ? detail::Names(kElasticTableKeys) : detail::Names(kTableKeys), "keys in [" + path + "]");
  RendezvousSpec spec;
  spec.store_node = reader.opt_node_ref(t, "store").value_or(0);
  if (const toml::node* backend = t.get("backend")) {
    spec.backend = static_cast<RendezvousSpec::Backend>(reader.choice(*backend, t.key_path("backend"), kBackends));
  }
  if (const toml::node* endpoint = t.get("etcd_endpoint")) {
    if (spec.backend != RendezvousSpec::Backend::etcd) {
      reader.fail(*endpoint, t.key_path("etcd_endpoint"), "applies only with backend = \"etcd\"");
    }
    spec.etcd_endpoint = reader.string(*endpoint, t.key_path("etcd_endpoint"));
    const size_t colon = spec.etcd_endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == spec.etcd_endpoint.size() ||
        spec.etcd_endpoint.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      reader.fail(*endpoint, t.key_path("etcd_endpoint"), quote(spec.etcd_endpoint) + " is not host:port");
    }
    // Digits only (checked above); at most 5 of them before the value is read, so no overflow.
    const std::string port = spec.etcd_endpoint.substr(colon + 1);
    if (port.size() > 5 || std::stoi(port) < 1 || std::stoi(port) > 65535) {
      reader.fail(*endpoint, t.key_path("etcd_endpoint"),
                  quote(spec.etcd_endpoint) + ": port " + printable(port, 20) + " is outside 1..65535");
    }
  }
  rendezvous::RendezvousSettings& s = spec.settings;
  s.run_id = scenario.name.empty() ? "run" : scenario.name;
  if (const toml::node* run_id = t.get("run_id")) {
    // Checked here, at the key's line: the state key (torch.rendezvous.<run_id>) travels in every
    // store request, and etcd and TCPStore clients bound their keys.
    s.run_id = reader.string(*run_id, t.key_path("run_id"));
    if (s.run_id.empty()) reader.fail(*run_id, t.key_path("run_id"), "must not be empty");
    if (s.run_id.size() > rendezvous::kMaxRunIdBytes) {
      reader.fail(*run_id, t.key_path("run_id"),
                  std::to_string(s.run_id.size()) + " bytes, more than the " + std::to_string(rendezvous::kMaxRunIdBytes) +
                      " a run id may have");
    }
  }
  const int64_t participants = int64_t{scenario.cluster.nodes} - 1;
  if (const toml::node* nnodes = t.get("nnodes")) {
    // torchrun's --nnodes, as it writes it: "MIN:MAX", "N", or N.
    for (std::string_view key : {"min_nodes", "max_nodes"}) {
      if (t.get(key) != nullptr) reader.fail(*nnodes, t.key_path("nnodes"), "give nnodes or " + std::string(key) + ", not both");
    }
    const auto [min_nodes, max_nodes] = read_nnodes(reader, *nnodes, t.key_path("nnodes"));
    s.min_nodes = min_nodes;
    s.max_nodes = max_nodes;
  } else {
    s.min_nodes = static_cast<uint32_t>(reader.integer(
        reader.required(t, "min_nodes", " (or nnodes = \"MIN:MAX\", as torchrun's --nnodes)"), t.key_path("min_nodes"), 1,
        rendezvous::kMaxRendezvousNodes));
    s.max_nodes = static_cast<uint32_t>(
        reader.opt_integer(t, "max_nodes", 1, rendezvous::kMaxRendezvousNodes).value_or(s.min_nodes));
  }
  s.timeout.join = reader.opt_duration(t, "join_timeout_ms", detail::kPositiveMs).value_or(s.timeout.join);
  s.timeout.last_call = reader.opt_duration(t, "last_call_ms", detail::kPositiveMs).value_or(s.timeout.last_call);
  s.timeout.close = reader.opt_duration(t, "close_timeout_ms", detail::kPositiveMs).value_or(s.timeout.close);
  s.timeout.heartbeat = reader.opt_duration(t, "heartbeat_timeout_ms", detail::kPositiveMs).value_or(s.timeout.heartbeat);
  s.keep_alive_interval =
      reader.opt_duration(t, "keep_alive_interval_ms", detail::kPositiveMs).value_or(s.keep_alive_interval);
  s.keep_alive_max_attempt =
      static_cast<uint32_t>(reader.opt_integer(t, "keep_alive_max_attempt", 1, 1000).value_or(s.keep_alive_max_attempt));
  s.rerendezvous_on_expiry = reader.opt_boolean(t, "rerendezvous_on_expiry").value_or(s.rerendezvous_on_expiry);
  spec.poll_interval = reader.opt_duration(t, "poll_interval_ms", detail::kNonNegativeMs).value_or(spec.poll_interval);
  if (spec.poll_interval > Duration::zero() && spec.poll_interval < kMinPollInterval) {
    // A node polling every nanosecond of virtual time would never let the run end.
    reader.fail(*t.get("poll_interval_ms"), t.key_path("poll_interval_ms"),
                rendezvous::describe(spec.poll_interval) + " is below the 1 ms a poll interval may be (0: no polling)");
  }
  spec.store_timeout = reader.opt_duration(t, "store_timeout_ms", detail::kPositiveMs).value_or(spec.store_timeout);
  spec.monitor_interval =
      reader.opt_duration(t, "monitor_interval_ms", detail::kPositiveMs).value_or(spec.monitor_interval);
  spec.duration = reader.opt_duration(t, "duration_ms", detail::kPositiveMs).value_or(spec.duration);
  if (s.max_nodes < s.min_nodes) {
    reader.fail(t.line(), t.key_path("max_nodes"), std::to_string(s.max_nodes) + " is below min_nodes (" + std::to_string(s.min_nodes) + ")");
  }
  try {
    rendezvous::validate(s);
  } catch (const Error& e) {
    reader.fail(t.line(), path, e.detail());
  }
  // A joiner renews its heartbeat only when its op runs, once per poll, and only once it is
  // keep_alive_interval old: so up to interval + poll old, and another node's clock may read it
  // older by the clocks' skew. Past the expiry, healthy waiting nodes would be found dead between
  // two of their own polls (the property test found rounds that never took their waiters in).
  const Duration oldest = spec.poll_interval + s.keep_alive_interval + scenario.cluster.clock_skew_max;
  if (spec.poll_interval > Duration::zero() && oldest >= s.expiry()) {
    reader.fail(t.line(), t.key_path("poll_interval_ms"),
                rendezvous::describe(spec.poll_interval) + " leaves a polling node's heartbeat up to " +
                    rendezvous::describe(oldest) + " old (poll_interval_ms + keep_alive_interval_ms + cluster.clock_skew_max_ms), "
                    "not below the expiry (keep_alive_interval_ms x keep_alive_max_attempt = " + rendezvous::describe(s.expiry()) +
                    "): waiting nodes would expire between polls");
  }
  if (s.min_nodes > participants) {
    reader.fail(t.line(), t.get("nnodes") != nullptr ? t.key_path("nnodes") : t.key_path("min_nodes"),
                std::to_string(s.min_nodes) + " participants can never join: the cluster has " +
                    std::to_string(participants) + " besides the store node, which takes a node of its own; write [cluster] nodes = " +
                    std::to_string(s.min_nodes + 1) + " (or more) for " + std::to_string(s.min_nodes) + " agents");
  }
  if (s.max_nodes > participants) {
    // Valid (rounds form at last call with fewer), but torchrun's --nnodes counts agents and a
    // cluster's nodes count the store's too: "nnodes = 4:6" beside "nodes = 6" meant 6 agents.
    const toml::node* nnodes = t.get("nnodes");
    const std::string key = nnodes != nullptr ? "nnodes" : "max_nodes";
    const std::string written = nnodes != nullptr ? "nnodes = " + quote(nnodes->is_string() ? nnodes->as_string()->get()
                                                                                              : std::to_string(s.max_nodes))
                                                  : "max_nodes = " + std::to_string(s.max_nodes);
    reader.warn(t.line(), t.key_path(key),
                "[cluster] nodes = " + std::to_string(scenario.cluster.nodes) + " leaves " + std::to_string(participants) +
                    " agent" + (participants == 1 ? "" : "s") + " (one node hosts the store), so a round never reaches max_nodes = " +
                    std::to_string(s.max_nodes) + "; for " + written + " write [cluster] nodes = " +
                    std::to_string(s.max_nodes + 1));
  }
  if (const toml::node* actions = t.get("actions")) {
    const std::vector<const toml::table*> tables = reader.tables(*actions, t.key_path("actions"));
    for (size_t i = 0; i < tables.size(); ++i) {
      const detail::Table a{*tables[i], path + ".actions[" + std::to_string(i) + "]"};
      reader.check_keys(a, kActionKeys, "keys in [[" + path + ".actions]]");
      RendezvousAction action;
      action.kind = static_cast<RendezvousAction::Kind>(reader.choice(
          reader.required(a, "action"), a.key_path("action"), elastic ? detail::Names(kElasticActionKinds) : detail::Names(kActionKinds)));
      action.at = reader.duration(reader.required(a, "at_ms"), a.key_path("at_ms"), detail::kNonNegativeMs);
      action.node = reader.node_ref(reader.required(a, "node"), a.key_path("node"));
      action.line = a.line();
      const bool store_restart = action.kind == RendezvousAction::Kind::store_restart;
      if (store_restart) {
        // Only an etcd this run started is ours to restart; the built-in store's restart is the
        // store node's own (a [[faults]] restart), which loses its keys by design.
        if (spec.backend != RendezvousSpec::Backend::etcd || !spec.etcd_endpoint.empty()) {
          reader.fail(a.line(), a.key_path("action"), "store_restart needs backend = \"etcd\" without etcd_endpoint (the etcd the store node starts)");
        }
        if (action.node != spec.store_node) {
          reader.fail(a.line(), a.key_path("node"), "store_restart is the store node's (" + scenario.cluster.node_name(spec.store_node) + ")");
        }
        if (const toml::node* down = a.get("down_ms")) action.down = reader.duration(*down, a.key_path("down_ms"), detail::kPositiveMs);
      } else {
        if (a.get("down_ms") != nullptr) reader.fail(a.line(), a.key_path("down_ms"), "applies only to action = \"store_restart\"");
        if (action.node == spec.store_node) reader.fail(a.line(), a.key_path("node"), "the store node takes no rendezvous actions");
      }
      if (!store_restart && spec.action_time(action.node, action.kind)) {
        reader.fail(a.line(), a.key_path("action"), "a second \"" + std::string(kActionKinds[static_cast<size_t>(action.kind)]) +
                                             "\" for " + scenario.cluster.node_name(action.node));
      }
      spec.actions.push_back(action);
    }
  }
  return spec;
}

namespace {

void read(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) {
  scenario.workload =
      WorkloadSpec("rendezvous", read_rendezvous_table(reader, *top.get("rendezvous"), "rendezvous", scenario, RendezvousTableUse::rendezvous));
}

std::string summary(const Scenario& scenario) {
  const RendezvousSpec& spec = scenario.workload.as<RendezvousSpec>();
  return "rendezvous (" + std::to_string(spec.settings.min_nodes) + ".." + std::to_string(spec.settings.max_nodes) +
         " of " + std::to_string(scenario.cluster.nodes - 1) + " nodes)";
}

std::unique_ptr<Workload> make(const Scenario& scenario, uint64_t) {
  return std::make_unique<RendezvousWorkload>(scenario);
}

std::unique_ptr<Judge> make_judge(const Scenario& scenario, const RunRecords& records) {
  return std::make_unique<RendezvousJudge>(scenario, records);
}

// The store node takes no part in the rendezvous, so it is never a member; an etcd backend's
// rounds are not seen (only the built-in store reports the states it takes).
std::string impossible_trigger(const Scenario& scenario, const FaultTrigger& trigger) {
  const RendezvousSpec& spec = scenario.workload.as<RendezvousSpec>();
  if (trigger.node && !spec.is_participant(*trigger.node)) {
    return scenario.cluster.node_name(*trigger.node) + " hosts the store and takes no part in the rendezvous, so it is never a member";
  }
  if (trigger.event == WorkloadEvent::store_round && spec.backend == RendezvousSpec::Backend::etcd) {
    return "with backend = \"etcd\" the rounds are etcd's, which no node reports (store_round is the built-in store's)";
  }
  return "";
}

constexpr CheckKind kChecks[] = {
    {"invariants", false, false, false, &judge_by<RendezvousJudge, &RendezvousJudge::invariants>},
    {"formed", true, false, false, &judge_by<RendezvousJudge, &RendezvousJudge::formed>},
    {"expect_error", true, false, true, &judge_by<RendezvousJudge, &RendezvousJudge::expect_error>},
};

}  // namespace

// The built-in store's rounds (an etcd backend's are not seen) and each completed rendezvous.
constexpr WorkloadEvent kEvents[] = {WorkloadEvent::member, WorkloadEvent::store_round};

const WorkloadType kRendezvousWorkload = {
    .name = "rendezvous",
    .keys = kKeys,
    .required = kKeys,
    .shown = "[rendezvous]",
    .to_add = "a [rendezvous] table",
    .read = &read,
    .summary = &summary,
    .make = &make,
    .make_judge = &make_judge,
    .checks = kChecks,
    .events = kEvents,
    .impossible_trigger = &impossible_trigger,
};

}  // namespace dagsim::scenarios
