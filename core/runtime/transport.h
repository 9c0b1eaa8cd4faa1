// Transport: moves encoded bytes between nodes (the second part of the Env seam).
//
// Both implementations (SimTransport, TcpTransport; LocalRuntime's loopback too) keep DESIGN.md's
// delivery contract: between two live incarnations, messages arrive reliably, in order, exactly
// once, or the connection fails and both ends are told with a peer_failed delivery naming the
// peer. They carry the same bytes (the codec's frames), so sim and TCP runs exercise the same
// decoding.
//
// Note [what a connection carries]: a connection joins two node *incarnations* of one cluster.
// Each end knows, for the other end: its worker id (WorkerId, dense from 0 in the scenario's node
// order), its incarnation (which life of that worker) and the cluster id (one run of one scenario;
// a TCP transport refuses a peer of another cluster in its handshake, so two runs on one host never
// mix). Every Delivery names the peer's worker id and incarnation, so a receiver can tell a
// restarted peer's messages from its predecessor's failure notice (which may arrive after them).
//
// Note [where an incarnation comes from]: 0 at a node's first start, +1 per start after that, and
// never reused: ids a node makes carry it in their high bits (Env::incarnation). In the simulator
// the world counts starts. In the TCP runtime a node process reads the last number from its
// records folder, adds one and persists it before it opens any connection, so a process restarted
// by hand or by an elastic agent is a new incarnation even though nothing outside it counted.
//
// Threading: send() and close() are called from the node's fibers (and close() from its runtime's
// driver); they never block. The inbox is the one thing of a node another thread may touch: a
// runtime with socket reader threads hands deliveries over with inbox().offer(), which is safe
// from any thread; only the node's fibers pop.
//
// Note [padding on the wire]: the simulator charges `padding` in serialisation time and byte
// counts and keeps only the number. A TCP transport writes it after the payload from one shared
// page of zeros, with the count in its own envelope, and the receiver reads and discards it, so
// neither end ever holds it: what is real on the wire stays real, and memory stays bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "core/runtime/channel.h"
#include "core/runtime/clock.h"

namespace dagsim::runtime {

using Bytes = std::vector<uint8_t>;

struct Delivery {
  enum class Kind : uint8_t { message, peer_failed };
  Kind kind = Kind::message;
  WorkerId peer = 0;   // the sender, or the peer whose connection failed
  Bytes payload;       // message only
  std::string reason;  // peer_failed only: why, for error messages
  // Which life of `peer` this is about: the sender's incarnation, or the incarnation whose
  // connection failed. A restarted peer opens a new connection at once, so its messages may
  // arrive before the notice that its predecessor's connection failed (as on TCP); a receiver
  // fails only what it had pending with that incarnation.
  uint32_t peer_incarnation = 0;
  // message only: how many zero bytes travelled after `payload` (Transport::send's `padding`).
  uint64_t padding = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual WorkerId self() const = 0;

  // Queues `payload` for `target`; never blocks. A failure arrives later as peer_failed.
  // Throws channel_closed after close().
  void send(WorkerId target, Bytes payload) { send(target, std::move(payload), 0); }
  // The same, followed on the wire by `padding` zero bytes that cost bandwidth and time like any
  // other but are never materialised: the receiver gets `payload` and the count (Delivery::padding).
  // This is how a message of declared size (a 16 MiB heartbeat) costs a length in memory, not a
  // buffer, however many of them a slow link queues (Note [padding on the wire]).
  virtual void send(WorkerId target, Bytes payload, uint64_t padding) = 0;

  // Where messages and failure notices for this node arrive, in delivery order. Runtimes deliver
  // with offer(): a delivery into a closed inbox is dropped, never thrown at the deliverer.
  virtual Channel<Delivery>& inbox() = 0;

  // Stops this node's side: later sends throw channel_closed, the inbox closes (a reader unwinds
  // with channel_closed once it has drained what arrived before), and what arrives later is
  // dropped. Peers see the connection fail as with any other failure. Idempotent.
  virtual void close() = 0;

  // Backpressure (Note [room to send]): waits, in the calling node fiber, while what this node
  // has queued to `target` (or to everyone) is over the runtime's bound, until there is room, the
  // link to `target` fails, the transport closes, or `deadline` passes. True when there is room.
  // Outside a node fiber, and in runtimes without a bound (the simulator, whose links model time,
  // not memory), it returns true at once. Throws as block_until does (node_killed, cancelled).
  virtual bool wait_for_room(WorkerId target, std::optional<TimePoint> deadline) {
    (void)target;
    (void)deadline;
    return true;
  }

  // True when every byte a peer sends arrives under a MAC checked before delivery (TCP with MACs
  // on), the same for every peer: the RPC codec then leaves the frame checksum out
  // (rpc::FrameIntegrity). Runtimes that carry bytes unauthenticated (the simulator, loopback,
  // trusted-network TCP) say false, and frames carry their checksum.
  virtual bool authenticated() const { return false; }
};

// Note [room to send]: send() never blocks, so a sender faster than its peer's reader would grow
// the queue without bound. A TCP transport bounds it twice: callers that can wait ask for room
// first (the RPC agent does for every request, with the call's deadline, and for every handler's
// reply), and a send that takes the node's total past a hard bound fails the link holding the
// most, as a peer that does not read is indistinguishable from a dead one. docs/tcp.md gives the
// figures.

}  // namespace dagsim::runtime
