// ElasticAgent (elastic_agent.h): PyTorch's _invoke_run loop over a worker group in a CancelScope.
#include "core/elastic/elastic_agent.h"

#include "core/base/assert.h"

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

// One round's worker group. The fiber writes its end into `status`, which it shares: the group
// may be gone (a restart) by the time a cancelled fiber unwinds.
struct ElasticAgent::Group {
  struct Status {
    GroupState state = GroupState::healthy;
    std::optional<Error> error;
  };
  rendezvous::RendezvousInfo info;
  std::vector<rendezvous::NodeDesc> members;  // [rank]; addr "" where a member was gone at the start
  // Since when the monitor has seen a member in none of the state's lists (member_lost).
  std::optional<runtime::TimePoint> member_absent_since;
  std::shared_ptr<Status> status = std::make_shared<Status>();
  std::unique_ptr<runtime::CancelScope> scope;
};

ElasticAgent::ElasticAgent(runtime::Env& env, rendezvous::RendezvousHandler& handler, store::Store& store,
                           std::string run_id, ElasticAgentOptions options, WorkerFn worker)
    : env_(env), handler_(handler), store_(store), run_id_(std::move(run_id)), options_(options),
      worker_(std::move(worker)), remaining_(options.max_restarts) {
  if (options_.monitor_interval <= Duration::zero()) throw errors::invalid_argument("elastic agent: monitor_interval must be positive");
  if (options_.exit_barrier_timeout <= Duration::zero()) {
    throw errors::invalid_argument("elastic agent: exit_barrier_timeout must be positive");
  }
  DAGSIM_ASSERT(worker_ != nullptr);
}

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

void ElasticAgent::initialize_workers() {
  DAGSIM_ASSERT(group_ == nullptr);
  WorkerGroupInfo spec;
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
  const rendezvous::RendezvousInfo& info = spec.info;
  auto group = std::make_unique<Group>();
  group->info = info;
  group->members = spec.members;
  const std::string name = "worker group, round " + std::to_string(info.round);
  group->scope = std::make_unique<runtime::CancelScope>(name, env_.spawner);
  env_.spawner.spawn(*group->scope, name, [status = group->status, worker = worker_, spec] {
    try {
      worker(spec);
      status->state = GroupState::succeeded;
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      status->state = GroupState::failed;
      status->error = e;
    }
  });
  group_ = std::move(group);
  ++rounds_;
  emit(event_of(AgentEvent::Kind::group_started, info));
}

void ElasticAgent::stop_workers() {
  if (!group_) return;
  group_->scope->cancel();
  group_->scope->join();  // no fiber of the old group runs past this point
  group_.reset();
}

void ElasticAgent::restart_workers() {
  stop_workers();
  initialize_workers();
}

bool ElasticAgent::exit_barrier(const rendezvous::RendezvousInfo& info, std::string& detail) {
  // Every member adds itself; the last one in marks the barrier passed; all wait for the mark.
  const std::string prefix = "torchelastic/agent/" + run_id_ + "/exit_barrier/" + std::to_string(info.round) + "/";
  const runtime::TimePoint deadline = env_.clock.now() + options_.exit_barrier_timeout;
  try {
    if (store_.add(prefix + "count", 1) == static_cast<int64_t>(info.world_size)) store_.set(prefix + "last", {'1'});
    while (env_.clock.now() < deadline) {
      if (store_.watch_at_most(prefix + "last", 0, deadline - env_.clock.now()).version != 0) {
        detail = "passed";
        return true;
      }
    }
    detail = "timed out after " + std::to_string(options_.exit_barrier_timeout.count() / 1'000'000) + " ms";
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    detail = e.what();
  }
  return false;  // PyTorch logs a failed barrier and still succeeds
}

AgentResult ElasticAgent::run() {
  AgentResult result;
  const auto finish = [&](AgentOutcome outcome, std::optional<Error> error) {
    stop_workers();
    result.outcome = outcome;
    result.error = std::move(error);
    result.rounds = rounds_;
    return result;
  };
  // A failed group restarts while restarts remain (counted); then the job fails.
  const auto on_failure = [&](const Group& group, const Error& cause) -> std::optional<AgentResult> {
    AgentEvent failed = event_of(AgentEvent::Kind::group_failed, group.info);
    failed.remaining = remaining_;
    failed.detail = cause.what();
    emit(failed);
    if (remaining_ > 0) {
      --remaining_;
      ++result.restarts;
      restart_workers();
      return std::nullopt;
    }
    return finish(AgentOutcome::failed,
                  errors::worker_group_failed("the worker group of round " + std::to_string(group.info.round) +
                                              " failed with max_restarts = " + std::to_string(options_.max_restarts) +
                                              " spent: " + cause.what()));
  };
  try {
    initialize_workers();
    for (;;) {
      env_.clock.sleep(options_.monitor_interval);
      DAGSIM_ASSERT(group_ != nullptr);
      Group& group = *group_;
      switch (group.status->state) {
        case GroupState::succeeded: {
          emit(event_of(AgentEvent::Kind::group_succeeded, group.info));
          AgentEvent barrier = event_of(AgentEvent::Kind::exit_barrier, group.info);
          result.barrier_timed_out = !exit_barrier(group.info, barrier.detail);
          emit(barrier);
          return finish(AgentOutcome::succeeded, std::nullopt);
        }
        case GroupState::failed: {
          DAGSIM_ASSERT(group.status->error.has_value());
          if (std::optional<AgentResult> end = on_failure(group, Error(*group.status->error))) return *end;
          continue;
        }
        case GroupState::healthy: {
          const uint64_t waiting = handler_.num_nodes_waiting();
          if (handler_.last_state().closed) {
            return finish(AgentOutcome::closed,
                          errors::rendezvous_closed("the rendezvous of run " + run_id_ + " was closed while round " +
                                                    std::to_string(group.info.round) + " trained"));
          }
          if (waiting > 0) {
            AgentEvent event = event_of(AgentEvent::Kind::nodes_waiting, group.info);
            event.waiting = waiting;
            emit(event);
            restart_workers();  // not counted against max_restarts
          } else if (const std::string lost = round_lost(group.info); !lost.empty()) {
            // Not a worker failure: the group's round is gone from the state (a store that
            // restarted empty, or this node removed as dead after a pause). Its group cannot go on
            // as a member of nothing; it rejoins, as for waiting nodes (not counted).
            AgentEvent event = event_of(AgentEvent::Kind::round_lost, group.info);
            event.detail = lost;
            emit(event);
            restart_workers();
          } else if (const std::string gone = member_lost(group); !gone.empty()) {
            // A member gone for good: PyTorch's workers find out when their next collective with it
            // fails, and the agent sees a worker failure (counted). A group that waits on that
            // member would otherwise wait for ever.
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
    const AgentOutcome outcome = e.code() == ErrorCode::rendezvous_closed          ? AgentOutcome::closed
                                 : e.code() == ErrorCode::rendezvous_graceful_exit ? AgentOutcome::graceful_exit
                                                                                   : AgentOutcome::failed;
    return finish(outcome, e);
  }
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
  for (size_t rank = 0; rank < group.members.size(); ++rank) {
    // An empty place: the member had left before this node saw the round complete.
    const rendezvous::NodeDesc& member = group.members[rank];
    if (!member.addr.empty() && (state.participants.count(member) != 0 || state.wait_list.count(member) != 0 ||
                                 state.redundancy_list.count(member) != 0)) {
      continue;
    }
    const runtime::TimePoint now = env_.clock.now();
    if (!group.member_absent_since) group.member_absent_since = now;
    if (now - *group.member_absent_since < handler_.settings().expiry()) return "";
    const std::string who = member.addr.empty() ? "the member" : "member " + rendezvous::to_string(member);
    return who + " (rank " + std::to_string(rank) + ") of round " + std::to_string(group.info.round) +
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
    return false;
  }
}

}  // namespace dagsim::elastic
