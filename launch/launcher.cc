// Launcher (launcher.h): the plan, the store host, signals and events around one AgentLife.
#include "launch/launcher.h"

#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/base/assert.h"
#include "core/base/probe.h"
#include "core/base/printable.h"
#include "core/elastic/agent_life.h"
#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/runtime/cancel_scope.h"
#include "launch/launch_log.h"
#include "launch/interpreter.h"
#include "launch/launch_plan.h"
#include "launch/root_cause.h"
#include "launch/wait_lines.h"
#include "net/process_worker_group.h"
#include "net/rdzv/host_names.h"
#include "net/rdzv/rendezvous_registry.h"
#include "net/tcpstore/store_host.h"

extern char** environ;

namespace dagsim::launch {

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
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw errors::invalid_argument("cannot make a log folder in " + printable(pattern, kPathMax) + ": " + std::strerror(errno));
  }
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

// Why a job whose c10d store was hosted by an agent cannot go on once that agent left: the store
// lived in its process (Note [a store that served and now refuses], tcp_store_client.cc).
std::string store_host_left(const net::Rendezvous& rdzv) {
  const std::string where = rdzv.endpoint().host + ":" + std::to_string(rdzv.endpoint().port);
  const std::string who = rdzv.store_host().empty() ? "the process that served the c10d store at " + printable(where)
                                                     : "agent " + printable(rdzv.store_host(), 256) + ", which hosted the c10d store at " +
                                                           printable(where) + ",";
  return "the store host left: " + who +
         " is gone, and the store died with it (a c10d store lives in the process of the agent that hosts it): the "
         "rendezvous state, its rounds and the exit barrier went with it, so this job cannot go on. To survive the loss "
         "of any agent, serve the store apart (`dagsim store`, then --rdzv_endpoint HOST:PORT with is_host=false on "
         "every agent) or use --rdzv_backend etcd";
}

}  // namespace

int Launcher::run() {
  const LaunchArgs& args = args_;
  namespace asio = boost::asio;
  using asio::ip::tcp;
  LaunchPlan plan;
  std::string run_log_dir;
  try {
    plan = plan_launch(args, std::max(1u, std::thread::hardware_concurrency()));
    run_log_dir = net::make_run_log_dir(plan.log_dir.empty() ? temporary_log_dir() : plan.log_dir, plan.settings.run_id);
  } catch (const Error& e) {
    say(e.what());
    return kBadUsage;
  }
  for (const std::string& warning : plan.warnings) say("warning: " + warning);
  std::ofstream events;
  if (!args.events_path.empty()) {
    events.open(args.events_path, std::ios::app);
    if (!events) {
      say("cannot write the events to " + quote(args.events_path, kPathMax));
      return kBadUsage;
    }
  }
  // Each event is one line, flushed as written, so a reader (or a crash) sees whole events. A write
  // that fails (a full disk, /dev/full) is said at once, naming the file, and makes the launch exit
  // 2 at its end, as any output that cannot be written does (docs/cli.md): the job itself goes on,
  // since the events are its record, not its work. Later events are not tried.
  bool events_lost = false;
  const auto write_event = [&](const nlohmann::json& j) {
    if (!events.is_open() || events_lost) return;
    errno = 0;
    events << j.dump() << std::endl;
    if (events) return;
    events_lost = true;
    DAGSIM_PROBE("launch.events_write_failed");
    say("cannot write the events to " + quote(args.events_path, kPathMax) +
        (errno != 0 ? ": " + std::string(std::strerror(errno)) : "") + "; the job goes on, and launch will exit 2");
  };
  // torchrun's getfqdn(), unless that name would send the other hosts to their own loopback.
  const net::NodeAddress address =
      net::node_address(plan.target.file_store ? std::nullopt : std::make_optional(plan.target.endpoint));
  if (!address.warning.empty()) say("warning: " + address.warning);
  const std::string self = address.host;
  say("run " + printable(plan.settings.run_id) + ", " + std::to_string(plan.agent.local_world_size) + " worker(s) here, logs in " +
      printable(run_log_dir, kPathMax));

  if (!args.no_python || args.run_path) {
    const char* path = std::getenv("PATH");
    const std::optional<std::string> python = resolve_program(args.python, path != nullptr ? path : "");
    say("workers run " + (python ? printable(*python, kPathMax) : printable(args.python, kPathMax) + " (not found on PATH)") +
        (args.python == "python3" ? " (python3 from PATH; --python chooses another)" : ""));
  }
  net::tcpstore::StoreHost host("launch");
  const rendezvous::NodeDesc node = net::NodeDescGenerator(self).generate();
  const net::RendezvousContext context{&host, node, [](const std::string& line) { say(line); }};
  std::unique_ptr<net::Rendezvous> rdzv;
  try {
    rdzv = host.run([&] { return net::default_rendezvous_registry().create_handler(*plan.params, context); });
  } catch (const Error& e) {
    DAGSIM_PROBE("launch.rendezvous_not_created");
    say(e.what());
    return e.code() == ErrorCode::invalid_argument ? kBadUsage : kFailed;
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
  config.failures = std::make_shared<std::vector<net::WorkerFailureRecord>>();
  plan.agent.master_endpoint = [self] { return std::make_pair(self, free_port()); };
  if (plan.static_master) {
    // static: the workers meet at the agents' store, MASTER_ADDR:MASTER_PORT, as torchrun's.
    plan.agent.master_endpoint = [m = *plan.static_master] { return std::make_pair(m.host, m.port); };
  }
  // With the static backend a group rank is the node rank; two agents given the same one get a
  // round whose ranks cannot all match: no worker starts then (net/rdzv/static_rendezvous.h).
  elastic::WorkerGroupFactory workers = net::process_worker_group(host.clock(), config);
  if (plan.static_master) {
    workers = [workers, &handler, node_rank = args.node_rank](const elastic::WorkerGroupSpec& spec) {
      if (spec.round.group_rank != node_rank) {
        DAGSIM_PROBE("launch.static_node_rank_clash");
        // Closed, so the other agents stop at their next look instead of waiting for this one.
        try {
          handler.set_closed();
        } catch (const Error& e) {
          runtime::rethrow_if_unwinding(e);
        }
        throw errors::invalid_argument("the static rendezvous gave this agent group rank " + std::to_string(spec.round.group_rank) +
                                       ", not its --node_rank " + std::to_string(node_rank) +
                                       ": two agents were given the same --node_rank; the job is closed");
      }
      return workers(spec);
    };
  }
  elastic::ElasticAgent agent(host.env(), handler, store, plan.settings.run_id, plan.agent, workers);
  const runtime::TimePoint started = host.clock().now();
  // What every line of --events carries: when, what, whose, and PyTorch's event metadata
  // (SimpleElasticAgent._construct_event).
  // Copied now: the WORKER events are written after rdzv.reset() has destroyed the handler.
  const std::string rdzv_backend = handler.get_backend();
  // t_ms counts from this agent's start (steady); timestamp is PyTorch's Event.timestamp
  // (milliseconds since the Unix epoch) and time the same instant in UTC, to line up several
  // agents' events and their dated lines.
  const auto event_line = [&](const std::string& name, const char* source) {
    const WallTime wall = std::chrono::system_clock::now();
    return nlohmann::json{{"t_ms", std::chrono::duration_cast<std::chrono::milliseconds>(host.clock().now() - started).count()},
                          {"timestamp", std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count()},
                          {"time", utc_iso(wall)},
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
    say(describe(e));
    if (!events.is_open()) return;
    nlohmann::json j = event_line(elastic::event_name(e.kind), "AGENT");
    j["round"] = e.info.round;
    j["group_rank"] = e.info.rank;
    j["group_world_size"] = e.info.world_size;
    j["state"] = elastic::worker_state_name(agent.state());
    if (e.kind == elastic::AgentEvent::Kind::nodes_waiting) j["waiting"] = e.waiting;
    if (e.kind == elastic::AgentEvent::Kind::group_failed) j["restarts_left"] = e.remaining;
    if (!e.detail.empty()) j["detail"] = e.detail;
    write_event(j);
  });

  struct sigaction action{};
  action.sa_handler = request_launch_stop;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &action, nullptr);

  // The agent's whole life (core/elastic/agent_life.h): this agent serves the store when its
  // rendezvous runs the server, and then lingers for the others' last calls.
  elastic::AgentLifeOptions life_options;
  life_options.serves_store = rdzv->server() != nullptr;
  std::optional<elastic::AgentLifeEnd> end;
  std::string internal;
  host.run([&] {
    runtime::CancelScope scope("agent", host.spawner());
    runtime::CancelScope watcher("signals", host.spawner());
    // The same fiber says what the agent waits for, every few seconds of a wait (wait_lines.h).
    WaitLines waits(host.clock(), handler, agent, [](const std::string& line) { say(line); });
    host.spawner().spawn(watcher, "signals", [&] {
      for (uint64_t beat = 0; stop_signal == 0; ++beat) {
        if (beat % 25 == 0) waits.tick();
        host.clock().sleep(std::chrono::milliseconds(20));
      }
      scope.cancel();
    });
    elastic::AgentLife life(host.env(), agent, handler, store, life_options);
    try {
      end = life.live(scope, [&] {
        watcher.cancel();
        watcher.join();
        // Workers of a group the agent dropped while unwinding: SIGTERM, the grace, SIGKILL.
        if (!config.orphans->empty()) DAGSIM_PROBE("launch.orphaned_workers_stopped");
        for (auto& workers : *config.orphans) workers->stop(host.clock(), config.grace);
        config.orphans->clear();
      });
    } catch (const Error& e) {
      if (!runtime::is_unwinding(e)) internal = e.what();
    }
  });
  const std::optional<elastic::AgentResult> result = end ? end->result : std::nullopt;
  // Read before the store goes: whether the store this agent reached is gone with its host.
  const std::string store_lost = rdzv->store_gone() ? store_host_left(*rdzv) : "";
  const bool served_store = rdzv->server() != nullptr;
  rdzv.reset();  // the handler, the client, then the store this agent served
  // AgentLife's contract: a life that ended left (cancelled, which only a signal does here) or
  // has its run's result.
  if (end) DAGSIM_ASSERT(end->left != end->result.has_value());
  if (end && end->left) {
    DAGSIM_ASSERT(stop_signal != 0);
    DAGSIM_PROBE("launch.stopped_by_signal");
    say("stopped by signal " + std::to_string(stop_signal) + "; workers stopped, rendezvous left" +
        (served_store ? "; this agent served the rendezvous store, which closes with it: the other agents cannot go on" : ""));
    return kSignalBase + stop_signal;
  }
  // Only a job the store's loss ended: a job that succeeded may find the store gone in its last
  // calls (its host lingers at most a minute), which changed nothing.
  const bool ended_well = result && (result->outcome == elastic::AgentOutcome::succeeded ||
                                     result->outcome == elastic::AgentOutcome::graceful_exit);
  if (!store_lost.empty() && !ended_well) {
    DAGSIM_PROBE("launch.store_lost_ended_job");
    say(store_lost);
  }
  if (!result) {
    DAGSIM_PROBE("launch.agent_life_raised");
    say("internal error: " + internal);
    return kInternal;
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
      write_event(j);
    }
  }
  if (events.is_open() && !result->metrics.empty()) {
    // The run's metrics as PyTorch's agent puts them (elastic_agent.h), the last value of each.
    nlohmann::json j = event_line("metrics", "AGENT");
    j["metrics"] = result->metrics;
    write_event(j);
  }
  if (events.is_open() && !events_lost) {
    events.close();  // a last chance for the file system to say no
    if (!events) {
      events_lost = true;
      say("cannot write the events to " + quote(args.events_path, kPathMax));
    }
  }
  say(std::string(elastic::outcome_name(result->outcome)) + " after " + std::to_string(result->rounds) + " round(s), " +
      std::to_string(result->restarts) + " restart(s) counted" + (result->error ? std::string(": ") + result->error->what() : ""));
  if (result->outcome == elastic::AgentOutcome::failed && result->error && result->error->code() == ErrorCode::worker_group_failed &&
      !config.failures->empty()) {
    // The last failed group's workers, as torchrun's ChildFailedError reports them (root_cause.h).
    DAGSIM_PROBE("launch.root_cause_reported");
    const std::string name = args.command.empty() ? "the job" : args.command.front();
    say_block("the workers failed; the root cause, as torchrun reports it:", format_root_cause(name, self, *config.failures));
  }
  if (result->outcome == elastic::AgentOutcome::failed && (!args.no_python || args.run_path) && result->error &&
      result->error->code() == ErrorCode::worker_group_failed) {
    // Which Python the workers ran, and a missing module if a worker said so (launch/interpreter.h).
    // Only when workers failed: a lost store or a rendezvous timeout says nothing about the
    // interpreter, and the import probe would delay the failure by a Python start.
    const char* path = std::getenv("PATH");
    std::optional<std::string> missing = find_missing_module(run_log_dir, result->error->what());
    if (!missing) missing = probe_import(args.python, "torch");  // the workers' stderr went to the terminal
    say(interpreter_note(args.python, resolve_program(args.python, path != nullptr ? path : ""), missing));
  }
  if (events_lost) {
    say("exit 2: the events were not all written to " + quote(args.events_path, kPathMax));
    return kBadUsage;
  }
  // A spare that found the rendezvous closed ends well, as torchrun's does (its run returns None).
  const bool ok = result->outcome == elastic::AgentOutcome::succeeded || result->outcome == elastic::AgentOutcome::graceful_exit;
  return ok ? kSucceeded : kFailed;
}

}  // namespace dagsim::launch
