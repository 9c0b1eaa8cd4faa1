// SecureChannel: one connection's mutual TLS 1.3 (issue 49), through OpenSSL, as a pure state
// machine: bytes in, bytes out, no sockets and no clocks (OpenSSL runs over memory BIOs), so the
// transport and the control link drive it from their own I/O, a test plays both sides in memory,
// and a fuzzer feeds a listener anything (net/fuzz/secure_channel_fuzz.cc).
//
// What a connection proves. Each side presents its own certificate (credentials.h), signed by
// the run's CA and not revoked (its CRL), or the handshake fails. Then, inside TLS, each side
// says who it is, 32 bytes little-endian:
//   identity  magic "DGID" u32, version u16, kind u8 (1 hello: dialer, 2 reply: listener),
//             flags u8 (bit 0: plain after the handshake), cluster id u64, from u32,
//             from's incarnation u32, to u32, reserved u32 (0)
// and the claimed `from` must be the node its certificate names: names[from] equals the
// certificate's common name. So a node can speak only as itself; a node holding worker2's key
// that claims to be worker1 is refused by name ("... certificate names 'worker2', and it claims
// to be worker1"), and so is a certificate naming no node of the run, a revoked one, one from
// another CA, and a peer with no certificate at all. A wrong magic, version, kind, cluster, a
// hello meant for another node, or an incarnation past 16 bits is refused as before (handshake.h).
// The dialer checks the listener likewise: the node it dialled, by its certificate.
//
// After the identity: status() is established and bytes go through write()/read(), encrypted
// and authenticated by TLS (AES-GCM or ChaCha20-Poly1305, as the two ends agree). With
// plain_after_handshake (`--trusted-network`, both ends must say so or the connection is refused)
// the identity exchange is the last TLS on the connection: the bytes after it travel in plain,
// and take_unread() hands back what arrived past the last TLS record.
// TLS 1.3 only; no session tickets or resumption (each connection does the full handshake).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "net/credentials.h"
#include "net/handshake.h"

struct ssl_ctx_st;

namespace dagsim::net {

inline constexpr uint32_t kIdentityMagic = 0x44494744;  // "DGID" in little-endian byte order
// 3: RPC frames are codec version 2 (core/rpc/gathered_frame.h); a version-2 peer is refused.
inline constexpr uint16_t kChannelVersion = 3;
inline constexpr size_t kIdentityBytes = 32;

// A process's TLS configuration: its credential, the CA it trusts, the CRL. One per process,
// shared by every connection. Throws Error(invalid_argument) naming what does not load.
class TlsContext {
 public:
  explicit TlsContext(const NodeCredential& credential);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // The name in this process's own certificate.
  const std::string& name() const { return name_; }
  ssl_ctx_st* native() const { return ctx_; }

 private:
  ssl_ctx_st* ctx_ = nullptr;
  std::string name_;
};

struct ChannelParams {
  uint64_t cluster_id = 0;
  WorkerId self = 0;
  uint32_t incarnation = 0;
  // By worker id: the name each one's certificate must carry (its size is the number of ids).
  std::vector<std::string> names;
  bool plain_after_handshake = false;
  uint16_t version = kChannelVersion;  // tests speak another version to be refused
};

class SecureChannel {
 public:
  using Role = Handshake::Role;
  using Status = Handshake::Status;

  static SecureChannel dial(std::shared_ptr<const TlsContext> tls, ChannelParams params, WorkerId target);
  static SecureChannel accept(std::shared_ptr<const TlsContext> tls, ChannelParams params);
  ~SecureChannel();
  SecureChannel(SecureChannel&&) noexcept;
  SecureChannel& operator=(SecureChannel&&) noexcept;

  // Received bytes, all taken (TLS records are buffered until whole). During the handshake they
  // move it on; once established they wait for read(). In plain mode, nothing is taken once
  // established: the caller keeps its bytes (returns how many were taken).
  size_t feed(std::span<const uint8_t> bytes);
  // Appends the bytes to send now to `out` (handshake messages, alerts, encrypted records).
  void take_output(std::vector<uint8_t>& out);
  std::vector<uint8_t> take_output();
  bool has_output() const;

  Status status() const;
  Role role() const;
  const std::string& error() const;
  // REQUIRES: established.
  const PeerIdentity& peer() const;
  // The worker the dialer wants, or (listener) the hello's sender once read.
  std::optional<WorkerId> claimed_peer() const;
  // The common name of the peer's certificate, once it sent one ("" before).
  const std::string& peer_certificate_name() const;
  // True once TLS completed: the peer's certificate is the run's CA's, not revoked, and it proved
  // it holds the key (a listener; a dialer learns of its own certificate's refusal later).
  bool peer_authenticated() const;
  bool plain() const;

  // Established, not plain: encrypts `bytes` (their records are then in take_output()).
  void write(std::span<const uint8_t> bytes);
  // Established, not plain: decrypts into `into`; 0 when no whole record is buffered. Throws
  // Error(protocol_error) for a record that does not authenticate, an alert, or the peer's close.
  size_t read(std::span<uint8_t> into);
  // Plain mode: what arrived after the peer's last TLS record (the first plain bytes).
  std::vector<uint8_t> take_unread();

  struct State;  // the implementation's (public for its OpenSSL callback)

 private:
  explicit SecureChannel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace dagsim::net
