// RecordingStore: a Store that forwards every call to another and records, for one key (the
// rendezvous state's), each compare-and-set this node attempted, for the invariant checker's S1
// and S10 (rendezvous_invariants.h).
//
// A write is recorded before it is sent, with its token (`base`) and this node's wall_now() at
// that moment and at its last read of the key; its outcome (the version it committed, or the
// version that won instead) is filled in when the reply comes. A node that dies with the call in
// flight leaves it without an outcome: the checker then accepts a commit on that token as possibly
// its own. With `record_values`, every write also records the state it sends ("d", hex, before it
// is sent): over etcd, whose history no node of the run records, the acknowledged writes are the
// history, and a write whose outcome never came back (its reply lost in an etcd restart, or its
// fiber cancelled meanwhile) can still be placed in it where later writes prove it committed
// (rendezvous_history.h).
// Everything else passes through untouched, errors included.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/runtime/clock.h"
#include "core/store/store.h"

namespace dagsim::scenarios {

class RecordingStore final : public store::Store {
 public:
  // `writes` is a JSON array in the node's record; `scenario_now` reads the scenario's clock.
  // All three outlive this.
  RecordingStore(store::Store& inner, std::string key, runtime::Clock& clock, nlohmann::json& writes,
                 std::function<runtime::TimePoint()> scenario_now, bool record_values = false);

  void set(const std::string& key, store::Bytes value) override { inner_.set(key, std::move(value)); }
  store::Bytes get(const std::string& key) override { return inner_.get(key); }
  store::Bytes compare_set(const std::string& key, const store::Bytes& expected, store::Bytes desired) override {
    return inner_.compare_set(key, expected, std::move(desired));
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  void wait(const std::vector<std::string>& keys) override { inner_.wait(keys); }
  bool check(const std::vector<std::string>& keys) override { return inner_.check(keys); }
  bool delete_key(const std::string& key) override { return inner_.delete_key(key); }
  int64_t num_keys() override { return inner_.num_keys(); }
  std::vector<store::Bytes> multi_get(const std::vector<std::string>& keys) override { return inner_.multi_get(keys); }
  void multi_set(const std::vector<std::string>& keys, std::vector<store::Bytes> values) override {
    inner_.multi_set(keys, std::move(values));
  }

  store::Versioned get_versioned(const std::string& key) override;
  store::CasOutcome compare_set_version(const std::string& key, uint64_t expected_version, store::Bytes desired) override;
  store::Versioned watch(const std::string& key, uint64_t known_version) override;
  store::Versioned watch_at_most(const std::string& key, uint64_t known_version, runtime::Duration timeout) override;

 private:
  template <typename F>
  store::Versioned read(const std::string& key, F&& call);

  store::Store& inner_;
  const std::string key_;
  runtime::Clock& clock_;
  nlohmann::json& writes_;
  std::function<runtime::TimePoint()> scenario_now_;
  runtime::TimePoint last_read_wall_{};
  const bool record_values_;
};

}  // namespace dagsim::scenarios
