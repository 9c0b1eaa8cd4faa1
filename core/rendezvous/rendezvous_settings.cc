#include "core/rendezvous/rendezvous_settings.h"

#include <limits>

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim::rendezvous {

namespace {

void require_positive(const char* name, Duration d) {
  // PyTorch's RendezvousTimeout: "The {name} timeout ({td}) must be positive."
  if (d <= Duration::zero()) {
    throw errors::invalid_argument(std::string("The ") + name + " timeout (" + describe(d) + ") must be positive.");
  }
}

}  // namespace

Duration RendezvousSettings::expiry() const {
  DAGSIM_ASSERT(keep_alive_max_attempt >= 1);
  DAGSIM_ASSERT(keep_alive_interval > Duration::zero());
  DAGSIM_ASSERT(keep_alive_interval.count() <= std::numeric_limits<Duration::rep>::max() / keep_alive_max_attempt);
  return keep_alive_interval * keep_alive_max_attempt;
}

void validate(const RendezvousSettings& settings) {
  if (settings.run_id.empty()) {
    throw errors::invalid_argument("The run id must be a non-empty string.");
  }
  if (settings.run_id.size() > kMaxRunIdBytes) {
    throw errors::invalid_argument("The run id has " + std::to_string(settings.run_id.size()) + " bytes, more than the " +
                                   std::to_string(kMaxRunIdBytes) + " it may have.");
  }
  if (settings.min_nodes < 1) {
    throw errors::invalid_argument("The minimum number of nodes (" + std::to_string(settings.min_nodes) +
                                   ") must be greater than zero.");
  }
  if (settings.max_nodes < settings.min_nodes) {
    throw errors::invalid_argument("The maximum number of nodes (" + std::to_string(settings.max_nodes) +
                                   ") must be greater than or equal to the minimum number of nodes (" +
                                   std::to_string(settings.min_nodes) + ").");
  }
  // Not in PyTorch: our decoded states are bounded, so a larger round could never be read back.
  if (settings.max_nodes > kMaxRendezvousNodes) {
    throw errors::invalid_argument("The maximum number of nodes (" + std::to_string(settings.max_nodes) +
                                   ") must be at most " + std::to_string(kMaxRendezvousNodes) + ".");
  }
  require_positive("join", settings.timeout.join);
  require_positive("last call", settings.timeout.last_call);
  require_positive("close", settings.timeout.close);
  require_positive("heartbeat", settings.timeout.heartbeat);
  if (settings.keep_alive_interval <= Duration::zero()) {
    throw errors::invalid_argument("The keep-alive interval (" + describe(settings.keep_alive_interval) +
                                   ") must be positive.");
  }
  if (settings.keep_alive_max_attempt < 1) {
    throw errors::invalid_argument("The keep-alive max attempt (" + std::to_string(settings.keep_alive_max_attempt) +
                                   ") must be at least 1.");
  }
  if (settings.keep_alive_interval.count() >
      std::numeric_limits<Duration::rep>::max() / settings.keep_alive_max_attempt) {
    throw errors::invalid_argument("The keep-alive interval (" + describe(settings.keep_alive_interval) + ") times " +
                                   std::to_string(settings.keep_alive_max_attempt) + " attempts is too long.");
  }
  DAGSIM_ASSERT(settings.expiry() >= settings.keep_alive_interval);  // the product fits, and grows
}

std::string describe(Duration d) {
  const int64_t ns = d.count();
  // Whole seconds print as "600s"; whole milliseconds as "250ms"; anything finer in nanoseconds.
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  return std::to_string(ns) + "ns";
}

}  // namespace dagsim::rendezvous
