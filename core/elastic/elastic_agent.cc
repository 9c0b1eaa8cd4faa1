// ElasticAgent (elastic_agent.h): PyTorch's _invoke_run loop over a worker group in a CancelScope.
#include "core/elastic/elastic_agent.h"

#include <algorithm>
#include <cctype>

#include "core/base/assert.h"
#include "core/base/probe.h"
#include "core/base/planted.h"
#include "core/base/printable.h"

namespace dagsim::elastic {

const char* outcome_name(AgentOutcome outcome) {
  switch (outcome) {
    case AgentOutcome::succeeded: return "succeeded";
    case AgentOutcome::failed: return "failed";
    case AgentOutcome::closed: return "closed";
    case AgentOutcome::graceful_exit: return "graceful_exit";
  }
  DAGSIM_UNREACHABLE();
}

const char* event_name(AgentEvent::Kind kind) {
  switch (kind) {
    case AgentEvent::Kind::group_started: return "group_started";
    case AgentEvent::Kind::group_failed: return "group_failed";
    case AgentEvent::Kind::nodes_waiting: return "nodes_waiting";
    case AgentEvent::Kind::group_succeeded: return "group_succeeded";
    case AgentEvent::Kind::exit_barrier: return "exit_barrier";
    case AgentEvent::Kind::round_lost: return "round_lost";
  }
  DAGSIM_UNREACHABLE();
}

// One round's worker group, and what the monitor knows of it.
struct ElasticAgent::Group {
  WorkerGroupSpec spec;
  // Since when the monitor has seen a member in none of the state's lists (member_lost).
  std::optional<runtime::TimePoint> member_absent_since;
  std::unique_ptr<WorkerGroup> workers;
};

ElasticAgent::ElasticAgent(runtime::Env& env, rendezvous::RendezvousHandler& handler, store::Store& store,
                           std::string run_id, ElasticAgentOptions options, WorkerGroupFactory workers)
    : env_(env), handler_(handler), store_(store), run_id_(std::move(run_id)), options_(std::move(options)),
      workers_(std::move(workers)), remaining_(options_.max_restarts) {
  if (options_.monitor_interval <= Duration::zero()) throw errors::invalid_argument("elastic agent: monitor_interval must be positive");
  if (options_.exit_barrier_timeout <= Duration::zero()) {
    throw errors::invalid_argument("elastic agent: exit_barrier_timeout must be positive");
  }
  if (options_.local_world_size == 0 || options_.local_world_size > kMaxLocalWorldSize) {
    throw errors::invalid_argument("elastic agent: local_world_size must be 1 to " + std::to_string(kMaxLocalWorldSize));
  }
  if (options_.role.empty() || options_.role.size() > kMaxRoleBytes || options_.role.find_first_of(" \n") != std::string::npos) {
    throw errors::invalid_argument("elastic agent: the role must be a non-empty word of at most " + std::to_string(kMaxRoleBytes) +
                                   " bytes");
  }
  DAGSIM_ASSERT(workers_ != nullptr);
}

ElasticAgent::ElasticAgent(runtime::Env& env, rendezvous::RendezvousHandler& handler, store::Store& store,
                           std::string run_id, ElasticAgentOptions options, WorkerFn worker)
    : ElasticAgent(env, handler, store, std::move(run_id), std::move(options), fiber_worker_group(env, std::move(worker))) {}

ElasticAgent::~ElasticAgent() { group_.reset(); }  // cancels a group still running; never joins

namespace {
AgentEvent event_of(AgentEvent::Kind kind, const rendezvous::RendezvousInfo& info) {
  AgentEvent event;
  event.kind = kind;
  event.info = info;
  return event;
}
}  // namespace

void ElasticAgent::emit(AgentEvent event) {
  if (listener_) listener_(event);
}

namespace {

// "host:port" as group rank 0 published it.
std::pair<std::string, uint16_t> decode_master(const store::Bytes& bytes) {
  const std::string text(bytes.begin(), bytes.end());
  const size_t colon = text.rfind(':');
  uint32_t port = 0;
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < text.size() && text.size() - colon - 1 <= 5;
  for (size_t i = colon + 1; ok && i < text.size(); ++i) {
    ok = text[i] >= '0' && text[i] <= '9';
    port = port * 10 + static_cast<uint32_t>(text[i] - '0');
  }
  if (!ok || port == 0 || port > 65535) {
    throw errors::invalid_argument("elastic agent: group rank 0 published a master address that is not \"host:port\"");
  }
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

}  // namespace

bool ElasticAgent::gather_round(WorkerGroupSpec& spec, std::string& lost) {
  const rendezvous::RendezvousInfo& info = spec.info;
  const std::string prefix = "torchelastic/agent/" + run_id_ + "/round/" + std::to_string(info.round) + "/";
  const std::string own = encode_role_info({options_.role, info.rank, options_.local_world_size});
  store_.set(prefix + "role_info/" + std::to_string(info.rank), store::Bytes(own.begin(), own.end()));
  const bool has_master = options_.master_endpoint != nullptr;
  if (has_master && info.rank == 0) {
    const auto [addr, port] = options_.master_endpoint();
    const std::string text = addr + ":" + std::to_string(port);
    store_.set(prefix + "master", store::Bytes(text.begin(), text.end()));
  }
  // Every member completed the round, so each is alive and publishes within moments; one that
  // has not within the keep-alive expiry died after the round completed.
  const runtime::TimePoint deadline = env_.clock.now() + handler_.settings().expiry();
  const auto read = [&](const std::string& key) -> std::optional<store::Bytes> {
    for (;;) {
      const runtime::TimePoint now = env_.clock.now();
      if (now >= deadline) return std::nullopt;
      store::Versioned got = store_.watch_at_most(key, 0, deadline - now);
      if (got.version != 0) return std::move(got.value);
    }
  };
  std::vector<AgentRoleInfo> agents;
  for (uint32_t rank = 0; rank < info.world_size; ++rank) {
    std::optional<store::Bytes> bytes = read(prefix + "role_info/" + std::to_string(rank));
    if (!bytes) {
      lost = "the agent at group rank " + std::to_string(rank) + " of round " + std::to_string(info.round) +
             " did not publish its role within the keep-alive expiry";
      return false;
    }
    agents.push_back(decode_role_info(*bytes, rank));
  }
  if (has_master) {
    std::optional<store::Bytes> bytes = read(prefix + "master");
    if (!bytes) {
      lost = "group rank 0 of round " + std::to_string(info.round) + " did not publish the master address within the keep-alive expiry";
      return false;
    }
    std::tie(spec.round.master_addr, spec.round.master_port) = decode_master(*bytes);
  }
  spec.workers = assign_worker_ranks(agents, info.rank);
  return true;
}

// The agent's WorkerState moves (PyTorch's _invoke_run, as run() lives it):
//   INIT -> INIT (a round lost before it started) | HEALTHY (the group started)
//   HEALTHY -> FAILED (a failure, counted) | SUCCEEDED | STOPPED (a restart) | UNKNOWN, INIT, STOPPED
//              (a group's state the agent cannot act on)
//   any state with a group -> STOPPED (stop_workers) -> INIT (the next round)
//   STOPPED -> SUCCEEDED | FAILED | UNKNOWN (finish() puts back how the run ended)
void ElasticAgent::set_state(WorkerState next) {
  const WorkerState from = state_;
  bool allowed = false;
  switch (next) {
    case WorkerState::init: allowed = from == WorkerState::init || from == WorkerState::stopped || from == WorkerState::healthy; break;
    case WorkerState::healthy: allowed = from == WorkerState::init; break;
    case WorkerState::stopped: allowed = from != WorkerState::unhealthy; break;
    case WorkerState::failed:
    case WorkerState::succeeded:
    case WorkerState::unknown: allowed = from == WorkerState::healthy || from == WorkerState::stopped; break;
    case WorkerState::unhealthy: allowed = false; break;  // the group's state, never the agent's
  }
  DAGSIM_ASSERT_MSG(allowed, std::string("elastic agent state ") + worker_state_name(from) + " -> " + worker_state_name(next));
  state_ = next;
}

bool ElasticAgent::initialize_workers(std::string& lost) {
  DAGSIM_ASSERT(group_ == nullptr);
  set_state(WorkerState::init);
  WorkerGroupSpec spec;
  spec.info = handler_.next_rendezvous();
  // The state next_rendezvous returned on names the round's members (S8: complete, with us in it).
  // A member that learned late that its round completed may find some members gone already: their
  // places stay empty (addr ""), and the group fails when it needs them.
  const rendezvous::RendezvousState& state = handler_.last_state();
  spec.members.resize(spec.info.world_size);
  for (const auto& [node, rank] : state.participants) {
    DAGSIM_ASSERT(rank < spec.members.size() && spec.members[rank].addr.empty());
    spec.members[rank] = node;
  }
  DAGSIM_ASSERT(spec.members[spec.info.rank] == handler_.node());
  spec.round.role = options_.role;
  spec.round.run_id = run_id_;
  spec.round.group_rank = spec.info.rank;
  spec.round.group_world_size = spec.info.world_size;
  spec.round.local_world_size = options_.local_world_size;
  spec.round.restart_count = options_.max_restarts - remaining_;
  spec.round.max_restarts = options_.max_restarts;
  spec.round.use_agent_store = options_.use_agent_store;
  if (!gather_round(spec, lost)) {
    DAGSIM_ASSERT(!lost.empty());
    DAGSIM_PROBE("elastic.round_lost_before_start");
    AgentEvent event = event_of(AgentEvent::Kind::round_lost, spec.info);
    event.detail = lost;
    emit(event);
    return false;
  }
  auto group = std::make_unique<Group>();
  group->spec = spec;
  group->workers = workers_(spec);
  group_ = std::move(group);
  spec_ = std::move(spec);
  set_state(WorkerState::healthy);
  ++rounds_;
  // The restart count the group is told is what max_restarts has spent so far.
  DAGSIM_ASSERT(remaining_ <= options_.max_restarts);
  emit(event_of(AgentEvent::Kind::group_started, group_->spec.info));
  return true;
}

void ElasticAgent::stop_workers() {
  if (!group_) return;
  group_->workers->stop();  // nothing of the old group runs past this point
  group_.reset();
  set_state(WorkerState::stopped);
}

void ElasticAgent::restart_workers() {
  stop_workers();
  // A round a member left before it started is rendezvoused again (its round_lost event says why).
  for (std::string lost; !initialize_workers(lost);) lost.clear();
  DAGSIM_ASSERT(group_ != nullptr);
  DAGSIM_ASSERT(state_ == WorkerState::healthy);
}

bool ElasticAgent::exit_barrier(const rendezvous::RendezvousInfo& info, std::string& detail) {
  // Every member adds itself; the last one in marks the barrier passed; all wait for the mark.
  const std::string prefix = "torchelastic/agent/" + run_id_ + "/exit_barrier/" + std::to_string(info.round) + "/";
  const runtime::TimePoint deadline = env_.clock.now() + options_.exit_barrier_timeout;
  barrier_deadline_ = deadline;
  struct Passed {
    std::optional<runtime::TimePoint>& deadline;
    ~Passed() { deadline.reset(); }
  } passed{barrier_deadline_};
  try {
    if (store_.add(prefix + "count", 1) == static_cast<int64_t>(info.world_size)) store_.set(prefix + "last", {'1'});
    while (env_.clock.now() < deadline) {
      if (store_.watch_at_most(prefix + "last", 0, deadline - env_.clock.now()).version != 0) {
        detail = "passed";
        return true;
      }
    }
    DAGSIM_PROBE("elastic.exit_barrier_timed_out");
    detail = "timed out after " + std::to_string(options_.exit_barrier_timeout.count() / 1'000'000) + " ms";
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    DAGSIM_PROBE("elastic.exit_barrier_store_failed");
    detail = e.what();
  }
  return false;  // PyTorch logs a failed barrier and still succeeds
}

AgentResult ElasticAgent::run() {
  AgentResult result;
  const auto finish = [&](AgentOutcome outcome, std::optional<Error> error) {
    const WorkerState end = state_;
    stop_workers();
    if (end == WorkerState::succeeded || end == WorkerState::failed || end == WorkerState::unknown) if (state_ != end) set_state(end);
    // A run that ends leaves no group behind, and never more restarts spent than it had.
    DAGSIM_ASSERT(group_ == nullptr);
    DAGSIM_ASSERT_EQ(result.restarts + remaining_, options_.max_restarts);
    // PyTorch records the run's metrics when _invoke_run returns a result: success, or failure
    // with the restarts spent (the group FAILED). Its raises (a rendezvous error, a state it cannot
    // act on) pass them by.
    if (outcome == AgentOutcome::succeeded) record_metrics(false);
    if (outcome == AgentOutcome::failed && end == WorkerState::failed) record_metrics(true);
    result.outcome = outcome;
    result.error = std::move(error);
    result.rounds = rounds_;
    result.metrics = metrics_;
    return result;
  };
  // A failed group restarts while restarts remain (counted); then the job fails.
  const auto on_failure = [&](const Group& group, const Error& cause) -> std::optional<AgentResult> {
    set_state(WorkerState::failed);
    AgentEvent failed = event_of(AgentEvent::Kind::group_failed, group.spec.info);
    failed.remaining = remaining_;
    failed.detail = cause.what();
    emit(failed);
    if (remaining_ > 0) {
      DAGSIM_PROBE("elastic.worker_group_restart");
      --remaining_;
      ++result.restarts;
      restart_workers();
      return std::nullopt;
    }
    DAGSIM_PROBE("elastic.max_restarts_exhausted");
    return finish(AgentOutcome::failed,
                  errors::worker_group_failed("the worker group of round " + std::to_string(group.spec.info.round) +
                                              " failed with max_restarts = " + std::to_string(options_.max_restarts) +
                                              " spent: " + cause.what()));
  };
  try {
    restart_workers();
    for (;;) {
      env_.clock.sleep(options_.monitor_interval);
      DAGSIM_ASSERT(group_ != nullptr);
      Group& group = *group_;
      const rendezvous::RendezvousInfo info = group.spec.info;
      WorkerGroupStatus status = group.workers->poll();
      put_metric("workers." + options_.role + ".remaining_restarts", remaining_);
      std::string state = worker_state_name(status.state);
      std::transform(state.begin(), state.end(), state.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      put_metric("workers." + options_.role + "." + state, 1);
      switch (status.state) {
        case WorkerState::succeeded: {
          set_state(WorkerState::succeeded);
          emit(event_of(AgentEvent::Kind::group_succeeded, info));
          AgentEvent barrier = event_of(AgentEvent::Kind::exit_barrier, info);
          result.barrier_timed_out = !exit_barrier(info, barrier.detail);
          emit(barrier);
          return finish(AgentOutcome::succeeded, std::nullopt);
        }
        case WorkerState::failed: {
          DAGSIM_ASSERT(status.failure.has_value());
          if (std::optional<AgentResult> end = on_failure(group, *status.failure)) return *end;
          continue;
        }
        case WorkerState::unhealthy: {
          // PyTorch's _invoke_run treats UNHEALTHY as FAILED: a restart counted while restarts
          // remain, then the job fails (api_test.py's test_run_max_retries_exceeded runs both).
          DAGSIM_PROBE("elastic.group_unhealthy");
          const Error cause = status.failure ? *status.failure
                                             : errors::worker_group_failed("the worker group of round " + std::to_string(info.round) +
                                                                           " reported UNHEALTHY");
          if (std::optional<AgentResult> end = on_failure(group, cause)) return *end;
          continue;
        }
        default: {
          if (!is_running(status.state)) {
            // PyTorch's _invoke_run raises on a state it cannot act on (UNKNOWN, INIT, STOPPED from
            // a group's monitor): the run ends there, its restarts untouched.
            DAGSIM_PROBE("elastic.group_state_not_actionable");
            set_state(status.state);
            return finish(AgentOutcome::failed,
                          errors::worker_group_failed("the worker group of round " + std::to_string(info.round) +
                                                      " is in state " + worker_state_name(status.state) +
                                                      ", which the agent cannot act on"));
          }
          const uint64_t waiting = handler_.num_nodes_waiting();
          if (handler_.last_state().closed) {
            DAGSIM_PROBE("elastic.closed_while_training");
            return finish(AgentOutcome::closed,
                          errors::rendezvous_closed("the rendezvous of run " + printable(run_id_) + " was closed while round " +
                                                    std::to_string(info.round) + " trained"));
          }
          if (waiting > 0) {
            AgentEvent event = event_of(AgentEvent::Kind::nodes_waiting, info);
            event.waiting = waiting;
            emit(event);
            DAGSIM_PROBE("elastic.membership_change_restart");
            restart_workers();  // not counted against max_restarts
          } else if (const std::string lost = round_lost(info); !lost.empty()) {
            // Not a worker failure: the group's round is gone from the state (a store that
            // restarted empty, or this node removed as dead after a pause). Its group cannot go on
            // as a member of nothing; it rejoins, as for waiting nodes (not counted).
            AgentEvent event = event_of(AgentEvent::Kind::round_lost, info);
            event.detail = lost;
            emit(event);
            DAGSIM_PROBE("elastic.round_lost_restart");
            if (DAGSIM_PLANTED("elastic_round_lost_counted") && remaining_ > 0) {
              --remaining_;  // planted (core/base/planted.h): a lost round counted as a restart
              ++result.restarts;
            }
            restart_workers();
          } else if (const std::string gone = member_lost(group); !gone.empty()) {
            // A member gone for good: PyTorch's workers find out when their next collective with it
            // fails, and the agent sees a worker failure (counted). A group that waits on that
            // member would otherwise wait for ever.
            DAGSIM_PROBE("elastic.member_lost_for_good");
            if (std::optional<AgentResult> end = on_failure(group, errors::connection_failed(gone))) return *end;
          }
          break;
        }
      }
    }
  } catch (const Error& e) {
    if (runtime::is_unwinding(e)) {
      group_.reset();  // cancelled, not joined: this fiber's own waits unwind
      throw;
    }
    if (e.code() == ErrorCode::rendezvous_graceful_exit) DAGSIM_PROBE("elastic.spare_exits_gracefully");
    const AgentOutcome outcome = e.code() == ErrorCode::rendezvous_closed          ? AgentOutcome::closed
                                 : e.code() == ErrorCode::rendezvous_graceful_exit ? AgentOutcome::graceful_exit
                                                                                   : AgentOutcome::failed;
    return finish(outcome, e);
  }
}

void ElasticAgent::put_metric(const std::string& name, int64_t value) {
  metrics_[name] = value;
  if (metric_listener_) metric_listener_(name, value);
}

void ElasticAgent::record_metrics(bool failed) {
  const std::string prefix = "workers." + options_.role + ".";
  // PyTorch's _record_flakiness_metric, in its float arithmetic, truncated as int() truncates.
  const double flakiness =
      failed ? 100.0 : 100.0 - 100.0 * (static_cast<double>(remaining_) + 1) / (static_cast<double>(options_.max_restarts) + 1);
  put_metric(prefix + "flakiness", static_cast<int64_t>(flakiness));
  const bool restarted = remaining_ != options_.max_restarts;
  put_metric(prefix + "run_total", 1);
  put_metric(prefix + "run_success_with_retries", !failed && restarted ? 1 : 0);
  put_metric(prefix + "run_success_no_retries", !failed && !restarted ? 1 : 0);
  put_metric(prefix + "run_failed_with_retries", failed && restarted ? 1 : 0);
  put_metric(prefix + "run_failed_no_retries", failed && !restarted ? 1 : 0);
}

std::string ElasticAgent::round_lost(const rendezvous::RendezvousInfo& info) const {
  const rendezvous::RendezvousState& state = handler_.last_state();
  if (state.round != info.round) {
    return "the state is at round " + std::to_string(state.round) + " while this group trains round " + std::to_string(info.round);
  }
  if (state.participants.count(handler_.node()) == 0) return "this node is no longer a participant of round " + std::to_string(info.round);
  return "";
}

std::string ElasticAgent::member_lost(Group& group) {
  // A member that restarts leaves the round (exit op) and rejoins the wait list (join op), which
  // the monitor sees as nodes waiting. Only a member in none of the lists for as long as a silent
  // node takes to be declared dead (the keep-alive expiry) has left for good: its agent ended, or
  // it died and its heartbeats expired.
  const rendezvous::RendezvousState& state = handler_.last_state();
  for (size_t rank = 0; rank < group.spec.members.size(); ++rank) {
    // An empty place: the member had left before this node saw the round complete.
    const rendezvous::NodeDesc& member = group.spec.members[rank];
    if (!member.addr.empty() && (state.participants.count(member) != 0 || state.wait_list.count(member) != 0 ||
                                 state.redundancy_list.count(member) != 0)) {
      continue;
    }
    const runtime::TimePoint now = env_.clock.now();
    if (!group.member_absent_since) group.member_absent_since = now;
    if (now - *group.member_absent_since < handler_.settings().expiry()) return "";
    const std::string who = member.addr.empty() ? "the member" : "member " + rendezvous::to_string(member);
    return who + " (rank " + std::to_string(rank) + ") of round " + std::to_string(group.spec.info.round) +
           " left the rendezvous for good";
  }
  group.member_absent_since.reset();
  return "";
}

bool ElasticAgent::close_job() {
  try {
    handler_.set_closed();
    return true;
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    DAGSIM_PROBE("elastic.close_job_failed");
    return false;
  }
}

}  // namespace dagsim::elastic
