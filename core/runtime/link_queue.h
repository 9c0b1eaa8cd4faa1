// LinkQueue: one direction of one link as both transports model it, so that a scenario's
// [network] means the same thing in the simulator (sim/sim_network.cc) and over TCP
// (net/tcp_transport.cc, its delay/drop layer). One piece of code decides, for each message,
// whether the send breaks its connection (connection_failure_rate) and when it arrives:
//
//   - serialisation: a link sends one message at a time at its bandwidth, back to back, so a burst
//     of N messages of B bytes takes N * B / bandwidth to leave, not B / bandwidth;
//   - latency: each message then travels its own sampled latency (the link's distribution);
//   - order: nothing arrives before the message sent before it on the same link.
//
// The draws come from the caller's seeded stream in a fixed order (the failure draw, then the
// latency), so the simulator replays them exactly; over TCP the same rule runs on the host's
// steady time. A new connection starts with an empty queue (reset).
#pragma once

#include <optional>

#include "core/base/ids.h"
#include "core/base/prng.h"
#include "core/runtime/clock.h"
#include "core/runtime/network_model.h"

namespace dagsim::runtime {

class LinkQueue {
 public:
  // A message of `bytes` (padding included: it is charged, never held) handed to the link at
  // `now`, from `from` to `to`: nullopt when the draw says the send breaks its connection (the
  // message is lost and the queue unchanged), else the time it arrives at `to`.
  std::optional<TimePoint> admit(TimePoint now, uint64_t bytes, const NetworkModel& model, WorkerId from, WorkerId to,
                                 Prng& random);

  // Until when the link is busy sending what it was given (the end of the last serialisation).
  TimePoint busy_until() const { return busy_until_; }
  // A fresh connection: nothing queued.
  void reset() { *this = LinkQueue{}; }

 private:
  TimePoint busy_until_{};
  TimePoint last_arrival_{};
};

}  // namespace dagsim::runtime
