// Transport: moves encoded bytes between nodes (the second part of the Env seam).
//
// Both implementations (SimTransport, TcpTransport) keep DESIGN.md's delivery contract: between two
// live incarnations, messages arrive reliably, in order, exactly once, or the connection fails and
// both ends are told with a peer_failed delivery naming the peer. They carry the same bytes (the
// codec's frames), so sim and TCP runs exercise the same decoding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "core/runtime/channel.h"

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
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual WorkerId self() const = 0;

  // Queues `payload` for `target`; never blocks. A failure arrives later as peer_failed.
  virtual void send(WorkerId target, Bytes payload) = 0;

  // Where messages and failure notices for this node arrive, in delivery order.
  virtual Channel<Delivery>& inbox() = 0;
};

}  // namespace dagsim::runtime
