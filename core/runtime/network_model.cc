#include "core/runtime/network_model.h"

#include <algorithm>
#include <cmath>

namespace dagsim::runtime {

namespace {
Duration from_ns(double ns) {
  if (!(ns > 0)) return Duration{0};  // also catches NaN
  if (ns >= 9.0e18) return Duration::max();
  return Duration{static_cast<int64_t>(std::llround(ns))};
}
}  // namespace

Duration LatencyModel::sample_drawn(Prng& random) const {
  Duration value{0};
  switch (dist) {
    case Dist::constant:
      return max;
    case Dist::uniform:
      value = Duration{random.uniform_int(min.count(), max.count())};
      break;
    case Dist::exponential:
      value = min + from_ns(random.exponential(static_cast<double>(mean.count())));
      break;
    case Dist::normal:
      value = from_ns(random.normal(static_cast<double>(mean.count()), static_cast<double>(stddev.count())));
      break;
  }
  return std::clamp(value, min, max);
}

const LatencyModel& NetworkModel::link_latency(WorkerId from, WorkerId to) const {
  for (const LinkModel& link : links) {
    if (link.from == from && link.to == to) return link.latency;
  }
  return latency;
}

double NetworkModel::link_bandwidth(WorkerId from, WorkerId to) const {
  for (const LinkModel& link : links) {
    if (link.from == from && link.to == to && link.bandwidth_bytes_per_s) return *link.bandwidth_bytes_per_s;
  }
  return bandwidth_bytes_per_s;
}

Duration serialisation_time(uint64_t bytes, double bandwidth_bytes_per_s) {
  // Computed in double: bytes × 1e9 is exact enough, and inf (a denormal bandwidth) or NaN
  // compare as "not below the cap".
  const double ns = std::ceil(static_cast<double>(bytes) * 1e9 / bandwidth_bytes_per_s);
  if (!(ns < static_cast<double>(kMaxSerialisation.count()))) return kMaxSerialisation;
  return Duration{static_cast<int64_t>(ns)};
}

Duration NetworkModel::max_latency() const {
  Duration most = latency.upper_bound();
  for (const LinkModel& link : links) most = std::max(most, link.latency.upper_bound());
  return most;
}

}  // namespace dagsim::runtime
