// `dagsim launch`: torchrun's interface on dagsim's elastic agent. One agent per host: it joins
// the rendezvous (c10d on a TCPStore server it hosts or reaches, or etcd), runs the job's worker
// processes with torchrun's environment (net/process_worker_group.h), restarts them as torchrun
// does, and leaves. What the agent does is core/elastic/elastic_agent.h, the same code the
// simulator proves with simulated worker processes.
//
// What an operator sees: one line on standard error per agent event, `--events FILE` for the same
// as JSON lines, per-rank logs and error files under the log folder (its path is printed first).
// Exit: 0 the job succeeded; 1 it failed (workers failed with max_restarts spent, the rendezvous
// timed out, closed or its store was unreachable); 2 bad usage; 128+N stopped by signal N
// (SIGTERM, SIGINT, SIGHUP): the workers get SIGTERM, then SIGKILL after --stop-grace, and the
// agent leaves the rendezvous without closing it, as torchrun's does, so the others re-form.
#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/base/printable.h"
#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/runtime/cancel_scope.h"
#include "net/process_worker_group.h"
#include "net/rdzv/host_names.h"
#include "net/rdzv/rendezvous_registry.h"
#include "net/tcpstore/store_host.h"
#include "scenarios/cli/commands.h"
#include "scenarios/launch/launch_plan.h"

extern char** environ;

namespace dagsim::cli {

namespace {

volatile std::sig_atomic_t stop_signal = 0;
extern "C" void request_launch_stop(int sig) { stop_signal = sig; }

// A port nothing listens on now (torchrun's _get_socket_with_port: bind port 0, read, close).
uint16_t free_port() {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::acceptor probe(io, asio::ip::tcp::endpoint(asio::ip::tcp::v4(), 0));
  return probe.local_endpoint().port();
}

std::string temporary_log_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/torchelastic_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw errors::invalid_argument("cannot make a log folder in " + pattern);
  return pattern;
}

std::string describe(const elastic::AgentEvent& e) {
  std::string line = "round " + std::to_string(e.info.round) + ": " + elastic::event_name(e.kind);
  if (e.kind == elastic::AgentEvent::Kind::group_started) {
    line += " as group rank " + std::to_string(e.info.rank) + " of " + std::to_string(e.info.world_size);
  }
  if (e.kind == elastic::AgentEvent::Kind::nodes_waiting) line += " (" + std::to_string(e.waiting) + " waiting)";
  if (e.kind == elastic::AgentEvent::Kind::group_failed) line += " (" + counted(e.remaining, "restart") + " left)";
  if (!e.detail.empty()) line += ": " + e.detail;
  return line;
}

// An agent that serves the store outlives its job's use of it: the others may still be reading
// the exit barrier, closing or leaving when it is done, and a store gone under them costs each a
// timeout per call (minutes, where torchrun's agents log errors). Every agent counts itself out of
// its last round; the one that serves the store waits (at most kLingerForOthers) until all of
// that round have.
constexpr runtime::Duration kLingerForOthers = std::chrono::seconds(60);

void depart(runtime::Clock& clock, store::Store& store, const elastic::ElasticAgent& agent, bool serving) {
  if (!agent.group_spec()) return;  // never in a round
  const rendezvous::RendezvousInfo& info = agent.group_spec()->info;
  const std::string key = "torchelastic/agent/" + agent.group_spec()->round.run_id + "/round/" + std::to_string(info.round) + "/departed";
  store.set_timeout(std::chrono::seconds(5));  // its last use: a store already gone costs little
  try {
    int64_t departed = store.add(key, 1);
    const runtime::TimePoint until = clock.now() + kLingerForOthers;
    while (serving && departed < static_cast<int64_t>(info.world_size) && clock.now() < until) {
      clock.sleep(std::chrono::milliseconds(50));
      departed = store.add(key, 0);
    }
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);  // a store already gone: nothing to wait for
  }
}

}  // namespace

int launch_command(const LaunchArgs& args) {
  namespace asio = boost::asio;
  using asio::ip::tcp;
  launch::LaunchPlan plan;
  std::string run_log_dir;
  try {
    plan = launch::plan_launch(args, std::max(1u, std::thread::hardware_concurrency()));
    run_log_dir = net::make_run_log_dir(plan.log_dir.empty() ? temporary_log_dir() : plan.log_dir, plan.settings.run_id);
  } catch (const Error& e) {
    std::cerr << "dagsim launch: " << e.what() << "\n";
    return kBadInput;
  }
  for (const std::string& warning : plan.warnings) std::cerr << "dagsim launch: warning: " << warning << "\n";
  std::ofstream events;
  if (!args.events_path.empty()) {
    events.open(args.events_path, std::ios::app);
    if (!events) {
      std::cerr << "dagsim launch: cannot write the events to " << quote(args.events_path) << "\n";
      return kBadInput;
    }
  }
  const std::string self = net::machine_fqdn();
  std::cerr << "dagsim launch: run " << plan.settings.run_id << ", " << plan.agent.local_world_size
            << " worker(s) here, logs in " << run_log_dir << "\n";

  net::tcpstore::StoreHost host("launch");
  const rendezvous::NodeDesc node = net::NodeDescGenerator().generate();
  const net::RendezvousContext context{&host, node, [](const std::string& line) { std::cerr << "dagsim launch: " << line << "\n"; }};
  std::unique_ptr<net::Rendezvous> rdzv;
  try {
    rdzv = host.run([&] { return net::default_rendezvous_registry().create_handler(*plan.params, context); });
  } catch (const Error& e) {
    std::cerr << "dagsim launch: " << e.what() << "\n";
    return e.code() == ErrorCode::invalid_argument ? kBadInput : kCheckFailed;
  }
  rendezvous::RendezvousHandler& handler = rdzv->handler();
  store::Store& store = rdzv->store();
  net::ProcessWorkerConfig config;
  config.argv = plan.argv;
  config.agent_env = elastic::launcher_environment(elastic::environment_of(environ), plan.agent.local_world_size);
  config.run_log_dir = run_log_dir;
  config.redirects = plan.redirects;
  config.tee = plan.tee;
  config.grace = plan.grace;
  config.orphans = std::make_shared<std::vector<std::unique_ptr<net::WorkerProcesses>>>();
  plan.agent.master_endpoint = [self] { return std::make_pair(self, free_port()); };
  elastic::ElasticAgent agent(host.env(), handler, store, plan.settings.run_id, plan.agent,
                              net::process_worker_group(host.clock(), config));
  const runtime::TimePoint started = host.clock().now();
  // What every line of --events carries: when, what, whose, and PyTorch's event metadata
  // (SimpleElasticAgent._construct_event).
  // Copied now: the WORKER events are written after rdzv.reset() has destroyed the handler.
  const std::string rdzv_backend = handler.get_backend();
  const auto event_line = [&](const std::string& name, const char* source) {
    return nlohmann::json{{"t_ms", std::chrono::duration_cast<std::chrono::milliseconds>(host.clock().now() - started).count()},
                          {"event", name},
                          {"source", source},
                          {"run_id", plan.settings.run_id},
                          {"node", rendezvous::to_string(node)},
                          {"role", plan.agent.role},
                          {"hostname", self},
                          {"rdzv_backend", rdzv_backend},
                          {"agent_restarts", plan.agent.max_restarts - agent.remaining_restarts()}};
  };
  agent.set_listener([&](const elastic::AgentEvent& e) {
    std::cerr << "dagsim launch: " << describe(e) << "\n";
    if (!events.is_open()) return;
    nlohmann::json j = event_line(elastic::event_name(e.kind), "AGENT");
    j["round"] = e.info.round;
    j["group_rank"] = e.info.rank;
    j["group_world_size"] = e.info.world_size;
    j["state"] = elastic::worker_state_name(agent.state());
    if (e.kind == elastic::AgentEvent::Kind::nodes_waiting) j["waiting"] = e.waiting;
    if (e.kind == elastic::AgentEvent::Kind::group_failed) j["restarts_left"] = e.remaining;
    if (!e.detail.empty()) j["detail"] = e.detail;
    events << j.dump() << std::endl;
  });

  struct sigaction action{};
  action.sa_handler = request_launch_stop;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &action, nullptr);

  std::optional<elastic::AgentResult> result;
  std::string internal;
  host.run([&] {
    runtime::CancelScope scope("agent", host.spawner());
    runtime::CancelScope watcher("signals", host.spawner());
    host.spawner().spawn(watcher, "signals", [&] {
      while (stop_signal == 0) host.clock().sleep(std::chrono::milliseconds(20));
      scope.cancel();
    });
    try {
      runtime::CancelScope::Enter in(scope);
      result = agent.run();
    } catch (const Error& e) {
      if (!runtime::is_unwinding(e)) internal = e.what();
    }
    watcher.cancel();
    watcher.join();
    // Workers of a group the agent dropped while unwinding: SIGTERM, the grace, SIGKILL.
    for (auto& workers : *config.orphans) workers->stop(host.clock(), config.grace);
    config.orphans->clear();
    if (stop_signal != 0) {
      handler.shutdown();  // leave; the others re-form without this node
      return;
    }
    // The job ended, well or not: close the rendezvous for everyone (torchrun's launcher does).
    if (result && (result->outcome == elastic::AgentOutcome::succeeded || result->outcome == elastic::AgentOutcome::failed)) {
      agent.close_job();
    }
    handler.shutdown();
    depart(host.clock(), store, agent, rdzv->server() != nullptr);
  });
  rdzv.reset();  // the handler, the client, then the store this agent served
  if (stop_signal != 0) {
    std::cerr << "dagsim launch: stopped by signal " << stop_signal << "; workers stopped, rendezvous left\n";
    return 128 + stop_signal;
  }
  if (!result) {
    std::cerr << "dagsim launch: internal error: " << internal << "\n";
    return kInternalError;
  }
  if (events.is_open() && agent.group_spec()) {
    // PyTorch's _record_worker_events: one WORKER event per local worker of the last group, in its
    // final state, with the run's error as raw_error when it failed.
    const elastic::WorkerGroupSpec& group = *agent.group_spec();
    const std::string state = result->outcome == elastic::AgentOutcome::succeeded ? "SUCCEEDED"
                              : result->outcome == elastic::AgentOutcome::failed  ? "FAILED"
                                                                                  : elastic::worker_state_name(agent.state());
    for (const elastic::WorkerRanks& w : group.workers) {
      nlohmann::json j = event_line("torchelastic.worker.status." + state, "WORKER");
      j["global_rank"] = w.global_rank;
      j["local_rank"] = w.local_rank;
      j["group_rank"] = group.info.rank;
      j["state"] = state;
      if (result->error) j["raw_error"] = result->error->what();
      events << j.dump() << std::endl;
    }
  }
  if (events.is_open() && !result->metrics.empty()) {
    // The run's metrics as PyTorch's agent puts them (elastic_agent.h), the last value of each.
    nlohmann::json j = event_line("metrics", "AGENT");
    j["metrics"] = result->metrics;
    events << j.dump() << std::endl;
  }
  std::cerr << "dagsim launch: " << elastic::outcome_name(result->outcome) << " after " << result->rounds << " round(s), "
            << result->restarts << " restart(s) counted" << (result->error ? std::string(": ") + result->error->what() : "")
            << "\n";
  // A spare that found the rendezvous closed ends well, as torchrun's does (its run returns None).
  const bool ok = result->outcome == elastic::AgentOutcome::succeeded || result->outcome == elastic::AgentOutcome::graceful_exit;
  return ok ? kPassed : kCheckFailed;
}

}  // namespace dagsim::cli
