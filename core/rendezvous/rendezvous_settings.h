// RendezvousSettings: what every node of one rendezvous must agree on (PyTorch's
// RendezvousSettings and RendezvousTimeout, shared/reference/rendezvous.md §1 "Types and
// settings"), with PyTorch's defaults, and validate(), which refuses what PyTorch refuses with
// PyTorch's words.
//
// Durations are runtime::Duration. The op timeouts (join, close, heartbeat) and the rollback
// window are measured on a node's local Clock::now(); last_call and the keep-alive interval are
// added to and compared with Clock::wall_now() readings, because they end up in, or are compared
// with, timestamps in the shared state that other nodes read (Note [two times] in
// core/runtime/clock.h).
//
// One addition beyond PyTorch: rerendezvous_on_expiry (on by default), see
// Note [re-rendezvous on expiry] in rendezvous_state.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/runtime/clock.h"

namespace dagsim::rendezvous {

using runtime::Duration;
using runtime::TimePoint;

// How many nodes one list of the state may hold. It bounds what a decoded state may claim (so a
// corrupt blob cannot make a node allocate without limit) and so bounds max_nodes too. PyTorch
// measured states of 10,000 machines; the benchmarks go to 1,000.
inline constexpr uint32_t kMaxRendezvousNodes = 1u << 16;
// The longest run id: it names the state key, which every store request carries (PyTorch sets no
// bound; a 100,000-byte run id made every request too large for the store and nobody joined).
inline constexpr size_t kMaxRunIdBytes = 256;

// PyTorch's RendezvousTimeout and its defaults.
struct RendezvousTimeout {
  Duration join = std::chrono::seconds(600);      // next_rendezvous: the exit and join ops together
  Duration last_call = std::chrono::seconds(30);  // from the min-th join to completion (wall time)
  Duration close = std::chrono::seconds(30);      // set_closed: the close op
  Duration heartbeat = std::chrono::seconds(5);   // one keep-alive op
};

// After a join op's deadline a node may still, for this long, take itself out of the participants
// or the wait list before it reports the timeout. PyTorch hard-codes 5 s (rollback_period).
inline constexpr Duration kRollbackPeriod = std::chrono::seconds(5);

struct RendezvousSettings {
  std::string run_id;
  uint32_t min_nodes = 1;
  uint32_t max_nodes = 1;
  RendezvousTimeout timeout = {};
  // A node writes its heartbeat when its last one is at least this old; it is dead when its last
  // one is older than keep_alive_interval * keep_alive_max_attempt (15 s by default).
  Duration keep_alive_interval = std::chrono::seconds(5);
  uint32_t keep_alive_max_attempt = 3;
  // Beyond PyTorch (issue 11 item 4, PyTorch #111646): a participant of a complete round whose
  // heartbeat expires makes the survivors re-rendezvous. False gives PyTorch's behaviour: it is
  // dropped silently and the round goes on without it.
  bool rerendezvous_on_expiry = true;

  // How long without a heartbeat makes a node dead: keep_alive_interval * keep_alive_max_attempt.
  // REQUIRES: validate(*this) passed (so the product does not overflow).
  Duration expiry() const;

  friend bool operator==(const RendezvousSettings&, const RendezvousSettings&) = default;
};

// Throws invalid_argument, with PyTorch's messages where PyTorch has them, for an empty run_id or
// one past kMaxRunIdBytes, min_nodes < 1, max_nodes < min_nodes, max_nodes above kMaxRendezvousNodes, a timeout or
// keep-alive interval that is not positive, keep_alive_max_attempt < 1, or an expiry too long to
// represent.
void validate(const RendezvousSettings& settings);

// "600s", "250ms", "1500000ns": durations as a person reads them in messages (exact, never rounded).
std::string describe(Duration d);

}  // namespace dagsim::rendezvous
