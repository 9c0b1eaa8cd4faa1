#include "core/rendezvous/rendezvous_executor.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/probe.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/base/prng.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::rendezvous {

namespace {

// FNV-1a of the node's name: a jitter seed every standard library computes alike (std::hash does not).
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

}  // namespace

RendezvousExecutor::RendezvousExecutor(RendezvousStateHolder& holder, RendezvousBackend& backend, NodeDesc node,
                                       runtime::Env& env, Duration poll_interval)
    : holder_(holder),
      backend_(backend),
      node_(std::move(node)),
      env_(env),
      poll_interval_(poll_interval),
      jitter_seed_(name_hash(to_string(node_))) {
  DAGSIM_ASSERT(poll_interval_ >= Duration::zero());
}

std::string RendezvousExecutor::where(std::string_view op_name) const {
  return "rendezvous run " + printable(holder_.settings().run_id, 80) + ", round " +
         std::to_string(holder_.state().round) + ", node " + to_string(node_) + ", " + std::string(op_name) + " op";
}

template <typename F>
auto RendezvousExecutor::named(std::string_view op_name, const char* doing, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    if (e.code() != ErrorCode::rendezvous_connection_failed && e.code() != ErrorCode::protocol_error) throw;
    throw Error(e.code(), where(op_name) + doing + ": " + e.detail());
  }
}

std::optional<bool> RendezvousExecutor::sync(std::string_view op_name, bool use_cache) {
  return named(op_name, "", [&] { return holder_.sync(use_cache); });
}

void RendezvousExecutor::run(RendezvousOp op, std::string_view op_name, TimePoint deadline) {
  const RendezvousSettings& settings = holder_.settings();
  // Races and wake-ups of an earlier op say nothing about this one's.
  lost_races_ = 0;
  woken_by_change_ = false;
  bool backed_off = false;  // since the last lost race; the read after it must be fresh
  for (;;) {
    const TimePoint sent = env_.clock.now();
    const uint64_t store_syncs = holder_.store_syncs();
    const std::optional<bool> written = sync(op_name, /*use_cache=*/!backed_off && !fresh_read_);
    // A sync leaves nothing unwritten: the decision below is made on the state the store holds.
    DAGSIM_ASSERT(!holder_.dirty());
    fresh_read_ = false;
    // A read or a write is one round trip to the store: the scale of Note [contention at scale].
    if (holder_.store_syncs() != store_syncs) observe_round_trip(env_.clock.now() - sent);
    if (written) {
      lost_races_ = *written ? 0 : lost_races_ + 1;
      backed_off = false;
    }
    const ClockReading clock{env_.clock.now(), env_.clock.wall_now()};
    const Action action = op(holder_.state(), node_, settings, clock, deadline);
    switch (action) {
      case Action::finish:
        return;
      case Action::error_closed:
        throw errors::rendezvous_closed(where(op_name) + ": the rendezvous is closed to new members");
      case Action::error_timeout:
        DAGSIM_PROBE("rendezvous.op_timed_out");
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
        woken_by_change_ = false;
        // After a lost race: back off, then decide again on a fresh read (a decision made before
        // the back-off would carry a token the others' writes meanwhile made stale).
        if (lost_races_ > 0 && !backed_off && back_off(deadline)) {
          backed_off = true;
          break;
        }
        holder_.update(apply(holder_.state(), action, node_, settings, clock.wall_now));
        DAGSIM_ASSERT(holder_.dirty());
        ++actions_applied_;
        // PyTorch's update_deadline: a spare that leaves the redundancy list starts its join
        // afresh, its time as a spare not counted against it (L3).
        if (action == Action::remove_from_redundancy_list) {
          DAGSIM_PROBE("rendezvous.spare_deadline_reset");
          deadline = clock.now + settings.timeout.join;
        }
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
  // Every bound is strictly ahead: a wait until it never returns at once and spins.
  DAGSIM_ASSERT(bound > clock.now);
  return bound;
}

void RendezvousExecutor::observe_round_trip(Duration sample) {
  DAGSIM_ASSERT(sample >= Duration::zero());
  round_trip_samples_[round_trip_next_] = sample;
  round_trip_next_ = (round_trip_next_ + 1) % kRoundTripSamples;
  // Slots not yet written hold zero and are skipped: the least of the samples taken so far.
  Duration least = Duration::max();
  for (const Duration d : round_trip_samples_) {
    if (d > Duration::zero()) least = std::min(least, d);
  }
  round_trip_ = least == Duration::max() ? sample : std::min(sample, least * kRoundTripOutlier);
  DAGSIM_ASSERT(round_trip_ <= sample && round_trip_ >= Duration::zero());
}

bool RendezvousExecutor::back_off(TimePoint deadline) {
  // The first loss retries at once, as PyTorch: with few contenders it is the next winner.
  if (round_trip_ <= Duration::zero() || lost_races_ < 2) return false;
  const uint32_t doublings = std::min(lost_races_ - 2, kMaxBackoffDoublings);
  const uint64_t contenders = std::max<uint64_t>(2, holder_.state().last_heartbeats.size());
  const auto rtt = static_cast<uint64_t>(round_trip_.count());
  const uint64_t window = std::min(rtt << doublings, rtt * contenders);
  // At least one round trip (no shift or product wrapped): the next winner has time to write.
  DAGSIM_ASSERT(window >= rtt);
  Prng jitter(jitter_seed_ ^ (holder_.token() * 0x9e3779b97f4a7c15ULL) ^ lost_races_);
  const Duration pause{static_cast<int64_t>(jitter.uniform_u64(window + 1))};
  DAGSIM_ASSERT(pause.count() >= 0 && static_cast<uint64_t>(pause.count()) <= window);
  const TimePoint now = env_.clock.now();
  if (pause <= Duration::zero() || now >= deadline) return false;
  DAGSIM_PROBE("rendezvous.backed_off_after_lost_races");
  ++backoffs_;
  env_.clock.sleep_until(std::min(now + pause, deadline));
  return true;
}

void RendezvousExecutor::wait_after_sync(std::string_view op_name, TimePoint deadline) {
  if (poll_interval_ > Duration::zero()) {
    ++sync_waits_;
    env_.clock.sleep(poll_interval_);  // PyTorch's _delay(1), for comparison
    return;
  }
  // See Note [event-driven SYNC]. The changes key's version comes first, then the state it
  // guards (Note [decisive changes]): a node's first wait reads it and decides again.
  if (!changes_) {
    changes_ = named(op_name, ", reading the changes", [&] { return backend_.changes_version(); });
    fresh_read_ = true;
    return;
  }
  ++sync_waits_;
  ClockReading clock{env_.clock.now(), env_.clock.wall_now()};
  const TimePoint bound = next_transition(holder_.state(), node_, holder_.settings(), clock, deadline);
  if (woken_by_change_ && round_trip_ > Duration::zero()) {
    // The last change left the decision at SYNC: Note [contention at scale].
    const uint64_t nodes = holder_.state().last_heartbeats.size();
    const Duration hold_off = std::min<Duration>(kMaxSyncHoldOff, round_trip_ * static_cast<int64_t>(nodes) /
                                                                      static_cast<int64_t>(kHoldOffNodesPerRtt));
    if (hold_off > Duration::zero() && clock.now + hold_off < bound) {
      DAGSIM_PROBE("rendezvous.sync_held_off_after_change");
      ++hold_offs_;
      env_.clock.sleep(hold_off);
      clock = ClockReading{env_.clock.now(), env_.clock.wall_now()};
    }
  }
  const Duration store_timeout = backend_.store().timeout();
  Duration wait = bound == TimePoint::max() ? store_timeout : bound - clock.now;
  wait = std::clamp(wait, kMinSyncWait, std::max(kMinSyncWait, store_timeout));
  DAGSIM_ASSERT(wait >= kMinSyncWait);
  const uint64_t changes =
      named(op_name, ", waiting for a change", [&] { return backend_.watch_changes(*changes_, wait); });
  woken_by_change_ = changes != *changes_;
  changes_ = changes;
  fresh_read_ = true;
}

}  // namespace dagsim::rendezvous
