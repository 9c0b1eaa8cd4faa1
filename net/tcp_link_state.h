// The two state machines of TcpTransport (issue 52, item 4): a link (this node's side of its pair of
// connections to one peer: the connection it dials, and what it holds for it) and one connection
// (a socket from its handshake to its end). Each has one state enum and one transition function
// that asserts the move is legal and that what the caller holds after the move fits the new state,
// as core/rendezvous's apply() does for its decisions. Pure: no sockets, no clock, so a unit test
// drives every move (tcp_link_state_test.cc).
//
// A link:
//
//   idle --dial--> dialing --connected--> handshaking --established--> open
//                    ^  |                   |                            |
//                    |  +--retry---(self)   +--retry--> dialing          |
//                    |                                                   |
//   failed <--fail-- (any but closed) <----------------------------------+
//   failed --dial--> dialing         (a send after a failure: the reconnect)
//   failed --adopt--> open           (our dial reached a new life of the peer while its old
//                                     connection to us was still up: fail, then keep ours)
//   (any) --close--> closed          (the transport closed; final)
//
// A connection:
//
//   handshaking --established--> open --fail--> failed --close--> closed
//   handshaking --fail--> failed;  handshaking|open --close--> closed (refused, replaced, the end)
//
// "failed" is a connection telling its transport why it failed (on_error); it is closed before
// that call returns. Links have no draining state: a link's queued messages are lost when it
// fails, as on TCP (tcp_transport.h), and the transport's close ends every link at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dagsim::net {

enum class LinkState : uint8_t { idle, dialing, handshaking, open, failed, closed };

// What a link holds right after a move, for transition()'s postconditions.
struct LinkFacts {
  bool has_out = false;          // its dialled connection
  bool out_established = false;  // that connection finished its handshake
  bool has_in = false;           // the peer's connection to us
  size_t waiting = 0;            // messages held for the link
};

std::string_view link_state_name(LinkState state);
bool link_transition_legal(LinkState from, LinkState to);
// True while the link owns a dial in progress (the old `dialing` flag): dialing or handshaking.
bool link_dialing(LinkState state);

// Moves `state` to `to`. REQUIRES: link_transition_legal(state, to) and `after` fits `to`:
// dialing and idle/failed hold no dialled connection, handshaking holds one not yet established,
// open holds an established one, failed and closed hold no connection and no message.
void transition(LinkState& state, LinkState to, const LinkFacts& after);

enum class ConnectionState : uint8_t { handshaking, open, failed, closed };

// What a connection holds right after a move.
struct ConnectionFacts {
  bool handshake_established = false;
  bool framing = false;      // its envelope sealer and decoder exist
  bool socket_open = false;
};

std::string_view connection_state_name(ConnectionState state);
bool connection_transition_legal(ConnectionState from, ConnectionState to);

// Moves `state` to `to`. REQUIRES: connection_transition_legal(state, to) and `after` fits `to`:
// open has an established handshake and its framing, closed has no open socket.
void transition(ConnectionState& state, ConnectionState to, const ConnectionFacts& after);

}  // namespace dagsim::net
