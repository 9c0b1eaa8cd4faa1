// RecordingStore (recording_store.h).
#include "scenarios/workloads/rendezvous/recording_store.h"

#include "scenarios/workloads/rendezvous/rendezvous_history.h"

namespace dagsim::scenarios {

RecordingStore::RecordingStore(store::Store& inner, std::string key, runtime::Clock& clock, nlohmann::json& writes,
                               std::function<runtime::TimePoint()> scenario_now, bool record_values)
    : inner_(inner),
      key_(std::move(key)),
      clock_(clock),
      writes_(writes),
      scenario_now_(std::move(scenario_now)),
      record_values_(record_values) {
  set_timeout(inner.timeout());
}

template <typename F>
store::Versioned RecordingStore::read(const std::string& key, F&& call) {
  inner_.set_timeout(timeout());
  store::Versioned value = call();
  if (key == key_) last_read_wall_ = clock_.wall_now();
  return value;
}

store::Versioned RecordingStore::get_versioned(const std::string& key) {
  return read(key, [&] { return inner_.get_versioned(key); });
}

store::Versioned RecordingStore::watch(const std::string& key, uint64_t known_version) {
  return read(key, [&] { return inner_.watch(key, known_version); });
}

store::Versioned RecordingStore::watch_at_most(const std::string& key, uint64_t known_version, runtime::Duration timeout) {
  return read(key, [&] { return inner_.watch_at_most(key, known_version, timeout); });
}

store::CasOutcome RecordingStore::compare_set_version(const std::string& key, uint64_t expected_version,
                                                      store::Bytes desired) {
  inner_.set_timeout(timeout());
  if (key != key_) return inner_.compare_set_version(key, expected_version, std::move(desired));
  // Recorded before it is sent: a node that dies with the call in flight still says it tried.
  const size_t index = writes_.size();
  writes_.push_back({{"t", scenario_now_().ns()},
                     {"wall", clock_.wall_now().ns()},
                     {"read_wall", last_read_wall_.ns()},
                     {"base", expected_version}});
  if (record_values_) writes_.back()["d"] = to_hex(desired);
  store::CasOutcome outcome = inner_.compare_set_version(key, expected_version, std::move(desired));
  nlohmann::json& entry = writes_[index];
  entry["written"] = outcome.written;
  entry["version"] = outcome.current.version;
  entry["t_end"] = scenario_now_().ns();
  return outcome;
}

}  // namespace dagsim::scenarios
