// A cluster node's life as the TCP launcher sees it (issue 52, item 4): one enum for what the
// launcher has heard from the node's current process, and one transition function that asserts
// each move and what must hold after it. It replaces six booleans (said_hello, restart_pending,
// started, reported, idle, finished) whose combinations were never all meaningful.
//
// Orthogonal to runtime::NodeState (up, paused, killed, crashed: what faults did to the node):
// a killed node's life stays where its process left it until the next launch.
//
//   unborn --launch--> launched --hello--> hello --start--> started --busy/idle--> busy <-> idle
//                                                                                    |
//   (any) --restart--> relaunched   --hello--> hello            finished <--+ (final figures)
//   relaunched --end before hello (the restart is recorded then)--> launched
//   (any) --hello--> hello     a process said hello: a new process's life begins (a node on
//                              another host may connect again on a new control link)
//
// Moves the launcher makes (launch, restart, start) are asserted. Moves a node's message asks for
// (busy, idle, finished) come off a control link: the launcher checks report_allowed() /
// finish_allowed() first and ignores a message out of order, never asserting on it.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/runtime/cluster.h"

namespace dagsim::scenarios {

enum class NodeLife : uint8_t { unborn, launched, relaunched, hello, started, busy, idle, finished };

// What the launcher holds for the node right after a move, for the postconditions.
struct NodeLifeFacts {
  runtime::NodeState state = runtime::NodeState::not_started;
  bool has_link = false;     // a control link to the node's process
  bool run_started = false;  // the run began (the launcher sent Start to everyone)
};

std::string_view node_life_name(NodeLife life);
bool node_life_legal(NodeLife from, NodeLife to);

// Moves `life` to `to`. REQUIRES: node_life_legal(life, to), and `after` fits `to`: a launched
// life is up; a life that said hello has its control link; a started one is in a started run.
void transition(NodeLife& life, NodeLife to, const NodeLifeFacts& after);

// The old booleans, as questions about the one state.
inline bool said_hello(NodeLife life) { return life >= NodeLife::hello; }
inline bool restart_pending(NodeLife life) { return life == NodeLife::relaunched; }
inline bool told_to_start(NodeLife life) { return life >= NodeLife::started; }
// Busy or idle may follow only a start; finished only a hello.
inline bool report_allowed(NodeLife life) {
  return life == NodeLife::started || life == NodeLife::busy || life == NodeLife::idle;
}
inline bool finish_allowed(NodeLife life) { return said_hello(life) && life != NodeLife::finished; }

}  // namespace dagsim::scenarios
