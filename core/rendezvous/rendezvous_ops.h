// The rendezvous decision logic as pure functions: PyTorch's four ops (join, exit, close,
// keep-alive) decide the next Action from a synced state, and apply() carries out a
// state-changing Action, exactly as shared/reference/rendezvous.md §1 ("Actions", "Ops") gives
// PyTorch's NEWEST code, with the redundancy list.
//
// Promises: every function here is pure. It reads no clock (the caller passes both of its
// Clock's readings), draws nothing random, iterates no unordered container, and its result
// depends only on its arguments, so the executor loop, the simulator and the tests all decide
// the same thing from the same inputs. apply() turns a state without a structural_violation()
// into another one.
//
// Two times, as Note [two times] in core/runtime/clock.h has them: an op's own `deadline` is on
// the deciding node's local, monotonic Clock::now() (PyTorch's time.monotonic()); the state's
// last-call deadline and heartbeats are wall time (PyTorch's datetime.utcnow()), since other
// nodes wrote them. So an op takes a ClockReading with both, where PyTorch reads two clocks.
//
// Departures from PyTorch, each for a pure interface:
//  - PyTorch's join op raises RendezvousGracefulExitError itself when a redundant node finds the
//    rendezvous closed; here it returns Action::error_graceful_exit (numbered 14, after PyTorch's
//    13) and the executor raises.
//  - Removing a node from the redundancy list also resets the join op's deadline to now + join
//    timeout in PyTorch (the update_deadline callback). apply() changes only the state; the
//    executor resets the deadline when it applies remove_from_redundancy_list.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/rendezvous/rendezvous_settings.h"
#include "core/rendezvous/rendezvous_state.h"

namespace dagsim::rendezvous {

// PyTorch's _Action with its NEWEST numbers, in this codebase's enumerator style
// (keep_alive is KEEP_ALIVE), plus error_graceful_exit (see the file comment).
enum class Action : uint8_t {
  keep_alive = 1,
  add_to_participants = 2,
  add_to_wait_list = 3,
  add_to_redundancy_list = 4,
  remove_from_participants = 5,
  remove_from_wait_list = 6,
  remove_from_redundancy_list = 7,
  mark_rendezvous_complete = 8,
  mark_rendezvous_closed = 9,
  sync = 10,
  error_closed = 11,
  error_timeout = 12,
  finish = 13,
  error_graceful_exit = 14,
};

// PyTorch's spelling: "KEEP_ALIVE", "ERROR_GRACEFUL_EXIT".
std::string_view action_name(Action action);
std::ostream& operator<<(std::ostream& out, Action action);

// True for the actions apply() carries out (keep_alive through mark_rendezvous_closed); the
// executor handles the others itself (sync: wait and sync again; finish; the errors: raise).
bool changes_state(Action action);

// One reading of a node's Clock: now() for the op's own deadline, wall_now() for everything
// compared with the shared state. See the file comment.
struct ClockReading {
  TimePoint now;
  TimePoint wall_now;
};

// Whether `node` should write a heartbeat: it has one in the state and it is at least
// keep_alive_interval old (non-strict `<=`, as PyTorch's _should_keep_alive). A node without one
// never writes one through this path: it is not part of the rendezvous.
bool should_keep_alive(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
                       TimePoint wall_now);

// The ops: each decides `node`'s next Action from a freshly synced state. `deadline` is the op's
// own deadline on now()'s time line (the join timeout for exit and join, close for close,
// heartbeat for keep-alive).
//
// join: join the next round, or finish if already part of a complete one (reference §1 JoinOp).
Action join_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
               ClockReading clock, TimePoint deadline);
// exit: leave the participants if there (run before join by next_rendezvous).
Action exit_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
               ClockReading clock, TimePoint deadline);
// close: mark the rendezvous closed for good.
Action close_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
                ClockReading clock, TimePoint deadline);
// keep-alive: write a heartbeat when one is due.
Action keep_alive_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
                     ClockReading clock, TimePoint deadline);

// The shape every op has, for the executor loop.
using RendezvousOp = Action (*)(const RendezvousState&, const NodeDesc&, const RendezvousSettings&, ClockReading,
                                TimePoint);

// Carries out a state-changing action for `node`, at `wall_now` (the time its heartbeat and any
// last-call deadline are stamped with), as PyTorch's executor does:
//  keep_alive:                  last_heartbeats[node] = wall_now.
//  add_to_participants:         off the wait list, rank 0, keep_alive; the min-th participant sets
//                               the last-call deadline (wall_now + last_call); the max-th marks the
//                               round complete.
//  add_to_wait_list:            off the redundancy list, onto the wait list, keep_alive.
//  add_to_redundancy_list:      onto the redundancy list, keep_alive.
//  remove_from_participants:    out of the participants and heartbeats, then the epilogue.
//  remove_from_wait_list / remove_from_redundancy_list: out of that list and the heartbeats.
//  mark_rendezvous_complete:    complete, no deadline, ranks 0..n-1 in node order.
//  mark_rendezvous_closed:      closed.
// REQUIRES: changes_state(action), and `action` is what an op decided for `node` from `state`
// (e.g. remove_from_wait_list only for a node on the wait list). Anything else is a programmer
// error and asserts.
RendezvousState apply(RendezvousState state, Action action, const NodeDesc& node, const RendezvousSettings& settings,
                      TimePoint wall_now);

}  // namespace dagsim::rendezvous
