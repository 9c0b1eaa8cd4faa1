// Handshake: how two dagsim processes open a connection (issue 10), as a pure state machine: bytes
// in, bytes out, no sockets, no clocks, no randomness of its own (nonces are given), so a fuzzer
// drives it directly (net/fuzz/) and a test plays both sides in memory.
//
// The dialer opens a connection to carry its own messages to `target` (one connection per
// direction; see tcp_transport.h). Three fixed-size messages, little-endian:
//   hello      dialer -> listener   64 bytes: magic "DGSH", version u16, kind 1, flags u8 (0),
//                                   cluster id u64, from u32, from's incarnation u32, to u32,
//                                   reserved u32 (0), nonce_a [32]
//   challenge  listener -> dialer   96 bytes: magic, version, kind 2, flags, cluster id, from
//                                   (the listener) u32, its incarnation u32, to (the dialer) u32,
//                                   reserved, nonce_b [32], mac_b [32]
//   response   dialer -> listener   40 bytes: magic, version, kind 3, flags, mac_a [32]
// mac_b = HMAC(secret, "dagsim challenge" || hello || challenge's first 64 bytes)
// mac_a = HMAC(secret, "dagsim response"  || hello || challenge)
// Each side proves it holds the secret over the other's fresh nonce, so a recorded handshake
// cannot be replayed. The session keys (one per direction) are
//   HMAC(secret, "dagsim session d->l" or "dagsim session l->d" || nonce_a || nonce_b).
//
// Refusals (status() == refused, error() says why, naming the peer where it is known): a wrong
// magic, kind or version (a peer of another protocol version is refused, never half-understood),
// another cluster id (another run), a message meant for another worker, a worker id outside the
// cluster or this process's own, an incarnation past the 16 bits ids carry (kMaxIncarnation: a
// node would assert on it), a MAC that does not verify (the wrong secret). A refused
// connection is closed without a word: a prober learns nothing but that the port is open.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "net/crypto.h"

namespace dagsim::net {

inline constexpr uint32_t kHandshakeMagic = 0x48534744;  // "DGSH" in little-endian byte order
// 2: RPC frames are codec version 2 (core/rpc/gathered_frame.h: tensors at aligned offsets, written
// from their own storage). A version-1 peer would send frames this build reads but expect ones
// it cannot, so it is refused at the handshake, by version.
inline constexpr uint16_t kNetProtocolVersion = 2;
inline constexpr size_t kHelloBytes = 64;
inline constexpr size_t kChallengeBytes = 96;
inline constexpr size_t kResponseBytes = 40;

using Nonce = std::array<uint8_t, 32>;

struct HandshakeParams {
  uint64_t cluster_id = 0;
  WorkerId self = 0;
  uint32_t incarnation = 0;
  uint32_t num_workers = 0;
  std::vector<uint8_t> secret;
  uint16_t version = kNetProtocolVersion;  // tests speak another version to be refused
};

// What an established connection knows about the other end, and the keys its frames carry MACs
// under.
struct PeerIdentity {
  WorkerId worker = 0;
  uint32_t incarnation = 0;
};
struct SessionKeys {
  Digest send{};
  Digest receive{};
};

class Handshake {
 public:
  enum class Role : uint8_t { dialer, listener };
  enum class Status : uint8_t { in_progress, established, refused };

  // The dialer's side: its hello is ready in take_output().
  static Handshake dial(HandshakeParams params, WorkerId target, const Nonce& nonce);
  // The listener's side: waits for a hello.
  static Handshake accept(HandshakeParams params, const Nonce& nonce);

  // Feeds received bytes; returns how many it consumed. Bytes after the last handshake message
  // belong to the stream that follows (the listener's first frames may arrive with the response);
  // nothing is consumed once established or refused.
  size_t feed(std::span<const uint8_t> bytes);
  // Bytes to send now (empty when none).
  std::vector<uint8_t> take_output();

  Status status() const { return status_; }
  Role role() const { return role_; }
  // Why it was refused.
  const std::string& error() const { return error_; }
  // REQUIRES: established.
  const PeerIdentity& peer() const;
  const SessionKeys& keys() const;
  // The worker the dialer wants, or (listener) the hello's sender once read.
  std::optional<WorkerId> claimed_peer() const { return claimed_peer_; }

 private:
  Handshake(Role role, HandshakeParams params, const Nonce& nonce);
  size_t expected_bytes() const;
  void on_message(std::span<const uint8_t> message);
  void on_hello(std::span<const uint8_t> m);
  void on_challenge(std::span<const uint8_t> m);
  void on_response(std::span<const uint8_t> m);
  void refuse(std::string why);
  void establish(WorkerId worker, uint32_t incarnation, const Nonce& peer_nonce);
  std::string peer_label() const;
  std::string incarnation_beyond_ids(uint32_t incarnation) const;

  Role role_;
  HandshakeParams params_;
  Hmac hmac_;
  Nonce nonce_;
  Nonce peer_nonce_{};
  Status status_ = Status::in_progress;
  std::string error_;
  std::optional<WorkerId> claimed_peer_;
  std::vector<uint8_t> hello_;      // as sent or received: both MACs cover it
  std::vector<uint8_t> challenge_;  // likewise
  std::vector<uint8_t> pending_;    // a partly received message
  std::vector<uint8_t> output_;
  PeerIdentity peer_;
  SessionKeys keys_;
};

}  // namespace dagsim::net
