#include "core/rendezvous/rendezvous_handler.h"

#include <algorithm>
#include <mutex>

#include "core/base/buggify.h"
#include "core/base/assert.h"
#include "core/base/probe.h"
#include "core/base/error.h"

namespace dagsim::rendezvous {

namespace {

// Checked before any member is built from them (the backend asserts a run id).
RendezvousSettings validated(RendezvousSettings settings, const RendezvousHandlerOptions& options) {
  validate(settings);
  if (options.poll_interval < Duration::zero()) throw errors::invalid_argument("rendezvous poll_interval is negative");
  if (options.cache_duration < Duration::zero()) throw errors::invalid_argument("rendezvous cache_duration is negative");
  if (options.backend_name.empty()) throw errors::invalid_argument("The rendezvous backend name must be a non-empty string.");
  return settings;
}

// PyTorch's RendezvousError family, which shutdown() and the keep-alive log instead of raising:
// protocol_error is a corrupt state in the store (its RendezvousStateError), written by any client
// of the store; it ends the job through the op that meets it (next_rendezvous, num_nodes_waiting,
// exit 1 from dagsim launch), never as an error out of a shutdown or a keep-alive fiber.
bool is_rendezvous_error(const Error& e) {
  switch (e.code()) {
    case ErrorCode::rendezvous_closed:
    case ErrorCode::rendezvous_timeout:
    case ErrorCode::rendezvous_graceful_exit:
    case ErrorCode::rendezvous_connection_failed:
    case ErrorCode::protocol_error:
      return true;
    default:
      return false;
  }
}

}  // namespace

RendezvousHandler::RendezvousHandler(runtime::Env& env, store::Store& store, RendezvousSettings settings, NodeDesc node,
                                     RendezvousHandlerOptions options)
    : env_(env),
      settings_(validated(std::move(settings), options)),
      node_(std::move(node)),
      backend_name_(options.backend_name),
      backend_(store, settings_.run_id),
      holder_(backend_, settings_, env_, options.cache_duration),
      executor_(holder_, backend_, node_, env_, options.poll_interval) {}

RendezvousHandler::~RendezvousHandler() {
  // The scope's destruction cancels the keep-alive; see ops_lock_ for what it may still touch.
  keep_alive_scope_.reset();
}

RendezvousInfo RendezvousHandler::next_rendezvous() {
  stop_keep_alive();
  DAGSIM_ASSERT(keep_alive_scope_ == nullptr);
  std::lock_guard guard(*ops_lock_);
  // One deadline for both ops, as PyTorch: leaving the old round counts against the join timeout.
  const TimePoint deadline = env_.clock.now() + settings_.timeout.join;
  join_deadline_ = deadline;
  struct Joined {
    std::optional<TimePoint>& deadline;
    ~Joined() { deadline.reset(); }
  } joined{join_deadline_};
  executor_.run(exit_op, "exit", deadline);
  executor_.run(join_op, "join", deadline);
  const RendezvousState& state = holder_.state();
  // S8: the join op finishes only on a complete round this node is part of.
  DAGSIM_ASSERT(state.complete);
  const auto me = state.participants.find(node_);
  DAGSIM_ASSERT(me != state.participants.end());
  // The round's world at completion, which holds every rank it gave (RendezvousState::world_size).
  const RendezvousInfo info{me->second, state.world_size, state.round};
  // S2: a rank within the world the round formed with.
  DAGSIM_ASSERT(info.rank < info.world_size);
  start_keep_alive(info.round);
  return info;
}

bool RendezvousHandler::is_closed() {
  std::lock_guard guard(*ops_lock_);
  executor_.sync("is_closed", /*use_cache=*/false);
  DAGSIM_ASSERT(!holder_.dirty());
  return holder_.state().closed;
}

void RendezvousHandler::set_closed() {
  std::lock_guard guard(*ops_lock_);
  executor_.run(close_op, "close", env_.clock.now() + settings_.timeout.close);
  // The close op finishes only on a closed state (S7: sticky from here on).
  DAGSIM_ASSERT(holder_.state().closed);
}

uint64_t RendezvousHandler::num_nodes_waiting() {
  std::lock_guard guard(*ops_lock_);
  executor_.sync("num_nodes_waiting", /*use_cache=*/false);
  DAGSIM_ASSERT(!holder_.dirty());
  return rendezvous::num_nodes_waiting(holder_.state());
}

bool RendezvousHandler::shutdown() {
  stop_keep_alive();
  DAGSIM_ASSERT(keep_alive_scope_ == nullptr);
  std::lock_guard guard(*ops_lock_);
  try {
    executor_.run(exit_op, "exit", env_.clock.now() + settings_.timeout.close);
    // The exit op finishes only once this node is out of the participants.
    DAGSIM_ASSERT(!holder_.state().participants.contains(node_));
    return true;
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    if (!is_rendezvous_error(e)) throw;
    DAGSIM_PROBE("rendezvous.shutdown_failed");
    env_.log.event("rendezvous.shutdown_failed", e.what());
    return false;
  }
}

void RendezvousHandler::stop_keep_alive() {
  if (!keep_alive_scope_) return;
  keep_alive_scope_->cancel();
  // Its fiber unwinds at its blocking point; once joined, no heartbeat of the old round can be
  // written after this node moves on.
  keep_alive_scope_->join();
  keep_alive_scope_.reset();
}

void RendezvousHandler::start_keep_alive(uint64_t round) {
  DAGSIM_ASSERT(keep_alive_scope_ == nullptr);
  DAGSIM_ASSERT_EQ(round, holder_.state().round);
  const std::string name = "rendezvous keep-alive " + to_string(node_) + " round " + std::to_string(round);
  keep_alive_scope_ = std::make_unique<runtime::CancelScope>(name, env_.spawner);
  env_.spawner.spawn(*keep_alive_scope_, name, [this, lock = ops_lock_] {
    (void)lock;  // held so the mutex outlives the handler while this fiber unwinds
    keep_alive_loop();
  });
}

// Note [keep-alive due by the heartbeat]: PyTorch's heartbeat job sleeps a fixed interval between
// ops. A heartbeat that a join op meant to write but lost to the completing write (the state
// changed under it, and the node then found itself a participant and finished) then waits a whole
// interval after the round began: with keep-alive 1 s x 2 that is a heartbeat 2 s old, and the
// survivors of a re-rendezvous expired each other in turn. So the next op is due one interval
// after the heartbeat this node last saw of itself in the state (an eighth of an interval at
// least, so a heartbeat that cannot be renewed never makes the loop spin), and a full interval
// when the state holds none.
void RendezvousHandler::keep_alive_loop() {
  for (;;) {
    Duration wait = settings_.keep_alive_interval;
    const auto mine = holder_.state().last_heartbeats.find(node_);
    if (mine != holder_.state().last_heartbeats.end()) {
      const Duration age = env_.clock.wall_now() - mine->second;
      wait = std::clamp(settings_.keep_alive_interval - age, settings_.keep_alive_interval / 8, settings_.keep_alive_interval);
    }
    // Late by half an interval: a node descheduled for a while. Still inside the heartbeat
    // timeout (keep_alive_interval x keep_alive_max_attempt, at least 2 intervals), so legal.
    if (DAGSIM_BUGGIFY("rendezvous.keep_alive_late")) wait += settings_.keep_alive_interval / 2;
    env_.clock.sleep(wait);
    std::lock_guard guard(*ops_lock_);
    try {
      executor_.run(keep_alive_op, "keep-alive", env_.clock.now() + settings_.timeout.heartbeat);
      ++keep_alives_;
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (!is_rendezvous_error(e)) throw;
      DAGSIM_PROBE("rendezvous.keep_alive_failed");
      ++keep_alive_failures_;
      env_.log.event("rendezvous.keep_alive_failed", e.what());
    }
  }
}

}  // namespace dagsim::rendezvous
