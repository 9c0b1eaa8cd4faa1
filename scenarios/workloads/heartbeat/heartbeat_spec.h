// HeartbeatSpec: the heartbeat failure detector workload's data ([heartbeat]; docs/scenarios.md).
#pragma once

#include <chrono>
#include <cstdint>

#include "core/runtime/clock.h"

namespace dagsim::scenarios {

struct HeartbeatSpec {
  // Codec framing around each heartbeat's payload: the frame header, the payload length and the
  // tensor count (core/rpc/codec.h). The workload asserts it against the codec.
  static constexpr uint32_t kFrameOverheadBytes = 32 + 4 + 4;

  uint32_t monitor = 0;
  runtime::Duration interval{std::chrono::milliseconds(100)};
  uint32_t max_attempts = 3;  // declared dead after interval × max_attempts without a heartbeat
  runtime::Duration duration{std::chrono::seconds(10)};
  uint32_t message_bytes = 64;  // each heartbeat's payload

  runtime::Duration timeout() const { return interval * max_attempts; }
  // Heartbeats from a live, reachable node arrive at most interval + (latency max) apart, so a
  // latency maximum below this slack can never cause a false suspicion.
  runtime::Duration slack() const { return interval * (max_attempts - 1); }
  // What a heartbeat puts on the wire: its frame, then message_bytes of padding.
  uint64_t frame_bytes() const { return uint64_t{message_bytes} + kFrameOverheadBytes; }
};

}  // namespace dagsim::scenarios
