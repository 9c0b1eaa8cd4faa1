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
// latency). Here a SYNC watches the changes key (Note [decisive changes]) from the version read
// before the state the decision was made on (Store::watch_at_most): a decisive write by any node
// wakes every waiter at once, and changes made while a waiter was away come back as one answer.
// The waiter then reads the state afresh (a delta from the version it holds: store_service.h) and
// decides again. A decision can also change with no write at all, as time passes, so the watch is
// bounded by the earliest of:
//  - the op's own deadline (local time): past it the op times out or rolls back;
//  - this node's next heartbeat (its last heartbeat + keep_alive_interval, wall time);
//  - the last-call deadline in the state (wall time): the round may then complete;
//  - the earliest heartbeat expiry of any node (wall time): sanitize then drops it;
// and by the store's timeout. Wall-time instants are turned into local ones by this node's
// current offset between its two clocks; a wake-up a little early (drift) just decides SYNC again
// and waits the rest. With poll_interval > 0 the executor instead sleeps poll_interval after each
// SYNC, PyTorch's fixed polling, kept for side-by-side comparison.
//
// Note [decisive changes]
// ~~~~~~~~~~~~~~~~~~~~~~~
// At 1,000 nodes every join woke every waiter, which read the state (100 KB) and went back to
// SYNC: 42,000 wake-ups and 2.4 GB of replies to form one round, for nothing a waiter could act on.
// A waiter at SYNC decides differently only when the round, completion, the close, the last-call
// deadline, a rank or a list's departures change, not when nodes join below max_nodes or beat
// (is_quiet_change() in rendezvous_state.h). So a node whose write landed and was not quiet bumps
// a second key, the changes key (RendezvousBackend::announce_change, one `add`), and waiters watch
// that key instead of the state. As a seqlock: a waiter reads the changes key's version before it
// reads the state it decides on, so a decisive write it did not see in that state bumps the key
// after the version it watches from, and the watch returns at once. A writer that dies between
// its write and the bump leaves the waiters to their time bounds (their own keep-alive, at most
// keep_alive_interval away, reads the state again).
//
// Note [contention at scale]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every write rewrites the whole state (O(N) bytes at N nodes), and one key serialises them all.
// With no care two costs grow as N^2 state reads (bench/bm_rendezvous.cc: 256 nodes took seconds
// of simulation, 1,000 minutes): N joiners racing for one compare-and-set lose N^2/2 times, and N
// waiters woken by each of N joins read the state N^2/2 times. So, scaled by the round trip this
// node last measured to the store (zero in a zero-latency world, where nothing changes), but never
// more than kRoundTripOutlier times the least of its last kRoundTripSamples: a round trip that
// spans a pause of the store is no measure of how fast the others write (the property test found
// a node whose one 2.5 s sample, taken across a store pause, made it back off for 17 s, past a
// close it owed the world within 2.5 s). Below the cap the last sample stands, queueing included:
// scaling by the least alone cost the 1,000-node spread formation 300 ms more, its back-offs short:
//  - the first lost race retries at once (as PyTorch); after the k-th in a row (k >= 2) the node
//    waits a back-off, uniform in [0, rtt * 2^(k-2)] (doubling up to 2^kMaxBackoffDoublings, and
//    never past rtt * the nodes in the state: the time the other contenders need to write once
//    each; a node asleep longer only learns late of what happened, a close say: the property test
//    found a waiter among 46 nodes 2.7 s late), then reads the state afresh and decides again (a decision from
//    before the back-off would carry a token the others' writes made stale meanwhile). The draw
//    comes from a generator seeded by this node's name, the winner's token and the loss count:
//    deterministic, and the node's Random stream is left alone. Binary exponential back-off, as
//    Ethernet's: the store sees a few attempts per round trip instead of all N;
//  - a waiter woken by a change that left its decision at SYNC holds off before watching again,
//    for rtt * (nodes in the state) / kHoldOffNodesPerRtt, at most kMaxSyncHoldOff; the writes
//    meanwhile come back as one answer. A waiter so sees a decisive write up to that late (a
//    round trip per 16 nodes, 100 ms at most, against PyTorch's 1-2 s poll), and its wake-ups cost
//    in proportion to time, not to the number of writes.
// PyTorch retries at once and polls; both changes only space requests out, never skip a decision.
//
// Threading: the node's fibers; one op at a time per holder (the handler serialises them).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/rendezvous/rendezvous_ops.h"
#include "core/rendezvous/rendezvous_state_holder.h"

namespace dagsim::rendezvous {

// The shortest event-driven wait: a bound that clock drift left a hair in the future is waited
// out whole rather than in ever smaller steps.
inline constexpr Duration kMinSyncWait = std::chrono::milliseconds(1);

// See Note [contention at scale].
inline constexpr uint32_t kMaxBackoffDoublings = 10;
inline constexpr uint64_t kHoldOffNodesPerRtt = 16;
inline constexpr Duration kMaxSyncHoldOff = std::chrono::milliseconds(100);
// The round trip the back-off and the hold-off scale by: the last sample, at most kRoundTripOutlier
// times the least of the last kRoundTripSamples (Note [contention at scale]).
inline constexpr size_t kRoundTripSamples = 4;
inline constexpr int64_t kRoundTripOutlier = 4;

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
  // Returns the holder's answer: whether this node's write landed, nullopt when it made none.
  std::optional<bool> sync(std::string_view op_name, bool use_cache);

  const NodeDesc& node() const { return node_; }
  Duration poll_interval() const { return poll_interval_; }
  // How many SYNC waits ended (by a change, a bound or a poll) and how many states were applied.
  uint64_t sync_waits() const { return sync_waits_; }
  uint64_t actions_applied() const { return actions_applied_; }
  // Back-offs after lost races and hold-offs after wake-ups that changed no decision (Note
  // [contention at scale]).
  uint64_t backoffs() const { return backoffs_; }
  uint64_t hold_offs() const { return hold_offs_; }

  // The local instant at which a decision on `state` may change with no write (see the Note),
  // bounded by `deadline` + 1 ns; TimePoint::max() when nothing would change it.
  static TimePoint next_transition(const RendezvousState& state, const NodeDesc& node,
                                   const RendezvousSettings& settings, ClockReading clock, TimePoint deadline);

 private:
  // Waits after a SYNC decision: a bounded watch, or a poll. Returns with the next sync to read
  // the store afresh (fresh_read_) when the watch needs a changes version read first.
  void wait_after_sync(std::string_view op_name, TimePoint deadline);
  // Runs a backend call on behalf of `op_name`, naming the run, round, node and op (`doing`) in
  // its store errors, as sync() does.
  template <typename F>
  auto named(std::string_view op_name, const char* doing, F&& call) -> decltype(call());
  // Sleeps the back-off that follows a lost race, never past `deadline`; false if it did not sleep
  // at all (a zero-latency world: the write goes at once, as PyTorch's).
  bool back_off(TimePoint deadline);
  // Takes one store round trip into round_trip_ (Note [contention at scale]).
  void observe_round_trip(Duration sample);
  // "rendezvous run job, round 3, node worker1_0_0, join op"
  std::string where(std::string_view op_name) const;

  RendezvousStateHolder& holder_;
  RendezvousBackend& backend_;
  const NodeDesc node_;
  runtime::Env& env_;
  const Duration poll_interval_;
  uint64_t sync_waits_ = 0;
  uint64_t actions_applied_ = 0;
  // Note [contention at scale]: the store's round trip, the last sample capped by the least of the
  // last kRoundTripSamples (round_trip_samples_, a ring; zero where none yet); races lost in a row;
  // whether the last wait was ended by a change that has not (yet) led to an action.
  std::array<Duration, kRoundTripSamples> round_trip_samples_{};
  size_t round_trip_next_ = 0;
  Duration round_trip_ = Duration::zero();
  uint32_t lost_races_ = 0;
  bool woken_by_change_ = false;
  // Note [decisive changes]: the changes key's version, read before every state this node has
  // decided on since; none until the first SYNC. fresh_read_: the next sync must read the store
  // (the state must be newer than changes_).
  std::optional<uint64_t> changes_;
  bool fresh_read_ = false;
  const uint64_t jitter_seed_;
  uint64_t backoffs_ = 0;
  uint64_t hold_offs_ = 0;
};

}  // namespace dagsim::rendezvous
