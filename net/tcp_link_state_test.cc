// The link and connection state machines (tcp_link_state.h): every legal move passes with what it
// must hold after it, an illegal move dies, and so does a legal move whose postcondition fails.
#include "net/tcp_link_state.h"

#include <gtest/gtest.h>

namespace dagsim::net {
namespace {

LinkFacts with_out(bool established) { return LinkFacts{true, established, false, 0}; }

TEST(TcpLinkState, ALinkDialsHandshakesOpensFailsAndRedials) {
  LinkState s = LinkState::idle;
  transition(s, LinkState::dialing, LinkFacts{});
  transition(s, LinkState::dialing, LinkFacts{});  // a retry after a failed connect
  transition(s, LinkState::handshaking, with_out(false));
  transition(s, LinkState::dialing, LinkFacts{});  // the handshake failed: dial again
  transition(s, LinkState::handshaking, with_out(false));
  transition(s, LinkState::open, with_out(true));
  transition(s, LinkState::failed, LinkFacts{});
  transition(s, LinkState::dialing, LinkFacts{0, 0, 0, 3});  // a send after the failure
  transition(s, LinkState::failed, LinkFacts{});
  transition(s, LinkState::failed, LinkFacts{});  // failed again: the peer reconnected to us
  transition(s, LinkState::open, with_out(true));  // our dial met the peer's new life
  transition(s, LinkState::closed, LinkFacts{});
  EXPECT_EQ(s, LinkState::closed);
  EXPECT_EQ(link_state_name(s), "closed");
}

TEST(TcpLinkState, TheLegalMovesAreTheDrawnOnes) {
  using S = LinkState;
  EXPECT_TRUE(link_transition_legal(S::idle, S::dialing));
  EXPECT_TRUE(link_transition_legal(S::idle, S::failed));  // an injected failure before any dial
  EXPECT_FALSE(link_transition_legal(S::idle, S::open));
  EXPECT_FALSE(link_transition_legal(S::idle, S::handshaking));
  EXPECT_FALSE(link_transition_legal(S::open, S::dialing));
  EXPECT_FALSE(link_transition_legal(S::open, S::handshaking));
  EXPECT_FALSE(link_transition_legal(S::failed, S::handshaking));
  for (S to : {S::idle, S::dialing, S::handshaking, S::open, S::failed, S::closed}) {
    EXPECT_FALSE(link_transition_legal(S::closed, to)) << link_state_name(to);
  }
  EXPECT_TRUE(link_dialing(S::dialing));
  EXPECT_TRUE(link_dialing(S::handshaking));
  EXPECT_FALSE(link_dialing(S::open));
}

TEST(TcpLinkStateDeathTest, AnIllegalMoveDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  LinkState s = LinkState::idle;
  EXPECT_DEATH(transition(s, LinkState::open, with_out(true)), "link idle -> open");
  LinkState closed = LinkState::closed;
  EXPECT_DEATH(transition(closed, LinkState::failed, LinkFacts{}), "link closed -> failed");
}

TEST(TcpLinkStateDeathTest, ABrokenPostconditionDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  LinkState s = LinkState::handshaking;
  // Open, but its connection has not finished the handshake.
  EXPECT_DEATH(transition(s, LinkState::open, with_out(false)), "out_established");
  LinkState open = LinkState::open;
  // Failed, but a message survived it.
  EXPECT_DEATH(transition(open, LinkState::failed, LinkFacts{false, false, false, 1}), "waiting");
  LinkState dialing = LinkState::dialing;
  EXPECT_DEATH(transition(dialing, LinkState::handshaking, LinkFacts{}), "has_out");
}

TEST(TcpConnectionState, AConnectionOpensFailsAndCloses) {
  ConnectionState s = ConnectionState::handshaking;
  transition(s, ConnectionState::open, ConnectionFacts{true, true, true});
  transition(s, ConnectionState::failed, ConnectionFacts{true, true, true});
  transition(s, ConnectionState::closed, ConnectionFacts{true, true, false});
  EXPECT_EQ(connection_state_name(s), "closed");
  ConnectionState refused = ConnectionState::handshaking;
  transition(refused, ConnectionState::closed, ConnectionFacts{});
  EXPECT_FALSE(connection_transition_legal(ConnectionState::closed, ConnectionState::closed));
  EXPECT_FALSE(connection_transition_legal(ConnectionState::failed, ConnectionState::open));
}

TEST(TcpConnectionStateDeathTest, IllegalMovesAndBrokenPostconditionsDie) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ConnectionState closed = ConnectionState::closed;
  EXPECT_DEATH(transition(closed, ConnectionState::open, ConnectionFacts{true, true, true}), "connection closed -> open");
  ConnectionState s = ConnectionState::handshaking;
  // Open without its framing (an envelope would have nothing to seal it).
  EXPECT_DEATH(transition(s, ConnectionState::open, ConnectionFacts{true, false, true}), "framing");
  // Closed with its socket still open.
  EXPECT_DEATH(transition(s, ConnectionState::closed, ConnectionFacts{true, true, true}), "socket_open");
}

}  // namespace
}  // namespace dagsim::net
