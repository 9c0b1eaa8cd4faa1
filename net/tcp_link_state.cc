// TcpTransport's link and connection state machines: see tcp_link_state.h for the moves.
#include "net/tcp_link_state.h"

#include <string>

#include "core/base/assert.h"

namespace dagsim::net {

std::string_view link_state_name(LinkState state) {
  switch (state) {
    case LinkState::idle: return "idle";
    case LinkState::dialing: return "dialing";
    case LinkState::handshaking: return "handshaking";
    case LinkState::open: return "open";
    case LinkState::failed: return "failed";
    case LinkState::closed: return "closed";
  }
  DAGSIM_UNREACHABLE();
}

bool link_transition_legal(LinkState from, LinkState to) {
  using S = LinkState;
  if (from == S::closed) return false;  // final
  switch (to) {
    case S::idle: return false;         // only where a link begins
    case S::dialing: return from == S::idle || from == S::failed || from == S::dialing || from == S::handshaking;
    case S::handshaking: return from == S::dialing;
    case S::open: return from == S::handshaking || from == S::failed;
    case S::failed: return true;        // anything but closed can fail
    case S::closed: return true;
  }
  return false;
}

bool link_dialing(LinkState state) { return state == LinkState::dialing || state == LinkState::handshaking; }

void transition(LinkState& state, LinkState to, const LinkFacts& after) {
  const LinkState from = state;
  DAGSIM_ASSERT_MSG(link_transition_legal(from, to),
                    "link " + std::string(link_state_name(from)) + " -> " + std::string(link_state_name(to)));
  switch (to) {
    case LinkState::idle:
    case LinkState::dialing:
      DAGSIM_ASSERT(!after.has_out);  // a connect in flight is not the link's until it connects
      break;
    case LinkState::handshaking:
      DAGSIM_ASSERT(after.has_out);
      DAGSIM_ASSERT(!after.out_established);
      break;
    case LinkState::open:
      DAGSIM_ASSERT(after.has_out);
      DAGSIM_ASSERT(after.out_established);
      break;
    case LinkState::failed:
    case LinkState::closed:
      // What was queued is lost with the link (tcp_transport.h): nothing may survive its failure.
      DAGSIM_ASSERT(!after.has_out);
      DAGSIM_ASSERT(!after.has_in);
      DAGSIM_ASSERT_EQ(after.waiting, size_t{0});
      break;
  }
  state = to;
}

std::string_view connection_state_name(ConnectionState state) {
  switch (state) {
    case ConnectionState::handshaking: return "handshaking";
    case ConnectionState::open: return "open";
    case ConnectionState::failed: return "failed";
    case ConnectionState::closed: return "closed";
  }
  DAGSIM_UNREACHABLE();
}

bool connection_transition_legal(ConnectionState from, ConnectionState to) {
  using S = ConnectionState;
  switch (to) {
    case S::handshaking: return false;  // only where a connection begins
    case S::open: return from == S::handshaking;
    case S::failed: return from == S::handshaking || from == S::open;
    case S::closed: return from != S::closed;
  }
  return false;
}

void transition(ConnectionState& state, ConnectionState to, const ConnectionFacts& after) {
  const ConnectionState from = state;
  DAGSIM_ASSERT_MSG(connection_transition_legal(from, to), "connection " + std::string(connection_state_name(from)) +
                                                               " -> " + std::string(connection_state_name(to)));
  switch (to) {
    case ConnectionState::handshaking:
      break;
    case ConnectionState::open:
      DAGSIM_ASSERT(after.handshake_established);
      DAGSIM_ASSERT(after.framing);
      DAGSIM_ASSERT(after.socket_open);
      break;
    case ConnectionState::failed:
      DAGSIM_ASSERT(after.socket_open);  // closed only once its transport heard why
      break;
    case ConnectionState::closed:
      DAGSIM_ASSERT(!after.socket_open);
      break;
  }
  state = to;
}

}  // namespace dagsim::net
