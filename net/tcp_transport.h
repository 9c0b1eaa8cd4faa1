// TcpTransport: the Transport of a real dagsim process (issue 10), with Boost.Asio on the process's
// one thread (IoScheduler runs its completions between fibers; nothing here blocks a fiber).
//
// It keeps DESIGN.md's delivery contract between node incarnations:
//  - Each node dials its own connection to each peer it sends to (lazily, at the first send,
//    retrying with back-off until connection_timeout; a refused dial fails the link at once, as a
//    dead host's refusal does in the simulator) and accepts the peers' connections to it: a
//    pair of nodes talks over two TCP connections, one per direction, which fail together. The
//    first end to see either fail (reset, EOF, a protocol error, TCP_USER_TIMEOUT, keep-alive
//    expiry, a refused handshake) closes both, and each end tells its inbox once, with a
//    peer_failed naming the peer and its incarnation; what was queued is lost, as on TCP. A later
//    send dials again. A peer that reconnects while its old connection still looks alive here
//    failed it on its side (or restarted): the old one is failed here first, so its notice always
//    precedes the new connection's messages.
//  - Every connection starts with the authenticated handshake (handshake.h) and then carries
//    envelopes (envelope.h): codec frames with a MAC under the session key (none in
//    trusted-network mode), padding written from one shared page of zeros.
//  - Small frames queued while a write is in progress leave together in one gathered write;
//    payloads are never copied on the way out (scatter-gather: an RPC frame's tensors leave from
//    their own storage, send_gathered) and large ones are read straight into their final buffer.
//
// Faults mean what they mean in the simulator (issue 10, item 4), through a seeded delay/drop
// layer on the sending side: each message waits its sampled latency plus its serialisation time
// (the scenario's [network]) in per-link FIFO order; a send breaks its connection with the
// scenario's connection_failure_rate; a blocked link (partition) and a silenced node (crash) hold
// traffic, and a link whose traffic has been held for connection_timeout fails.
//
// Bounded: what waits to be written to a peer (room_per_peer, room_total, max_queued), at most max_inbound connections at a time (more are closed at once and logged), every
// handshake within handshake_timeout, every envelope's bytes within connection_timeout of each other.
// Threading: everything runs on the io_context's thread, which is the node's (transport.h).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/prng.h"
#include "core/runtime/network_model.h"
#include "core/rpc/gathered_frame.h"
#include "core/runtime/transport.h"
#include "net/envelope.h"
#include "net/secure_channel.h"

namespace dagsim::net {

struct TcpEndpoint {
  std::string host;
  uint16_t port = 0;
};

struct TcpTransportOptions {
  WorkerId self = 0;
  uint32_t incarnation = 0;
  uint64_t cluster_id = 0;
  std::vector<std::string> names;    // by worker id, for messages
  std::vector<TcpEndpoint> peers;    // by worker id (this node's own entry is not dialled)
  // The node's own TLS credential and the run's CA (secure_channel.h): every connection is mutual
  // TLS 1.3 and each peer is checked against the name in its certificate. Null: the operator
  // chose a shared secret instead (`secret`, handshake.h), one identity for the whole run.
  std::shared_ptr<const TlsContext> tls;
  std::vector<uint8_t> secret;
  bool trusted_network = false;      // plain after the handshake (documented, off by default)
  runtime::Duration connection_timeout = std::chrono::seconds(5);
  runtime::Duration handshake_timeout = std::chrono::seconds(2);
  size_t max_inbound = 256;
  EnvelopeLimits limits;
  // Backpressure (Note [room to send] in core/runtime/transport.h), in payload bytes queued and
  // not yet written to the socket: wait_for_room waits while this node holds at least
  // room_per_peer for the peer, or room_total for all of them together; a send that takes the
  // total past max_queued fails the link holding the most (a peer that does not read).
  size_t room_per_peer = size_t{64} << 20;
  size_t room_total = size_t{256} << 20;
  size_t max_queued = size_t{1} << 30;
  // The scenario's network, applied by the delay/drop layer; nullopt sends at once.
  std::optional<runtime::NetworkModel> shaping;
  uint64_t seed = 1;  // the delay/drop layer's draws
  // Refusals and other events worth an operator's attention (one line each).
  std::function<void(const std::string&)> log;
  // Every connection failure told to the inbox (for the run's fault history).
  std::function<void(WorkerId peer, const std::string& reason)> on_failure;
  uint16_t protocol_version = 0;  // tests: another version than ours (0: ours)
};

struct TcpTransportStats {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t dropped = 0;  // lost with a failed connection
  uint64_t connection_failures = 0;
  uint64_t refused = 0;  // handshakes refused (either side)
  uint64_t bytes_sent = 0;
  uint64_t writes = 0;   // gathered socket writes (batching: sent / writes messages per write)
};

class TcpTransport final : public runtime::Transport, public rpc::GatheringTransport {
 public:
  // `acceptor` is open and listening (the launcher hands each node process its socket).
  TcpTransport(boost::asio::io_context& io, boost::asio::ip::tcp::acceptor acceptor, TcpTransportOptions options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  WorkerId self() const override;
  using runtime::Transport::send;
  void send(WorkerId target, runtime::Bytes payload, uint64_t padding) override;
  // A version-2 codec frame whose pieces are written where they lie (gathered_frame.h).
  void send_gathered(WorkerId target, rpc::GatheredFrame frame) override;
  runtime::Channel<runtime::Delivery>& inbox() override;
  void close() override;
  bool wait_for_room(WorkerId target, std::optional<runtime::TimePoint> deadline) override;
  // True unless trusted_network: every envelope carries a MAC.
  bool authenticated() const override;

  // The delay/drop layer's faults. block: hold this node's traffic to `peer` (a partition's
  // directed pair), or let it go again in order. silence: a crash; hold everything in and out
  // for good.
  void block(WorkerId peer, bool blocked);
  void silence();

  // True when nothing this node sent is still queued, held or being written.
  bool idle() const;
  uint16_t port() const;
  TcpTransportStats stats() const;
  // Payload bytes queued and not yet written: to `peer`, and to everyone.
  size_t queued_bytes(WorkerId peer) const;
  size_t queued_bytes() const;

  class Impl;  // public only so that its connections (in the .cc) can name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dagsim::net
