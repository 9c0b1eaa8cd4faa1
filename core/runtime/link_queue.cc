// LinkQueue (link_queue.h): the one link model of both transports.
#include "core/runtime/link_queue.h"

#include <algorithm>

namespace dagsim::runtime {

std::optional<TimePoint> LinkQueue::admit(TimePoint now, uint64_t bytes, const NetworkModel& model, WorkerId from,
                                          WorkerId to, Prng& random) {
  if (model.connection_failure_rate > 0 && random.bernoulli(model.connection_failure_rate)) return std::nullopt;
  // The message starts leaving once the link has sent everything queued before it.
  TimePoint sent = std::max(now, busy_until_);
  const double bandwidth = model.bandwidth_for(from, to);
  // Capped (and TimePoint + saturates), so an absurdly low bandwidth never overflows time.
  if (bandwidth > 0) sent = sent + serialisation_time(bytes, bandwidth);
  busy_until_ = sent;
  const TimePoint arrival = std::max(sent + model.latency_for(from, to).sample(random), last_arrival_);
  last_arrival_ = arrival;
  return arrival;
}

}  // namespace dagsim::runtime
