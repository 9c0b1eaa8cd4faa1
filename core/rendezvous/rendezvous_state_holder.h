// RendezvousStateHolder: one node's copy of the shared rendezvous state and its token, kept in step
// with the backend, as PyTorch's _BackendRendezvousStateHolder (shared/reference/rendezvous.md §1
// "State holder").
//
// sync():
//  1. Dirty (the node changed its copy): write the copy with the token. If another node wrote
//     first, the write fails and the copy becomes the state that won (re-read in the same call).
//     A write that landed and was decisive for the waiters (is_quiet_change() false against the
//     state the store held at the token, before this node's sanitize) then bumps the changes key
//     (Note [decisive changes] in rendezvous_executor.h).
//  2. Clean: if the copy was synced less than cache_duration ago (the boundary counts as fresh, as
//     in PyTorch), keep it and read nothing; else read the store.
//  3. No state in the store yet: the copy is a fresh empty state with token 0.
//  4. Then sanitize the copy at this node's wall_now (strict expiry, S10): nodes whose heartbeats
//     expired are dropped, and if a participant was among them the epilogue runs, which advances
//     the round when the last participant of a complete round is gone (S6), and a re-rendezvous
//     may be requested (Note [re-rendezvous on expiry]). The dropped nodes are reported
//     (dead_nodes(), and one "rendezvous.dead_nodes" log event per sync that finds some).
//     Sanitizing changes only the copy: the store learns of it with this node's next write.
//
// Threading: the node's fibers. The holder is not safe against two executors interleaving on it;
// the handler serialises its ops (PyTorch's heartbeat lock).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/rendezvous/rendezvous_backend.h"
#include "core/rendezvous/rendezvous_settings.h"
#include "core/rendezvous/rendezvous_state.h"
#include "core/runtime/env.h"

namespace dagsim::rendezvous {

// PyTorch's cache duration: a clean copy younger than this is served without reading the store.
inline constexpr Duration kDefaultCacheDuration = std::chrono::seconds(1);

class RendezvousStateHolder {
 public:
  // REQUIRES: validate(settings) passed; `backend` and `env` outlive this.
  RendezvousStateHolder(RendezvousBackend& backend, const RendezvousSettings& settings, runtime::Env& env,
                        Duration cache_duration = kDefaultCacheDuration);

  // The copy as of the last sync (sanitized), plus this node's unwritten changes while dirty.
  const RendezvousState& state() const { return *state_; }
  Token token() const { return token_; }
  bool dirty() const { return dirty_; }
  const RendezvousSettings& settings() const { return settings_; }

  // See the file comment. Returns whether this node's write landed: nullopt when there was none
  // to make (clean), false when another node's write won. `use_cache` false always reads.
  // Throws rendezvous_connection_failed (store) or protocol_error (corrupt state).
  std::optional<bool> sync(bool use_cache = true);

  // Replaces the copy with `next` (an action applied to it) and marks it dirty: the next sync
  // writes it.
  void update(RendezvousState next);
  // The copy changed in place and must be written (PyTorch's mark_dirty).
  void mark_dirty() { dirty_ = true; }

  // The nodes the last sync's sanitize dropped, in node order.
  const std::vector<NodeDesc>& dead_nodes() const { return dead_nodes_; }
  // How many syncs read or wrote the store, and how many were served from the cache.
  uint64_t store_syncs() const { return store_syncs_; }
  uint64_t cached_syncs() const { return cached_syncs_; }
  // How many of this node's writes bumped the changes key.
  uint64_t announced_changes() const { return announced_changes_; }

 private:
  // Steps 3 and 4: the copy becomes `fetched` (or empty), synced now, sanitized.
  void take(const std::optional<FetchedState>& fetched);

  RendezvousBackend& backend_;
  const RendezvousSettings settings_;
  runtime::Env& env_;
  const Duration cache_duration_;
  // Shared with the backend's decoded-state cache until this node changes it or sanitize drops a
  // node: a wake-up that reads a state costs no copy of it (at 1,000 nodes the copy, not the
  // decode, was most of a wake's cost).
  std::shared_ptr<const RendezvousState> state_;
  // The state as the store holds it at token_, before this node's sanitize: what a write is
  // judged decisive against.
  std::shared_ptr<const RendezvousState> stored_;
  Token token_ = 0;
  bool dirty_ = false;
  std::optional<TimePoint> last_sync_;  // local time (now()) of the last read or write
  std::vector<NodeDesc> dead_nodes_;
  uint64_t store_syncs_ = 0;
  uint64_t cached_syncs_ = 0;
  uint64_t announced_changes_ = 0;
};

}  // namespace dagsim::rendezvous
