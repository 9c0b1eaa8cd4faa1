#include "core/rendezvous/rendezvous_executor.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::rendezvous {

RendezvousExecutor::RendezvousExecutor(RendezvousStateHolder& holder, RendezvousBackend& backend, NodeDesc node,
                                       runtime::Env& env, Duration poll_interval)
    : holder_(holder), backend_(backend), node_(std::move(node)), env_(env), poll_interval_(poll_interval) {
  DAGSIM_ASSERT(poll_interval_ >= Duration::zero());
}

std::string RendezvousExecutor::where(std::string_view op_name) const {
  return "rendezvous run " + printable(holder_.settings().run_id, 80) + ", round " +
         std::to_string(holder_.state().round) + ", node " + to_string(node_) + ", " + std::string(op_name) + " op";
}

void RendezvousExecutor::sync(std::string_view op_name, bool use_cache) {
  try {
    holder_.sync(use_cache);
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    if (e.code() != ErrorCode::rendezvous_connection_failed && e.code() != ErrorCode::protocol_error) throw;
    throw Error(e.code(), where(op_name) + ": " + e.detail());
  }
}

void RendezvousExecutor::run(RendezvousOp op, std::string_view op_name, TimePoint deadline) {
  const RendezvousSettings& settings = holder_.settings();
  for (;;) {
    sync(op_name, /*use_cache=*/true);
    const ClockReading clock{env_.clock.now(), env_.clock.wall_now()};
    const Action action = op(holder_.state(), node_, settings, clock, deadline);
    switch (action) {
      case Action::finish:
        return;
      case Action::error_closed:
        throw errors::rendezvous_closed(where(op_name) + ": the rendezvous is closed to new members");
      case Action::error_timeout:
        throw errors::rendezvous_timeout(where(op_name) + ": its deadline passed " +
                                         describe(clock.now - deadline) + " ago; state: " + to_string(holder_.state()));
      case Action::error_graceful_exit:
        throw errors::rendezvous_graceful_exit(where(op_name) +
                                               ": the rendezvous closed while this node was a spare (redundancy list)");
      case Action::sync:
        wait_after_sync(op_name, deadline);
        break;
      default:
        DAGSIM_ASSERT(changes_state(action));
        holder_.update(apply(holder_.state(), action, node_, settings, clock.wall_now));
        ++actions_applied_;
        // PyTorch's update_deadline: a spare that leaves the redundancy list starts its join
        // afresh, its time as a spare not counted against it (L3).
        if (action == Action::remove_from_redundancy_list) deadline = clock.now + settings.timeout.join;
        break;
    }
  }
}

TimePoint RendezvousExecutor::next_transition(const RendezvousState& state, const NodeDesc& node,
                                              const RendezvousSettings& settings, ClockReading clock,
                                              TimePoint deadline) {
  constexpr Duration kJustAfter{1};  // the ops and sanitize compare strictly (`>`, `<`)
  TimePoint bound = TimePoint::max();
  // A deadline already past bounds nothing: an op that still decides SYNC after it is a redundant
  // node, which waits on the full round for as long as it stays full (L3); waking it at once would
  // poll the store every kMinSyncWait.
  if (deadline != TimePoint::max() && deadline + kJustAfter > clock.now) bound = deadline + kJustAfter;
  // Wall-time instants strictly ahead of this node's wall clock, moved onto its local time line.
  auto consider_wall = [&](TimePoint wall) {
    if (wall <= clock.wall_now) return;
    bound = std::min(bound, clock.now + (wall - clock.wall_now));
  };
  if (const auto mine = state.last_heartbeats.find(node); mine != state.last_heartbeats.end()) {
    consider_wall(mine->second + settings.keep_alive_interval);  // should_keep_alive is `<=`
  }
  if (state.deadline) consider_wall(*state.deadline + kJustAfter);
  if (!state.last_heartbeats.empty()) {
    TimePoint oldest = TimePoint::max();
    for (const auto& [other, beat] : state.last_heartbeats) oldest = std::min(oldest, beat);
    consider_wall(oldest + settings.expiry() + kJustAfter);
  }
  return bound;
}

void RendezvousExecutor::wait_after_sync(std::string_view op_name, TimePoint deadline) {
  ++sync_waits_;
  if (poll_interval_ > Duration::zero()) {
    env_.clock.sleep(poll_interval_);  // PyTorch's _delay(1), for comparison
    return;
  }
  // See Note [event-driven SYNC].
  const ClockReading clock{env_.clock.now(), env_.clock.wall_now()};
  const TimePoint bound = next_transition(holder_.state(), node_, holder_.settings(), clock, deadline);
  const Duration store_timeout = backend_.store().timeout();
  Duration wait = bound == TimePoint::max() ? store_timeout : bound - clock.now;
  wait = std::clamp(wait, kMinSyncWait, std::max(kMinSyncWait, store_timeout));
  FetchedState fetched;
  try {
    fetched = backend_.watch(holder_.token(), wait);
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    if (e.code() != ErrorCode::rendezvous_connection_failed && e.code() != ErrorCode::protocol_error) throw;
    throw Error(e.code(), where(op_name) + ", waiting for a change: " + e.detail());
  }
  holder_.adopt(fetched);
}

}  // namespace dagsim::rendezvous
