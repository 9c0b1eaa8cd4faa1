// NetworkModel: what the simulated network does to a message, as plain data (a scenario's
// [network] table): per-link latency distributions, bandwidth, connection failures and the
// silence timeout. The simulator (and later the TCP transport's delay layer) samples it from the world's seeded stream; nothing here reads a
// clock or a global generator, so a seed replays the same delays on any standard library.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/base/ids.h"
#include "core/base/prng.h"
#include "core/runtime/clock.h"

namespace dagsim::runtime {



// One-way latency of a message. Every distribution has a stated maximum: samples are clamped to
// [min, max], so checks can reason about the worst case (`upper_bound`).
struct LatencyModel {
  enum class Dist : uint8_t { constant, uniform, exponential, normal };
  Dist dist = Dist::constant;
  Duration min{0};     // uniform: lower end; exponential/normal: lower clamp (exponential: offset)
  Duration max{0};     // every dist: upper clamp (constant: the value itself)
  Duration mean{0};    // exponential: mean of the exponential part; normal: mean
  Duration stddev{0};  // normal only

  static LatencyModel constant(Duration value) { return {Dist::constant, value, value, value, Duration{0}}; }
  static LatencyModel uniform(Duration lo, Duration hi) { return {Dist::uniform, lo, hi, (lo + hi) / 2, Duration{0}}; }

  Duration upper_bound() const { return max; }
  Duration lower_bound() const { return min; }
  // One sample, clamped to [min, max]. A constant draws nothing (inline: every simulated message
  // takes one sample).
  Duration sample(Prng& random) const { return dist == Dist::constant ? max : sample_drawn(random); }
  // sample() for the distributions that draw.
  Duration sample_drawn(Prng& random) const;
};

// Overrides the default latency (and bandwidth) for messages from `from` to `to`.
struct LinkModel {
  WorkerId from = 0;
  WorkerId to = 0;
  LatencyModel latency;
  std::optional<double> bandwidth_bytes_per_s;
};

struct NetworkModel {
  LatencyModel latency = LatencyModel::constant(std::chrono::microseconds(100));
  // Serialisation delay per link direction: bytes / bandwidth. 0 means unlimited.
  double bandwidth_bytes_per_s = 0;
  // Probability that sending a message breaks its connection (the message and everything in
  // flight on the connection are lost, and both ends are told).
  double connection_failure_rate = 0;
  // A connection whose traffic is held (partition, crashed peer) this long fails.
  Duration connection_timeout = std::chrono::seconds(5);
  std::vector<LinkModel> links;

  // The latency model and bandwidth for one direction of one link.
  // Inline for the common case of no per-link overrides: asked once or twice per message.
  const LatencyModel& latency_for(WorkerId from, WorkerId to) const {
    return links.empty() ? latency : link_latency(from, to);
  }
  double bandwidth_for(WorkerId from, WorkerId to) const {
    return links.empty() ? bandwidth_bytes_per_s : link_bandwidth(from, to);
  }
  // The same, looked up in `links`.
  const LatencyModel& link_latency(WorkerId from, WorkerId to) const;
  double link_bandwidth(WorkerId from, WorkerId to) const;
  // The largest latency any link can produce (for checks' bounds).
  Duration max_latency() const;
};

// How long `bytes` take to serialise at `bandwidth_bytes_per_s` (> 0): rounded up to a whole
// nanosecond and capped at kMaxSerialisation, so an absurdly low bandwidth (1e-300 Mbit/s is in the
// documented range) means "never gets through in any run" instead of overflowing int64
// nanoseconds. The simulator and the checks' bounds both use this, so they agree to the nanosecond.
inline constexpr Duration kMaxSerialisation{1'000'000'000'000'000'000};  // about 31.7 years
Duration serialisation_time(uint64_t bytes, double bandwidth_bytes_per_s);

}  // namespace dagsim::runtime
