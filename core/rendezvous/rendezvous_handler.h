// RendezvousHandler: one node's side of a dynamic rendezvous, as PyTorch's DynamicRendezvousHandler
// (shared/reference/rendezvous.md §1 "Handler"): what the elastic agent calls.
//
//  - next_rendezvous(): stops this node's keep-alive, then, within the join timeout, runs the exit
//    op (leave the previous round) and the join op; returns this node's rank, the world size and
//    the round, and starts the keep-alive for that round. Only returns with the synced state
//    complete and this node a participant (S8).
//  - is_closed(), num_nodes_waiting(): a sync that always reads the store (never the cache), then
//    the state's `closed` and the pure num_nodes_waiting() (|wait_list|, plus one while a
//    re-rendezvous is requested: Note [re-rendezvous on expiry]).
//  - set_closed(): the close op within the close timeout.
//  - shutdown(): stops the keep-alive and runs the exit op within the close timeout; false if it
//    failed with a rendezvous error (PyTorch's contract; a corrupt state, protocol_error, counts as
//    one, as PyTorch's RendezvousStateError is a RendezvousError).
//
// The keep-alive: one fiber per round, spawned with the node's Spawner into a CancelScope of its
// own; every keep_alive_interval it runs the keep-alive op (heartbeat timeout). The scope is
// cancelled and joined at the next next_rendezvous() and at shutdown() (cancelled when the handler
// is destroyed), so no keep-alive op of an old round starts after the node moved on; a write already
// in flight is at worst a stale-token write the store refuses or one the next op reads. Its rendezvous errors (a store
// that is down, a corrupt state) are logged ("rendezvous.keep_alive_failed") and it tries again next interval, as
// PyTorch's heartbeat job warns and goes on.
//
// Ops are serialised by one mutex (PyTorch's heartbeat lock), so the keep-alive never interleaves
// with another op on the shared state holder.
//
// No hang: every wait is bounded by an op deadline and the store's timeout, so a store that dies or
// is partitioned away fails each waiter with rendezvous_connection_failed naming the run, round,
// node and op, within about the store's timeout.
//
// Departures from PyTorch:
//  - shutdown() leaves (exit op) instead of closing the rendezvous for every node. PyTorch's close
//    on shutdown is the root of its ClosedError reports (reference §4, #67742, #147064); a node
//    that means to end the job for all calls set_closed().
//  - No random 0-0.3 s delay before round 0: compare-and-set conflicts are retried at once and
//    cost one round trip each, and the delay would spend the node's Random stream.
//  - Waits are event-driven by default (Note [event-driven SYNC] in rendezvous_executor.h).
//  - No per-round PrefixStore or shared TCPStore: RendezvousInfo carries rank, world size and round.
#pragma once

#include <memory>
#include <optional>

#include "core/rendezvous/rendezvous_executor.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/env.h"
#include "core/runtime/mutex.h"
#include "core/store/store.h"

namespace dagsim::rendezvous {

struct RendezvousHandlerOptions {
  // 0: event-driven waits; > 0: PyTorch's fixed polling (1 s there), for comparison.
  Duration poll_interval = Duration::zero();
  Duration cache_duration = kDefaultCacheDuration;
  // What get_backend() says: the name the launcher asked for ("c10d", "etcd-v2", ...). The state's
  // layout is the same on every store.
  std::string backend_name = "c10d";
};

// PyTorch's RendezvousInfo, less the store: this node's place in the round it joined.
struct RendezvousInfo {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint64_t round = 0;
  friend bool operator==(const RendezvousInfo&, const RendezvousInfo&) = default;
};

class RendezvousHandler {
 public:
  // Throws invalid_argument when `settings` do not validate or an option is negative.
  // `env` and `store` outlive this. `node` names this node in the state (its addr, its
  // incarnation as pid, the handler's number within the incarnation as local_id).
  RendezvousHandler(runtime::Env& env, store::Store& store, RendezvousSettings settings, NodeDesc node,
                    RendezvousHandlerOptions options = {});
  ~RendezvousHandler();
  RendezvousHandler(const RendezvousHandler&) = delete;
  RendezvousHandler& operator=(const RendezvousHandler&) = delete;

  // Blocks the calling fiber. Throws rendezvous_closed, rendezvous_timeout,
  // rendezvous_graceful_exit, rendezvous_connection_failed, protocol_error.
  RendezvousInfo next_rendezvous();
  bool is_closed();
  void set_closed();
  uint64_t num_nodes_waiting();
  bool shutdown();

  // PyTorch's get_backend() and get_run_id().
  const std::string& get_backend() const { return backend_name_; }
  const std::string& get_run_id() const { return settings_.run_id; }
  const NodeDesc& node() const { return node_; }
  const RendezvousSettings& settings() const { return settings_; }
  // The state as this node last synced it (for tests and records).
  const RendezvousState& last_state() const { return holder_.state(); }
  // The store version last_state() was read or written as (0: none yet).
  Token last_token() const { return holder_.token(); }
  const RendezvousExecutor& executor() const { return executor_; }
  // The backend's decode count and cache, for benchmarks.
  const RendezvousBackend& backend() const { return backend_; }
  const RendezvousStateHolder& holder() const { return holder_; }
  // Heartbeat ops the keep-alive fiber ran to their end, and how many failed.
  uint64_t keep_alives() const { return keep_alives_; }
  uint64_t keep_alive_failures() const { return keep_alive_failures_; }
  // While next_rendezvous() runs, its deadline (the join timeout from its start); else nullopt.
  // For an operator's "waiting until" line; nothing decides on it.
  const std::optional<TimePoint>& join_deadline() const { return join_deadline_; }

 private:
  void stop_keep_alive();
  void start_keep_alive(uint64_t round);
  void keep_alive_loop();

  runtime::Env& env_;
  const RendezvousSettings settings_;
  const NodeDesc node_;
  const std::string backend_name_;
  RendezvousBackend backend_;
  RendezvousStateHolder holder_;
  RendezvousExecutor executor_;
  // Shared with the keep-alive fiber: if the handler goes while that fiber holds the lock, the
  // fiber unwinds later and must still find the mutex to release.
  std::shared_ptr<runtime::Mutex> ops_lock_ = std::make_shared<runtime::Mutex>();
  uint64_t keep_alives_ = 0;
  uint64_t keep_alive_failures_ = 0;
  std::optional<TimePoint> join_deadline_;
  std::unique_ptr<runtime::CancelScope> keep_alive_scope_;  // the current round's
};

}  // namespace dagsim::rendezvous
