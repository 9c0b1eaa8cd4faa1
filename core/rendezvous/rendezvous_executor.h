// RendezvousExecutor: the loop that runs one rendezvous op to its end on one node, as PyTorch's
// _DistributedRendezvousOpExecutor.run (shared/reference/rendezvous.md §1 "Executor"):
//
//   loop: sync the state holder; decide the next Action with the pure op (rendezvous_ops.h);
//     FINISH                  return;
//     ERROR_CLOSED            throw rendezvous_closed;
//     ERROR_TIMEOUT           throw rendezvous_timeout;
//     ERROR_GRACEFUL_EXIT     throw rendezvous_graceful_exit (a spare found the rendezvous closed);
//     SYNC                    wait (below), then loop;
//     anything else           apply it to the copy and mark it dirty (the next sync writes it; a
//                             lost race re-decides at once on the winner's state). Leaving the
//                             redundancy list resets the op's deadline to now + join timeout
//                             (PyTorch's update_deadline), so a spare that finally gets a seat has
//                             its full join timeout to form the round (L3).
//
// Every error names the run, the round, the node and the op. A store that fails becomes
// rendezvous_connection_failed with those names added.
//
// Note [event-driven SYNC]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch sleeps 1 s after every SYNC and re-reads (behind a 1 s cache, so every 2 s at zero
// latency). Here a SYNC watches the state key from the token the decision was made on
// (Store::watch_at_most): any write by any node wakes every waiter at once, and writes made while
// a waiter was away come back as one answer, the newest state (coalesced). The watch's answer is
// adopted as a sync, so waking costs no second read. A decision can also change with no write at
// all, as time passes, so the watch is bounded by the earliest of:
//  - the op's own deadline (local time): past it the op times out or rolls back;
//  - this node's next heartbeat (its last heartbeat + keep_alive_interval, wall time);
//  - the last-call deadline in the state (wall time): the round may then complete;
//  - the earliest heartbeat expiry of any node (wall time): sanitize then drops it;
// and by the store's timeout. Wall-time instants are turned into local ones by this node's
// current offset between its two clocks; a wake-up a little early (drift) just decides SYNC again
// and waits the rest. With poll_interval > 0 the executor instead sleeps poll_interval after each
// SYNC, PyTorch's fixed polling, kept for side-by-side comparison.
//
// Threading: the node's fibers; one op at a time per holder (the handler serialises them).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/rendezvous/rendezvous_ops.h"
#include "core/rendezvous/rendezvous_state_holder.h"

namespace dagsim::rendezvous {

// The shortest event-driven wait: a bound that clock drift left a hair in the future is waited
// out whole rather than in ever smaller steps.
inline constexpr Duration kMinSyncWait = std::chrono::milliseconds(1);

class RendezvousExecutor {
 public:
  // `poll_interval` 0: event-driven (Note [event-driven SYNC]); > 0: PyTorch's fixed polling.
  // REQUIRES: everything referenced outlives this; poll_interval >= 0.
  RendezvousExecutor(RendezvousStateHolder& holder, RendezvousBackend& backend, NodeDesc node, runtime::Env& env,
                     Duration poll_interval = Duration::zero());

  // Runs `op` until it decides FINISH. `op_name` ("join", "exit", ...) is for messages.
  // Throws rendezvous_closed, rendezvous_timeout, rendezvous_graceful_exit (the op's errors),
  // rendezvous_connection_failed (the store), protocol_error (a corrupt state); node_killed and
  // cancelled unwind untouched.
  void run(RendezvousOp op, std::string_view op_name, TimePoint deadline);

  // A sync on behalf of `op_name` ("is_closed", ...), with the same error naming as run().
  void sync(std::string_view op_name, bool use_cache);

  const NodeDesc& node() const { return node_; }
  Duration poll_interval() const { return poll_interval_; }
  // How many SYNC waits ended (by a change, a bound or a poll) and how many states were applied.
  uint64_t sync_waits() const { return sync_waits_; }
  uint64_t actions_applied() const { return actions_applied_; }

  // The local instant at which a decision on `state` may change with no write (see the Note),
  // bounded by `deadline` + 1 ns; TimePoint::max() when nothing would change it.
  static TimePoint next_transition(const RendezvousState& state, const NodeDesc& node,
                                   const RendezvousSettings& settings, ClockReading clock, TimePoint deadline);

 private:
  // Waits after a SYNC decision: a bounded watch, or a poll.
  void wait_after_sync(std::string_view op_name, TimePoint deadline);
  // "rendezvous run job, round 3, node worker1_0_0, join op"
  std::string where(std::string_view op_name) const;

  RendezvousStateHolder& holder_;
  RendezvousBackend& backend_;
  const NodeDesc node_;
  runtime::Env& env_;
  const Duration poll_interval_;
  uint64_t sync_waits_ = 0;
  uint64_t actions_applied_ = 0;
};

}  // namespace dagsim::rendezvous
