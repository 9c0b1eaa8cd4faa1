// A cluster node's life under the TCP launcher: see node_life.h for the moves.
#include "scenarios/run/node_life.h"

#include <string>

#include "core/base/assert.h"

namespace dagsim::scenarios {

std::string_view node_life_name(NodeLife life) {
  switch (life) {
    case NodeLife::unborn: return "unborn";
    case NodeLife::launched: return "launched";
    case NodeLife::relaunched: return "relaunched";
    case NodeLife::hello: return "hello";
    case NodeLife::started: return "started";
    case NodeLife::busy: return "busy";
    case NodeLife::idle: return "idle";
    case NodeLife::finished: return "finished";
  }
  DAGSIM_UNREACHABLE();
}

bool node_life_legal(NodeLife from, NodeLife to) {
  using L = NodeLife;
  switch (to) {
    case L::unborn: return false;  // only where a node begins
    // A first launch; or the restart recorded when its incarnation ends before its hello; or a
    // node on another host that connected before the launcher started it.
    case L::launched: return from == L::unborn || from == L::relaunched || from == L::hello;
    case L::relaunched: return true;  // a restart (even of a node not started yet)
    case L::hello: return true;
    case L::started: return from == L::hello;
    case L::busy:
    case L::idle: return report_allowed(from);
    case L::finished: return finish_allowed(from);
  }
  return false;
}

void transition(NodeLife& life, NodeLife to, const NodeLifeFacts& after) {
  const NodeLife from = life;
  DAGSIM_ASSERT_MSG(node_life_legal(from, to),
                    "node life " + std::string(node_life_name(from)) + " -> " + std::string(node_life_name(to)));
  switch (to) {
    case NodeLife::unborn:
      break;
    case NodeLife::launched:
    case NodeLife::relaunched:
      // A new incarnation begins up (launch), or ends (the restart recorded at its end).
      if (from != NodeLife::relaunched) DAGSIM_ASSERT(after.state == runtime::NodeState::up);
      break;
    case NodeLife::hello:
    case NodeLife::busy:
    case NodeLife::idle:
    case NodeLife::finished:
      DAGSIM_ASSERT(after.has_link);  // it spoke on one
      break;
    case NodeLife::started:
      DAGSIM_ASSERT(after.has_link);
      DAGSIM_ASSERT(after.run_started);  // Start goes out only once the run began
      break;
  }
  life = to;
}

}  // namespace dagsim::scenarios
