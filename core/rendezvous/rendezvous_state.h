// RendezvousState: the one shared record of a rendezvous, as PyTorch's _RendezvousState keeps it
// (shared/reference/rendezvous.md §1), with its node descriptors, its canonical binary encoding,
// and sanitize(), which drops the nodes whose heartbeats expired.
//
// Promises:
//  - encode() is canonical: equal states give equal bytes (every list is written in node order),
//    and decode() accepts only such bytes, so a store may compare states bytewise.
//  - decode() trusts nothing: every count and length is bounded before anything is allocated, and
//    a short, oversized, out-of-order or self-contradictory state throws protocol_error naming the
//    field; every state structural_violation() objects to is among those refused.
//  - sanitize() and remove_participant_epilogue() are pure: a state in, a state out, no clocks
//    read (the caller passes wall_now), nothing random, no unordered iteration.
//
// Times in the state are Clock::wall_now() readings (Note [two times] in core/runtime/clock.h):
// the last-call deadline and the heartbeats are written by one node and compared by others.
//
// Note [re-rendezvous on expiry]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch drops a participant whose heartbeat expires in a complete round and nothing else
// happens: the survivors train on with a world that no longer exists, and re-form only if some
// node happens to wait (reference §3 L6, PyTorch #111646). With
// RendezvousSettings::rerendezvous_on_expiry (on by default) sanitize() also sets
// `rerendezvous_requested` in that case. num_nodes_waiting() counts the request as one waiting
// node, so every survivor's agent, which already restarts its workers when nodes wait
// (reference §5, "HEALTHY"), restarts them: each exit op removes its node, the last one out
// advances the round (the epilogue, which clears the request), and the survivors form a new
// round. The request is set only while the round is complete and survivors remain; a round that
// lost all its participants advances by itself. With the setting off the flag is never set and
// num_nodes_waiting() is PyTorch's |wait_list| (S9).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/rendezvous/chunked_sorted.h"
#include "core/rendezvous/rendezvous_settings.h"
#include "core/runtime/transport.h"

namespace dagsim::rendezvous {

// The longest node address a decoded state may hold (a DNS name is at most 253 characters).
inline constexpr size_t kMaxNodeAddr = 255;

// A node taking part in rendezvous: PyTorch's _NodeDesc(addr, pid, local_id). In dagsim `addr` is
// the node's name (a host name over TCP, the scenario's name in the simulator), `pid` the node's
// incarnation (a restarted node is a new process, so a new participant), and `local_id` the
// number of the rendezvous handler within that incarnation, from 0.
//
// Nodes order as the tuple (addr, pid, local_id), as PyTorch's `order=True` dataclass does: this
// is the order ranks are assigned in. Strings compare bytewise, which for UTF-8 is Python's code
// point order ("worker10" < "worker2", as in PyTorch).
struct NodeDesc {
  std::string addr;
  uint64_t pid = 0;
  uint64_t local_id = 0;

  friend auto operator<=>(const NodeDesc&, const NodeDesc&) = default;
  friend bool operator==(const NodeDesc&, const NodeDesc&) = default;
};

// "addr_pid_localid", PyTorch's repr.
std::string to_string(const NodeDesc& node);
std::ostream& operator<<(std::ostream& out, const NodeDesc& node);

// The lists are sorted runs of shared chunks (chunked_sorted.h): a copy costs a pointer per 64
// nodes, a change one chunk, and decode() with a base shares every chunk the base already holds,
// so the many versions a simulated cluster's nodes hold cost O(changes) each, not O(nodes).
struct RendezvousState {
  // Rises by exactly 1 when the last participant of a complete round leaves (S6).
  uint64_t round = 0;
  bool complete = false;
  // The last-call deadline (wall time): set when the min-th participant joins, cleared at
  // completion or when the participants fall below min (S4).
  std::optional<TimePoint> deadline;
  bool closed = false;  // sticky (S7)
  // Node -> rank. Every rank is 0 until completion assigns 0..n-1 in node order (S2).
  ChunkedSortedMap<NodeDesc, uint32_t> participants;
  // n at completion (0 while incomplete): the world size next_rendezvous returns. Participants may
  // leave a complete round before a slow (polling) member has seen it complete; that member must
  // still get the round's world, which holds its rank. PyTorch returns len(participants) then, and
  // the property test caught the result: rank 7 of a world of 5.
  uint32_t world_size = 0;
  // Nodes that found the round complete with room to spare: they join the next round.
  ChunkedSortedSet<NodeDesc> wait_list;
  // Nodes that found the round complete and full (max_nodes): hot spares, never counted as
  // waiting (S9). Added by PyTorch in 2024 (#117066).
  ChunkedSortedSet<NodeDesc> redundancy_list;
  // Node -> its last heartbeat (wall time), for every node of the three lists above (S5).
  ChunkedSortedMap<NodeDesc, TimePoint> last_heartbeats;
  // See Note [re-rendezvous on expiry]; never set while the round is incomplete.
  bool rerendezvous_requested = false;

  friend bool operator==(const RendezvousState&, const RendezvousState&) = default;
};

// A one-line description of the whole state, for messages and test failures.
std::string to_string(const RendezvousState& state);
std::ostream& operator<<(std::ostream& out, const RendezvousState& state);

// Whether `after` differs from `before` only by nodes added to the three lists (with their
// heartbeats) and heartbeats moved: a change on which no node waiting at SYNC decides otherwise
// (Note [decisive changes] in rendezvous_executor.h). Everything else is decisive: the round,
// completion, the close, the last-call deadline, the world size, a re-rendezvous request, a rank,
// or any node leaving a list. (Reaching min_nodes sets the deadline and reaching max_nodes
// completes the round, so a join that matters to the waiters changes a field too.)
bool is_quiet_change(const RendezvousState& before, const RendezvousState& after);

// What the agent compares with 0 to decide whether to restart its workers: |wait_list|, plus one
// while a re-rendezvous is requested (Note [re-rendezvous on expiry]).
uint64_t num_nodes_waiting(const RendezvousState& state);

// The first way `state` contradicts itself, or nullopt. It checks what holds for every state the
// protocol generates, whatever the settings: the three lists are pairwise disjoint; the nodes
// with heartbeats are exactly those of the lists; a complete round has no last-call deadline and
// unique ranks; an incomplete round has every rank 0 and no re-rendezvous request. (Gaps in the
// ranks of a complete round are legitimate: a participant may leave after completion.)
std::optional<std::string> structural_violation(const RendezvousState& state);

// The canonical encoding (see the file comment), and its inverse. decode() throws protocol_error
// naming the field ("rendezvous_state.wait_list: ...") for anything encode() cannot have written.
// With a `base` (any state, typically the version before), the decoded lists share the base's
// chunks wherever their elements are equal: the result is the same state either way.
runtime::Bytes encode(const RendezvousState& state);
RendezvousState decode(std::span<const uint8_t> bytes, const RendezvousState* base = nullptr);

// What PyTorch runs after a participant leaves (rem_p) or is found dead (sanitize): a complete
// round with no participants left advances (complete = false, round + 1, and a re-rendezvous
// request is satisfied); an incomplete round that fell below min_nodes loses its last-call
// deadline. Fixed in PyTorch by #59663.
RendezvousState remove_participant_epilogue(RendezvousState state, const RendezvousSettings& settings);

// Drops every node whose last heartbeat is older than settings.expiry() at `wall_now` from the
// heartbeats and the three lists, then, if a participant was among them, runs the epilogue and
// (with rerendezvous_on_expiry, in a complete round with survivors) requests a re-rendezvous.
// The dropped nodes, in node order, go to `dead_nodes` when it is given.
RendezvousState sanitize(RendezvousState state, const RendezvousSettings& settings, TimePoint wall_now,
                         std::vector<NodeDesc>* dead_nodes = nullptr);

}  // namespace dagsim::rendezvous
