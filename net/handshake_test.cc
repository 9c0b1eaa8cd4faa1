// Tests of the handshake state machine, both sides played in memory: who may connect (the same
// secret, version and cluster, the right worker ids) and that each refusal says why.
#include "net/handshake.h"

#include <gtest/gtest.h>

namespace dagsim::net {
namespace {

HandshakeParams params(WorkerId self, std::string secret = "a-shared-secret-of-the-cluster", uint64_t cluster = 7) {
  HandshakeParams p;
  p.cluster_id = cluster;
  p.self = self;
  p.incarnation = 10 + self;
  p.num_workers = 3;
  p.secret.assign(secret.begin(), secret.end());
  return p;
}

Nonce nonce(uint8_t fill) {
  Nonce n;
  n.fill(fill);
  return n;
}

// Moves bytes between the two sides, `chunk` bytes at a time, until neither has anything to say.
void play(Handshake& dialer, Handshake& listener, size_t chunk = 1 << 20) {
  for (int round = 0; round < 8; ++round) {
    bool moved = false;
    for (auto [from, to] : {std::pair{&dialer, &listener}, std::pair{&listener, &dialer}}) {
      const std::vector<uint8_t> out = from->take_output();
      for (size_t i = 0; i < out.size(); i += chunk) {
        const size_t n = std::min(chunk, out.size() - i);
        to->feed(std::span<const uint8_t>(out).subspan(i, n));
      }
      moved = moved || !out.empty();
    }
    if (!moved) return;
  }
}

TEST(Handshake, TwoPeersWithTheSameSecretAgreeOnWhoIsWhoAndOnTheirKeys) {
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{1} << 20}) {
    Handshake d = Handshake::dial(params(0), 2, nonce(1));
    Handshake l = Handshake::accept(params(2), nonce(2));
    play(d, l, chunk);
    ASSERT_EQ(d.status(), Handshake::Status::established) << d.error();
    ASSERT_EQ(l.status(), Handshake::Status::established) << l.error();
    EXPECT_EQ(d.peer().worker, 2u);
    EXPECT_EQ(d.peer().incarnation, 12u);
    EXPECT_EQ(l.peer().worker, 0u);
    EXPECT_EQ(l.peer().incarnation, 10u);
    EXPECT_EQ(d.keys().send, l.keys().receive);
    EXPECT_EQ(d.keys().receive, l.keys().send);
    EXPECT_NE(d.keys().send, d.keys().receive);
  }
}

TEST(Handshake, FreshNoncesGiveFreshSessionKeys) {
  Handshake d1 = Handshake::dial(params(0), 1, nonce(1)), l1 = Handshake::accept(params(1), nonce(2));
  Handshake d2 = Handshake::dial(params(0), 1, nonce(3)), l2 = Handshake::accept(params(1), nonce(2));
  play(d1, l1);
  play(d2, l2);
  ASSERT_EQ(d1.status(), Handshake::Status::established);
  ASSERT_EQ(d2.status(), Handshake::Status::established);
  EXPECT_NE(d1.keys().send, d2.keys().send);
}

TEST(Handshake, AListenerWithAnotherSecretIsRefusedByTheDialer) {
  Handshake d = Handshake::dial(params(0), 1, nonce(1));
  Handshake l = Handshake::accept(params(1, "not-the-secret-of-this-cluster"), nonce(2));
  play(d, l);
  EXPECT_EQ(d.status(), Handshake::Status::refused);
  EXPECT_NE(d.error().find("could not prove the shared secret"), std::string::npos) << d.error();
  EXPECT_NE(l.status(), Handshake::Status::established);
}

TEST(Handshake, ADialerWhoseResponseDoesNotVerifyIsRefusedByTheListener) {
  Handshake d = Handshake::dial(params(0), 1, nonce(1));
  Handshake l = Handshake::accept(params(1), nonce(2));
  l.feed(d.take_output());
  std::vector<uint8_t> challenge = l.take_output();
  d.feed(challenge);
  std::vector<uint8_t> response = d.take_output();
  ASSERT_EQ(response.size(), kResponseBytes);
  response.back() ^= 1;  // a forged proof
  l.feed(response);
  EXPECT_EQ(l.status(), Handshake::Status::refused);
  EXPECT_NE(l.error().find("node 0 could not prove the shared secret"), std::string::npos) << l.error();
}

TEST(Handshake, ARecordedResponseDoesNotOpenASecondConnection) {
  // An eavesdropper replays the dialer's hello and response against a fresh listener nonce.
  Handshake d = Handshake::dial(params(0), 1, nonce(1));
  Handshake l = Handshake::accept(params(1), nonce(2));
  const std::vector<uint8_t> hello = d.take_output();
  l.feed(hello);
  d.feed(l.take_output());
  const std::vector<uint8_t> response = d.take_output();
  Handshake replayed = Handshake::accept(params(1), nonce(3));
  replayed.feed(hello);
  replayed.feed(response);
  EXPECT_EQ(replayed.status(), Handshake::Status::refused);
}

TEST(Handshake, RefusesAnotherVersionAnotherClusterAndStrangers) {
  {
    HandshakeParams old = params(0);
    old.version = 99;
    Handshake d = Handshake::dial(old, 1, nonce(1));
    Handshake l = Handshake::accept(params(1), nonce(2));
    play(d, l);
    EXPECT_EQ(l.status(), Handshake::Status::refused);
    EXPECT_NE(l.error().find("protocol version 99"), std::string::npos) << l.error();
  }
  {
    Handshake d = Handshake::dial(params(0, "a-shared-secret-of-the-cluster", 8), 1, nonce(1));
    Handshake l = Handshake::accept(params(1), nonce(2));
    play(d, l);
    EXPECT_EQ(l.status(), Handshake::Status::refused);
    EXPECT_NE(l.error().find("another cluster"), std::string::npos) << l.error();
  }
  {
    Handshake d = Handshake::dial(params(0), 2, nonce(1));  // meant for worker 2
    Handshake l = Handshake::accept(params(1), nonce(2));
    play(d, l);
    EXPECT_EQ(l.status(), Handshake::Status::refused);
    EXPECT_NE(l.error().find("meant to reach worker 2"), std::string::npos) << l.error();
  }
  {
    Handshake l = Handshake::accept(params(1), nonce(2));
    std::vector<uint8_t> junk(kHelloBytes, 0x41);
    l.feed(junk);
    EXPECT_EQ(l.status(), Handshake::Status::refused);
    EXPECT_NE(l.error().find("bad magic"), std::string::npos) << l.error();
  }
}

TEST(Handshake, APeerClaimingAnIncarnationPastWhatIdsCarryIsRefusedEitherWay) {
  // Ids carry 16 bits of incarnation (core/base/ids.h): a peer claiming more would make every node
  // it messages assert. Refused by the listener (in the hello) and by the dialer (in the challenge).
  for (uint32_t claimed : {kMaxIncarnation + 1, UINT32_MAX}) {
    HandshakeParams liar = params(0);
    liar.incarnation = claimed;
    Handshake d = Handshake::dial(liar, 1, nonce(1));
    Handshake l = Handshake::accept(params(1), nonce(2));
    play(d, l);
    EXPECT_EQ(l.status(), Handshake::Status::refused);
    EXPECT_NE(l.error().find("node 0 claims incarnation " + std::to_string(claimed) + ", past the 65535"),
              std::string::npos)
        << l.error();
    HandshakeParams lying_listener = params(1);
    lying_listener.incarnation = claimed;
    Handshake d2 = Handshake::dial(params(0), 1, nonce(1));
    Handshake l2 = Handshake::accept(lying_listener, nonce(2));
    play(d2, l2);
    EXPECT_EQ(d2.status(), Handshake::Status::refused);
    EXPECT_NE(d2.error().find("claims incarnation " + std::to_string(claimed)), std::string::npos) << d2.error();
  }
  // The last one ids carry is fine.
  HandshakeParams last = params(0);
  last.incarnation = kMaxIncarnation;
  Handshake d = Handshake::dial(last, 1, nonce(1));
  Handshake l = Handshake::accept(params(1), nonce(2));
  play(d, l);
  EXPECT_EQ(l.status(), Handshake::Status::established) << l.error();
}

TEST(Handshake, LeavesTheBytesAfterItsLastMessageToTheStream) {
  Handshake d = Handshake::dial(params(0), 1, nonce(1));
  Handshake l = Handshake::accept(params(1), nonce(2));
  l.feed(d.take_output());
  d.feed(l.take_output());
  std::vector<uint8_t> bytes = d.take_output();
  bytes.insert(bytes.end(), {1, 2, 3});
  EXPECT_EQ(l.feed(bytes), kResponseBytes);
  EXPECT_EQ(l.status(), Handshake::Status::established);
  EXPECT_EQ(l.feed(bytes), 0u);  // nothing more once established
}

}  // namespace
}  // namespace dagsim::net
