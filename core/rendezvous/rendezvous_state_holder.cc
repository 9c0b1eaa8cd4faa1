#include "core/rendezvous/rendezvous_state_holder.h"

#include "core/base/assert.h"
#include "core/base/probe.h"
#include "core/base/printable.h"

namespace dagsim::rendezvous {

RendezvousStateHolder::RendezvousStateHolder(RendezvousBackend& backend, const RendezvousSettings& settings,
                                             runtime::Env& env, Duration cache_duration)
    : backend_(backend),
      settings_(settings),
      env_(env),
      cache_duration_(cache_duration),
      state_(std::make_shared<const RendezvousState>()),
      stored_(state_) {
  DAGSIM_ASSERT(cache_duration_ >= Duration::zero());
  DAGSIM_ASSERT(backend_.run_id() == settings_.run_id);
}

std::optional<bool> RendezvousStateHolder::sync(bool use_cache) {
  if (dirty_) {
    // Write what this node decided. A lost race hands back the winner's state, which the caller
    // decides on afresh at once (PyTorch retries with no back-off; so do we: the loser learns the
    // new state in the same round trip).
    const std::shared_ptr<const RendezvousState> before = stored_;
    const std::shared_ptr<const RendezvousState> mine = state_;
    const Token token_before = token_;
    SetStateOutcome outcome = backend_.set_state(state_, token_);
    ++store_syncs_;
    take(outcome.current);
    if (!outcome.written) DAGSIM_PROBE("rendezvous.lost_cas");
    // Paired with the backend's check of the store's answer: a write that landed moved the token
    // past the one it replaced (a lost write may see any token, a restarted store's included).
    if (outcome.written) DAGSIM_ASSERT(token_ > token_before);
    DAGSIM_ASSERT(!dirty_);
    if (outcome.written && !is_quiet_change(*before, *mine)) {
      backend_.announce_change();
      ++announced_changes_;
    }
    return outcome.written;
  }
  const TimePoint now = env_.clock.now();
  // The boundary counts as fresh (PyTorch's `last_sync >= now - cache`), see reference §1
  // "Simulator trap": a 1 s poll with a 1 s cache reads the store every 2 s.
  if (use_cache && cache_duration_ > Duration::zero() && last_sync_ && *last_sync_ >= now - cache_duration_) {
    DAGSIM_ASSERT(!dirty_);
    ++cached_syncs_;
    return std::nullopt;
  }
  std::optional<FetchedState> fetched = backend_.get_state();
  ++store_syncs_;
  take(fetched);
  DAGSIM_ASSERT(!dirty_);
  return std::nullopt;
}

void RendezvousStateHolder::update(RendezvousState next) {
  // An action never takes a round back nor reopens a closed rendezvous (S6, S7): only a store
  // that lost its state does, and that comes in through take(), never here.
  DAGSIM_ASSERT(next.round >= state_->round);
  if (state_->closed) DAGSIM_ASSERT(next.closed);
  state_ = std::make_shared<const RendezvousState>(std::move(next));
  dirty_ = true;
}

void RendezvousStateHolder::take(const std::optional<FetchedState>& fetched) {
  static const std::shared_ptr<const RendezvousState> empty = std::make_shared<const RendezvousState>();
  if (fetched) {
    DAGSIM_ASSERT(fetched->state != nullptr);
    // Version 0 is a missing key, which decodes to the empty state and nothing else.
    if (fetched->token == 0) DAGSIM_ASSERT(fetched->state->participants.empty() && fetched->state->round == 0);
    state_ = fetched->state;
    token_ = fetched->token;
  } else {
    // The store holds no state while this node held one: the store restarted empty (or a
    // backend's key expired), and the round falls back to 0 (S6's caveat).
    if (token_ != 0) DAGSIM_PROBE("rendezvous.state_lost_by_store");
    state_ = empty;
    token_ = 0;
  }
  stored_ = state_;
  dirty_ = false;
  last_sync_ = env_.clock.now();
  // Sanitize with this node's wall clock: heartbeats are other nodes' wall_now() stamps, so skew
  // between the nodes shifts when this node sees them expire (reference §1, `_sanitize`). Only a
  // state with an expired heartbeat is copied to be sanitized; sanitize() leaves any other as it is.
  const TimePoint wall_now = env_.clock.wall_now();
  const TimePoint expire_time = wall_now - settings_.expiry();
  bool any_expired = false;
  for (const auto& [node, last] : state_->last_heartbeats) any_expired = any_expired || last < expire_time;
  dead_nodes_.clear();
  if (any_expired) {
    state_ = std::make_shared<const RendezvousState>(sanitize(*state_, settings_, wall_now, &dead_nodes_));
    DAGSIM_ASSERT(!dead_nodes_.empty());
  }
  // Sanitize only removes nodes: it may advance the round (the last participant expired) but
  // never takes it back, and it leaves `closed` as the store holds it.
  DAGSIM_ASSERT(state_->round >= stored_->round);
  DAGSIM_ASSERT_EQ(state_->closed, stored_->closed);
  if (!dead_nodes_.empty()) {
    std::string detail = "run " + printable(settings_.run_id) + " round " + std::to_string(state_->round) + " seen by " +
                         env_.name + ":";
    for (const NodeDesc& node : dead_nodes_) detail += " " + printable(to_string(node));
    env_.log.event("rendezvous.dead_nodes", detail);
  }
}

}  // namespace dagsim::rendezvous
